//! What the fixture generators (`tools/gen_*.rs`) share: their command
//! line, `NAME [DIR]`.

use std::path::PathBuf;

/// The folder a fixture generator writes into: its one argument, or
/// `default` without one. `-h` or `--help` prints the usage and exits 0;
/// anything else (an option, a second argument) prints one line naming it
/// and exits 2, before anything is written.
pub fn output_dir(default: &str) -> PathBuf {
    let mut args = std::env::args();
    let name = args.next().unwrap_or_default();
    let usage = format!("usage: {name} [DIR]  (writes the fixtures into DIR; default {default})");
    match (args.next(), args.next()) {
        (None, _) => PathBuf::from(default),
        (Some(a), None) if a == "-h" || a == "--help" => {
            println!("{usage}");
            std::process::exit(0)
        }
        (Some(a), None) if !a.starts_with('-') => PathBuf::from(a),
        (Some(a), more) => {
            let what = more.map_or(format!("unknown option {a:?}"), |b| {
                format!("unexpected argument {b:?}")
            });
            eprintln!("{what}; {usage}");
            std::process::exit(2)
        }
    }
}
