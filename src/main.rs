//! The `tickguard` binary: flags → resolved configuration → run. Every
//! failure ends in one line on stderr and exit status 2.

#[path = "main/cli.rs"]
mod cli;
#[path = "main/inspect.rs"]
mod inspect;
#[path = "main/logq.rs"]
mod logq;
#[path = "main/user.rs"]
mod user;

use anyhow::{Context, Result};
use clap::Parser;
use cli::{CheckArgs, Cli, Command, ReplayArgs, RunArgs};
use std::io::{IsTerminal, Write};
use std::process::ExitCode;
use tickguard::capture::CaptureReader;
use tickguard::config::{Config, Protocol};
use tickguard::replay::{answer_json, load_checks};

fn main() -> ExitCode {
    // Whatever `run` queued is written before the process ends, a panic
    // unwinding through here included.
    let _flush = logq::FlushOnDrop;
    if let Err(e) = tickguard::sys::fail_writes_past_the_size_limit() {
        report(&anyhow::Error::new(e).context("ignoring SIGXFSZ"));
        return ExitCode::from(2);
    }
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    // `run` sets up logging once it has read its configuration.
    if !matches!(cli.command, Command::Run(_)) {
        init_logging("warn", tickguard::config::LogFormat::Plain);
    }
    let result = match cli.command {
        Command::Replay(args) => run_replay(args),
        Command::Run(args) => run_sidecar(args),
        Command::Check(args) => return check(args),
        Command::Stat(args) => stat(args),
        Command::Simulate(args) => args.run(),
        Command::Demo(args) => args.run(),
        Command::Inspect(args) => inspect::run(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            report(&e);
            ExitCode::from(2)
        }
    }
}

/// A command line clap refused, or asked for help or the version: help and
/// the version on stdout (exit 0, or 2 when stdout cannot take them), the
/// bare `tickguard` help on stderr (exit 2), any other problem as one line
/// (exit 2), like every other failure.
fn usage(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match e.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => {
            // Styled on a terminal, as clap prints it; a reader that stops
            // early (`| head`) is no failure.
            match e.print().and_then(|()| std::io::stdout().flush()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(io) if io.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
                Err(io) => {
                    report(&anyhow::Error::new(io).context("writing to stdout"));
                    ExitCode::from(2)
                }
            }
        }
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            let _ = e.print();
            ExitCode::from(2)
        }
        // clap's text names no argument: each one not valid UTF-8 is named
        // here, by its place and the word before it (a path may be any
        // bytes; a name, a feed or a user may not).
        ErrorKind::InvalidUtf8 => {
            let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
            let named: Vec<String> = args
                .iter()
                .enumerate()
                .filter(|(i, a)| *i > 0 && a.to_str().is_none())
                .map(|(i, a)| {
                    let before = args[i - 1].to_string_lossy();
                    format!(
                        "argument {i} ({}, after {before})",
                        a.as_encoded_bytes().escape_ascii()
                    )
                })
                .collect();
            report(&anyhow::anyhow!(
                "not valid UTF-8, where text is wanted: {} (see --help)",
                named.join(", ")
            ));
            ExitCode::from(2)
        }
        _ => {
            // clap's message, and its tip if it has one ("a similar
            // subcommand exists"), without its usage and hint, on one line.
            let text = e.render().to_string();
            let kept: Vec<String> = text
                .split("\n\n")
                .enumerate()
                .filter(|(i, p)| *i == 0 || p.trim_start().starts_with("tip:"))
                .map(|(_, p)| p.split_whitespace().collect::<Vec<_>>().join(" "))
                .collect();
            let line = kept.join("; ");
            let line = line.strip_prefix("error: ").unwrap_or(&line);
            report(&anyhow::anyhow!("{line} (see --help)"));
            ExitCode::from(2)
        }
    }
}

/// Prints an error as one line on stderr; a stderr that cannot be written
/// (full, closed, a vanished pipe) loses the line but never panics.
fn report(e: &anyhow::Error) {
    logq::line(logq::Level::Error, &format!("tickguard: {}", one_line(e)));
}

fn init_logging(default_level: &str, format: tickguard::config::LogFormat) {
    // Unset or empty: the default, quietly; set but not a filter: the
    // default, said once (a typo would otherwise pass unseen).
    // (An empty one is no filter at all, which would log nothing.)
    let set = std::env::var_os("RUST_LOG").is_some_and(|v| !v.is_empty());
    let filter = match set.then(tracing_subscriber::EnvFilter::try_from_default_env) {
        Some(Ok(f)) => f,
        Some(Err(e)) => {
            logq::line(
                logq::Level::Warn,
                &format!(
                    "tickguard: RUST_LOG is not a log filter ({e}): logging at {default_level}"
                ),
            );
            tracing_subscriber::EnvFilter::new(default_level)
        }
        None => tracing_subscriber::EnvFilter::new(default_level),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| logq::Stderr)
        .log_internal_errors(false);
    match format {
        tickguard::config::LogFormat::Plain => {
            let colours = std::io::stderr().is_terminal();
            logq::set_colours(colours);
            builder.with_ansi(colours).init()
        }
        tickguard::config::LogFormat::Json => builder.json().init(),
    }
}

/// The error chain on one line, control characters escaped, at most 1000 characters.
fn one_line(e: &anyhow::Error) -> String {
    let mut s = String::new();
    for (i, cause) in e.chain().enumerate() {
        if i > 0 {
            s.push_str(": ");
        }
        s.push_str(&cause.to_string().replace('\n', " "));
    }
    tickguard::config::one_line(&s, 1000)
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain()
        .filter_map(|c| c.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}

/// A warning on stderr: one line, never an error (a stderr that cannot be
/// written loses it, as [`report`] does).
fn warn(line: &str) {
    // One line, control bytes escaped, as errors are (a warning may name a
    // path given on the command line), whole.
    let line = tickguard::config::one_line(line, usize::MAX);
    logq::line(logq::Level::Warn, &format!("tickguard: warning: {line}"));
}

/// An output file can be written where it is named: its directory exists,
/// it is not itself a directory, and the directory takes the file
/// [`replace_file`] stages (tried, then removed). Checked before any work;
/// [`STDOUT`] passes.
fn check_output(flag: &str, path: &std::path::Path) -> Result<()> {
    if path.as_os_str() == STDOUT {
        return Ok(());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    if !dir.is_dir() {
        anyhow::bail!(
            "{flag} {}: directory {} does not exist",
            path.display(),
            dir.display()
        );
    }
    if path.is_dir() {
        anyhow::bail!("{flag} {}: is a directory", path.display());
    }
    // A name ending in '/' names a directory, which no file can become.
    if std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()).ends_with(b"/") {
        anyhow::bail!("{flag} {}: names a directory (ends in '/')", path.display());
    }
    // A link is written through, in place: to a file that must exist.
    let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if link && !path.exists() {
        anyhow::bail!(
            "{flag} {}: a link to a file that does not exist",
            path.display()
        );
    }
    // A file to be replaced is staged beside it: that the directory takes
    // a new file is tried now, not found out after the whole replay.
    match staging(path) {
        Some(staging) => {
            let cannot = |what: &str| {
                format!(
                    "{flag} {}: cannot {what} {}",
                    path.display(),
                    staging.display()
                )
            };
            std::fs::File::create_new(&staging).with_context(|| cannot("create"))?;
            std::fs::remove_file(&staging).with_context(|| cannot("remove the trial file"))?;
        }
        // One written in place (behind a link, or one no file may be
        // renamed over): that it opens for writing as [`write_in_place`]
        // opens it (without creating: a sticky directory's
        // `protected_regular` refuses O_CREAT on another user's file),
        // without cutting it.
        None if std::fs::metadata(path).is_ok_and(|m| m.is_file()) => {
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .with_context(|| format!("{flag} {}: cannot write it", path.display()))?;
        }
        None => {}
    }
    Ok(())
}

/// Whether a file may be renamed over `file` (an existing regular file)
/// in `dir`, as user `euid`: not onto a mount point (a file bind-mounted
/// there, as `docker -v out.json:/out/summary.json` does: its device is
/// not its directory's), nor in a sticky directory (`/tmp`) over another
/// user's file, unless the directory is this user's or this is root.
fn rename_over_allowed(file: &std::fs::Metadata, dir: &std::fs::Metadata, euid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mount_point = file.dev() != dir.dev();
    let sticky = dir.mode() & libc::S_ISVTX != 0;
    let not_ours = euid != 0 && file.uid() != euid && dir.uid() != euid;
    !(mount_point || sticky && not_ours)
}

/// The output path that means this process's standard output.
const STDOUT: &str = "-";

/// The files a command reads, each with what it is to the operator ("the
/// capture"): no output of the command may be written over one of them.
struct Inputs<'a>(Vec<(String, &'a std::path::Path)>);

impl<'a> Inputs<'a> {
    /// The configuration at `path`, and the files its feeds' keys name.
    fn of_config(path: &'a std::path::Path, config: &'a Config) -> Inputs<'a> {
        let mut inputs = vec![("the configuration".to_string(), path)];
        for (feed, file) in config.feed_files() {
            inputs.push((format!("feed {feed}'s file"), file));
        }
        Inputs(inputs)
    }

    /// Refuses `flag`'s output `path` when it is one of the inputs, by
    /// whatever name (the same device and inode), in one line.
    fn refuse(&self, flag: &str, path: &std::path::Path) -> Result<()> {
        let Some(out) = file_id(path) else {
            return Ok(());
        };
        match self.0.iter().find(|(_, p)| file_id(p) == Some(out)) {
            Some((what, _)) => anyhow::bail!(
                "{flag} {} is {what}: refusing to write over it (name another file)",
                path.display()
            ),
            None => Ok(()),
        }
    }
}

/// The device and inode of the regular file `path` names (links
/// followed); `None` when there is none, or it is not a regular file (a
/// device, a FIFO, a terminal: written in place, nothing is replaced, and
/// `/dev/null` may well be both an input and an output).
fn file_id(path: &std::path::Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path)
        .ok()
        .filter(|m| m.is_file())
        .map(|m| (m.dev(), m.ino()))
}

/// Where [`replace_file`] stages `path`'s new content (`.NAME.PID.NS.tmp`
/// beside it), or `None` when `path` is not a regular file to be replaced
/// (a device, a FIFO, a link, or a file no other may be renamed over
/// ([`rename_over_allowed`]): written in place).
fn staging(path: &std::path::Path) -> Option<std::path::PathBuf> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => std::path::Path::new("."),
    };
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    let regular = match std::fs::symlink_metadata(path) {
        Ok(m) => {
            m.is_file() && std::fs::metadata(dir).is_ok_and(|d| rename_over_allowed(&m, &d, euid))
        }
        Err(e) => e.kind() == std::io::ErrorKind::NotFound,
    };
    let name = path.file_name().filter(|_| regular)?;
    let mut staged = std::ffi::OsString::from(".");
    staged.push(name);
    // The process and the time: one a replay killed part way left (a
    // process of the same number later, PID 1 in a container) is never
    // in the way.
    let ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    staged.push(format!(".{}.{ns}.tmp", std::process::id()));
    Some(path.with_file_name(staged))
}

fn run_replay(args: ReplayArgs) -> Result<()> {
    let started = std::time::Instant::now();
    if let (Some(s), Some(t)) = (&args.summary, &args.timeline) {
        // The same file by name (`out.json`, `./out.json`) or, when it
        // exists, by inode (a link).
        let absolute = |p: &std::path::Path| std::path::absolute(p).ok();
        // (Both this process's standard output, by `-` or a name for it:
        // one after the other in one stream.)
        let stdout = |p: &std::path::Path| p.as_os_str() == STDOUT || is_own_stdout(p);
        if s == t
            || absolute(s) == absolute(t)
            || file_id(s).is_some_and(|s| file_id(t) == Some(s))
            || (stdout(s) && stdout(t))
        {
            anyhow::bail!(
                "--summary and --timeline both name {}: one would replace the other",
                s.display()
            );
        }
    }
    // Validate everything before reading the capture.
    for (flag, path) in [("--summary", &args.summary), ("--timeline", &args.timeline)] {
        if let Some(path) = path {
            check_output(flag, path)?;
        }
    }
    let config = Config::load(&args.config)?;
    let mut inputs = Inputs::of_config(&args.config, &config);
    inputs.0.push(("the capture".into(), &args.capture));
    if let Some(path) = &args.checks {
        inputs.0.push(("the checks".into(), path));
    }
    for (flag, path) in [("--summary", &args.summary), ("--timeline", &args.timeline)] {
        if let Some(path) = path.as_deref().filter(|p| p.as_os_str() != STDOUT) {
            inputs.refuse(flag, path)?;
        }
    }
    let checks = match &args.checks {
        Some(path) => load_checks(path)?,
        None => Vec::new(),
    };
    // Said once the replay is sure to start: a run refused before it says
    // one line.
    let mut warnings =
        tickguard::replay::check_warnings(&config, &args.config.display().to_string(), &checks);
    let target = explain_target(&config, &args)?;
    let mdp3 = mdp3_target(&config, &args)?;
    // --at is answered by the replay itself, as one more check.
    let asked = checks.len();
    let mut checks = checks;
    if let (Some(at), Some(v)) = (args.at, &args.explain) {
        checks.push(tickguard::replay::Check {
            time_ns: at,
            feed: v[0].clone(),
            symbol: v[1].clone(),
        });
    }
    let itch_target = target.filter(|&(id, _)| {
        config.feeds[id as usize].protocol == tickguard::config::Protocol::Itch50
    });
    if let (Some((id, _)), Some(_)) = (itch_target, &args.timeline) {
        anyhow::bail!(
            "--timeline draws SQF feeds only: '{}' is an itch50 feed (drop --timeline, or --explain an SQF feed)",
            config.feeds[id as usize].name
        );
    }
    let sqf = |f: &tickguard::config::FeedConfig| f.protocol == tickguard::config::Protocol::Sqf;
    if args.timeline.is_some() && !config.feeds.iter().any(sqf) {
        // An empty drawing, exit 0, would read as "nothing happened".
        anyhow::bail!("--timeline draws SQF feeds only, and the configuration has none");
    }
    // --feed names a feed of the configuration, whatever else is asked.
    if let Some(name) = args.feed.as_ref().filter(|n| config.feed_id(n).is_none()) {
        let known: Vec<&str> = config.feeds.iter().map(|f| f.name.as_str()).collect();
        anyhow::bail!(
            "--feed: no feed '{name}' in {} (feeds: {})",
            args.config.display(),
            known.join(", ")
        );
    }
    if let Some(only) = args.feed.as_deref() {
        warnings.extend(tickguard::replay::checks_of_other_feeds(
            &config,
            only,
            &checks[..asked],
        ));
    }
    if let (Some(feed), Some(date)) = (&args.feed, args.date) {
        let total = std::fs::metadata(&args.capture).map_or(0, |m| m.len());
        let bar = progress_bar(&args, total);
        // The file is opened (or refused) by the replay itself: its first
        // progress says it started, or its end (a file too short to show
        // progress).
        let said = std::cell::Cell::new(false);
        let say = || {
            if !said.replace(true) {
                warnings.iter().for_each(|line| warn(line));
            }
        };
        let progress = |p| {
            say();
            show_progress(&bar, p)
        };
        let Some((id, symbol)) = itch_target else {
            // Another feed than the file's gets nothing; the file's own
            // feed, not itch50, is refused by the replay in its words.
            if let Some((id, _)) = target.filter(|&(id, _)| config.feed_id(feed) != Some(id)) {
                anyhow::bail!(
                    "--explain: feed '{}' is not the BinaryFILE's --feed '{feed}'",
                    config.feeds[id as usize].name
                );
            }
            let outcome = tickguard::replay::itch50::replay_file_until(
                &config,
                feed,
                date,
                &args.capture,
                &checks,
                args.until,
                progress,
                &mut (),
            )
            .map_err(anyhow::Error::msg)?;
            say();
            let outcome = input_ended(&bar, &config, &args, &checks[..asked], outcome, started)?;
            return finish_replay(&args, &checks, outcome);
        };
        if config.feed_id(feed) != Some(id) {
            anyhow::bail!(
                "--explain: feed '{}' is not the BinaryFILE's --feed '{feed}'",
                config.feeds[id as usize].name
            );
        }
        let mut x = tickguard::explain::itch::ItchExplain::new(
            id,
            &config.feeds[id as usize],
            symbol,
            args.at,
        );
        let outcome = tickguard::replay::itch50::replay_file_until(
            &config,
            feed,
            date,
            &args.capture,
            &checks,
            args.until,
            progress,
            &mut x,
        )
        .map_err(anyhow::Error::msg)?;
        say();
        let outcome = input_ended(&bar, &config, &args, &checks[..asked], outcome, started)?;
        return finish_itch_explain(&args, &x, outcome);
    }
    // --feed without --date: every datagram of the capture to that feed
    // (a feed of the configuration: checked above).
    let feed = args.feed.as_deref().and_then(|name| config.feed_id(name));
    if let Some(id) = feed {
        // Every datagram goes to this feed: another explained would see
        // none, which would read as a fact of the capture.
        let explained = target
            .map(|(id, _)| id)
            .or(mdp3.as_ref().map(|(id, _)| *id));
        if let Some(other) = explained.filter(|&e| e != id) {
            anyhow::bail!(
                "--explain: feed '{}' gets no datagram: --feed '{}' sends it every one (explain that feed, or replay without --feed)",
                config.feeds[other as usize].name,
                config.feeds[id as usize].name
            );
        }
        // Line A takes all: another service's datagrams (snapshots,
        // definitions, recovery) would be read as line A's.
        let f = &config.feeds[usize::from(id)];
        use tickguard::config::services::Receive;
        let others: Vec<&str> = f
            .services()
            .iter()
            .skip(1)
            .filter(|s| match &s.receive {
                Receive::Lines(lines) => !lines.is_empty(),
                Receive::Channel(_) => true,
                // (TCP: segments go by their server's address still.)
                Receive::Stream(_) => false,
            })
            .map(|s| s.key)
            .collect();
        if !others.is_empty() {
            warnings.push(format!(
                "--feed {}: every datagram goes to its line A, so datagrams of its {} in the capture would be read as line A's (replay without --feed to route by destination)",
                f.name,
                others.join(", ")
            ));
        }
    }
    let options = tickguard::replay::Options {
        until: args.until,
        feed,
    };
    let mut capture = CaptureReader::open(&args.capture)?;
    warnings.iter().for_each(|line| warn(line));
    let bar = progress_bar(&args, capture.len().unwrap_or(0));
    let progress = |p| show_progress(&bar, p);
    if let Some((id, instrument)) = mdp3 {
        let mut x = tickguard::explain::mdp3::Mdp3Explain::new(
            id,
            &config.feeds[id as usize],
            &instrument,
            args.at,
        );
        let outcome = tickguard::replay::replay_until(
            &config,
            &mut capture,
            &checks,
            options,
            progress,
            &mut x,
        );
        let outcome = input_ended(&bar, &config, &args, &checks[..asked], outcome, started)?;
        warn_at_after_end(&args, x.last_arrival(), &outcome);
        let text = match (args.at, outcome.answers.last()) {
            (Some(at), Some(answer)) => x.answer_at(at, answer.reasons),
            _ => x.explanation(args.explain_all),
        };
        let shown = write_explanation(&text);
        return worst([shown, write_summary(&args, outcome)]);
    }
    if let Some((id, symbol)) = itch_target {
        let mut x = tickguard::explain::itch::ItchExplain::new(
            id,
            &config.feeds[id as usize],
            symbol,
            args.at,
        );
        let outcome = tickguard::replay::replay_until(
            &config,
            &mut capture,
            &checks,
            options,
            progress,
            &mut x,
        );
        let outcome = input_ended(&bar, &config, &args, &checks[..asked], outcome, started)?;
        return finish_itch_explain(&args, &x, outcome);
    }
    let mut forensics = None;
    let outcome = if target.is_some() || args.timeline.is_some() {
        let mut f = tickguard::explain::sqf::Forensics::new(
            &config.feeds,
            target,
            args.timeline.is_some(),
            args.at,
        );
        let outcome = tickguard::replay::replay_until(
            &config,
            &mut capture,
            &checks,
            options,
            progress,
            &mut f,
        );
        f.finish();
        forensics = Some(f);
        outcome
    } else {
        tickguard::replay::replay_until(&config, &mut capture, &checks, options, progress, &mut ())
    };
    let outcome = input_ended(&bar, &config, &args, &checks[..asked], outcome, started)?;
    if let Some(f) = &forensics {
        warn_at_after_end(&args, f.last_arrival(), &outcome);
    }

    let shown = (|| -> Result<()> {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        match (&forensics, target) {
            // With --explain, stdout carries only the explanation.
            (Some(f), Some(_)) => {
                let text = match (args.at, outcome.answers.last()) {
                    (Some(at), Some(answer)) => f.answer_at(at, answer.reasons),
                    _ => f.explanation(args.explain_all),
                };
                out.write_all(text.as_bytes())
                    .context("writing explanation")?;
            }
            _ => {
                for (check, answer) in checks.iter().zip(&outcome.answers) {
                    writeln!(out, "{}", answer_json(check, *answer)).context("writing results")?;
                }
            }
        }
        out.flush().context("writing results")
    })();
    // A reader that stops early (`| head`) stops the results only: the
    // timeline, the summary and the exit status are still the replay's.
    let timeline = match (&forensics, &args.timeline) {
        (Some(f), Some(path)) => {
            let title = args.capture.display().to_string();
            replace_file(path, f.timeline_svg(&title).as_bytes())
                .with_context(|| format!("writing timeline {}", path.display()))
        }
        _ => Ok(()),
    };
    let summary = write_summary(&args, outcome);
    worst([shown, timeline, summary])
}

/// `--explain FEED SYMBOL`, resolved: a feed the configuration lacks is an
/// error; a symbol that is valid but never seen gets one line saying so.
fn explain_target(
    config: &Config,
    args: &ReplayArgs,
) -> Result<Option<(u16, tickguard::symbol::Symbol)>> {
    let Some(v) = &args.explain else {
        return Ok(None);
    };
    let (feed, symbol) = (&v[0], &v[1]);
    let Some(id) = config.feed_id(feed) else {
        let known: Vec<_> = config.feeds.iter().map(|f| f.name.as_str()).collect();
        anyhow::bail!(
            "--explain: no feed '{feed}' in {} (feeds: {})",
            args.config.display(),
            known.join(", ")
        );
    };
    // Which explanation, by protocol (no arm for "any other": a protocol
    // added without its explanation would otherwise get SQF's, which
    // reads none of its datagrams and says its symbols were never seen).
    use tickguard::config::Protocol;
    match config.feeds[id as usize].protocol {
        // Named by Symbol or #SecurityID: see `mdp3_target`.
        Protocol::Mdp3 => return Ok(None),
        // By symbol: ITCH's (`ItchExplain`) or SQF's (`Forensics`).
        Protocol::Sqf | Protocol::Itch50 => {}
    }
    let Some(sym) = tickguard::symbol::Symbol::parse(symbol) else {
        anyhow::bail!(
            "--explain: '{symbol}' is not a valid symbol (1 to 8 printable ASCII characters, no spaces)"
        );
    };
    Ok(Some((id, sym)))
}

/// `--explain FEED INSTRUMENT` on an mdp3 feed, resolved: the instrument
/// is a Symbol (up to 20 characters) or `#SecurityID`. `None` for any
/// other feed (see [`explain_target`]).
fn mdp3_target(config: &Config, args: &ReplayArgs) -> Result<Option<(u16, String)>> {
    let Some(v) = &args.explain else {
        return Ok(None);
    };
    let (feed, instrument) = (&v[0], &v[1]);
    let Some(id) = config.feed_id(feed) else {
        return Ok(None);
    };
    let protocol = config.feeds[id as usize].protocol;
    if protocol != tickguard::config::Protocol::Mdp3 {
        return Ok(None);
    }
    if let Some(problem) = protocol.name_problem(instrument) {
        anyhow::bail!("--explain: '{instrument}' is {problem}");
    }
    if args.timeline.is_some() {
        anyhow::bail!(
            "--timeline draws SQF feeds only: '{feed}' is an mdp3 feed (drop --timeline, or --explain an SQF feed)"
        );
    }
    if args.date.is_some() {
        anyhow::bail!("--explain: '{feed}' is an mdp3 feed; --date replays a Nasdaq BinaryFILE");
    }
    Ok(Some((id, instrument.clone())))
}

/// The replay's progress bar on stderr: only when stderr is a terminal and
/// `--no-progress` is not given. `total` is the input file's size in bytes.
fn progress_bar(args: &ReplayArgs, total: u64) -> Option<indicatif::ProgressBar> {
    (!args.no_progress && std::io::stderr().is_terminal()).then(|| {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {msg} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    })
}

/// Moves the bar to `p`: bytes of the file read, and messages per second.
fn show_progress(bar: &Option<indicatif::ProgressBar>, p: tickguard::replay::Progress) {
    if let Some(b) = bar {
        b.set_position(p.bytes);
        let secs = b.elapsed().as_secs_f64();
        if secs > 0.0 {
            b.set_message(format!("{:.0} msg/s", p.messages as f64 / secs));
        }
    }
}

/// The end of an ITCH `--explain` replay (capture or BinaryFILE): the
/// warning for an `--at` past the end, the explanation (or the answer at
/// `--at`), then the summary.
fn finish_itch_explain(
    args: &ReplayArgs,
    x: &tickguard::explain::itch::ItchExplain,
    outcome: tickguard::replay::Outcome,
) -> Result<()> {
    warn_at_after_end(args, x.last_arrival(), &outcome);
    let text = match (args.at, outcome.answers.last()) {
        (Some(at), Some(answer)) => x.answer_at(at, answer.reasons),
        _ => x.explanation(args.explain_all),
    };
    let shown = write_explanation(&text);
    worst([shown, write_summary(args, outcome)])
}

fn clear_progress(bar: &Option<indicatif::ProgressBar>) {
    if let Some(b) = bar {
        b.finish_and_clear();
    }
}

/// Warns when `--at` is after the input's last arrival (or there was none).
fn warn_at_after_end(args: &ReplayArgs, last: Option<u64>, outcome: &tickguard::replay::Outcome) {
    let Some(at) = args.at else {
        return;
    };
    // The --at check is the last one asked.
    if outcome.answers.last().is_some_and(|a| a.past_break) {
        warn(&format!(
            "--at {} is past the input's break: the answer is from the state at the break, what came after it unread",
            tickguard::explain::iso(at)
        ));
        return;
    }
    // A BinaryFILE (`--date`) holds records, of which only the valid
    // ones count.
    let (last_one, none) = match args.date {
        Some(_) => (
            "the file's last valid record",
            "the file holds no valid record",
        ),
        None => (
            "the capture's last datagram",
            "the capture holds no datagram",
        ),
    };
    match last {
        Some(last) if at > last => warn(&format!(
            "--at {} is {:.3} ms after {last_one} ({}): the answer assumes nothing arrived after it",
            tickguard::explain::iso(at),
            (at - last) as f64 / 1e6,
            tickguard::explain::iso(last)
        )),
        None => warn(&format!("--at {}: {none}", tickguard::explain::iso(at))),
        Some(_) => {}
    }
}

/// With --explain, stdout carries only the explanation.
fn write_explanation(text: &str) -> Result<()> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    out.write_all(text.as_bytes())
        .context("writing explanation")?;
    out.flush().context("writing explanation")
}

/// The end of a BinaryFILE replay: results on stdout, then as any replay.
fn finish_replay(
    args: &ReplayArgs,
    checks: &[tickguard::replay::Check],
    outcome: tickguard::replay::Outcome,
) -> Result<()> {
    let shown = (|| {
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for (check, answer) in checks.iter().zip(&outcome.answers) {
            writeln!(out, "{}", answer_json(check, *answer)).context("writing results")?;
        }
        out.flush().context("writing results")
    })();
    let summary = write_summary(args, outcome);
    worst([shown, summary])
}

/// After a replay's input: the progress bar cleared; then, when a feed's
/// file read before the capture (MDP3 `definitions`) failed, the error
/// alone (nothing was replayed: no answers, explanation or summary to
/// write); else the warnings about the input, and the outcome.
fn input_ended(
    bar: &Option<indicatif::ProgressBar>,
    config: &Config,
    args: &ReplayArgs,
    checks: &[tickguard::replay::Check],
    outcome: tickguard::replay::Outcome,
    started: std::time::Instant,
) -> Result<tickguard::replay::Outcome> {
    clear_progress(bar);
    if let Some(e @ tickguard::replay::InputError::Preload(_)) = outcome.input_error {
        return Err(e.into());
    }
    warn_input(config, &outcome, started);
    let until = args.until;
    // An --at before anything arrived answers for an empty state: seconds
    // or ms given by mistake, most likely.
    if let (Some(at), Some((first, _))) = (args.at, outcome.summary.capture.span_ns) {
        if at < first {
            warn(&format!(
                "--at {} is before the input's first record ({}): the answer is the state before anything arrived (TIME is ns since the Unix epoch, or a time with its zone like 2026-01-05T09:00:00Z)",
                tickguard::explain::iso(at),
                tickguard::explain::iso(first)
            ));
        }
    }
    // Every check before the first datagram: answered before anything
    // arrived (`no_quote`), most likely times in seconds or ms.
    if let (Some(latest), Some((first, _))) = (
        checks.iter().map(|c| c.time_ns).max(),
        outcome.summary.capture.span_ns,
    ) {
        if latest < first {
            warn(&format!(
                "every check of {} is before the input's first record ({}; the latest check is at {}): each was answered before any datagram arrived (time_ns is ns since the Unix epoch)",
                args.checks.as_deref().unwrap_or(std::path::Path::new("-")).display(),
                tickguard::explain::iso(first),
                tickguard::explain::iso(latest)
            ));
        }
    }
    // Checks after the input's last record: answered from the state at
    // its end, which no datagram after it could change (a capture stopped
    // early reads `ok` there until its staleness says otherwise).
    if let (Some((_, last)), None) = (outcome.summary.capture.span_ns, &outcome.input_error) {
        let after = checks.iter().filter(|c| c.time_ns > last);
        if let Some(latest) = after.clone().map(|c| c.time_ns).max() {
            warn(&format!(
                "{} of the checks of {} are after the input's last record ({}; the latest at {}): each was answered from the state at the input's end, as if nothing arrived after it",
                after.count(),
                args.checks.as_deref().unwrap_or(std::path::Path::new("-")).display(),
                tickguard::explain::iso(last),
                tickguard::explain::iso(latest)
            ));
        }
    }
    // Deadlines only run forward: an --until before the input's end reaches
    // only feeds whose last datagram came before it (in seconds or ms by
    // mistake, most likely).
    if let (Some(until), Some((_, last))) = (until, outcome.summary.capture.span_ns) {
        if until < last {
            warn(&format!(
                "--until {} is before the input's last record ({}): it runs only the deadlines of feeds whose last datagram came before it (TIME is ns since the Unix epoch, or a time with its zone like 2026-01-05T16:00:00Z)",
                tickguard::explain::iso(until),
                tickguard::explain::iso(last)
            ));
        }
    }
    Ok(outcome)
}

/// Warns about an input that gave the feeds nothing to use, then ends
/// with the replay's line for a person (what was read, how fast, the gaps
/// still open) and, per feed with a gap open, how to let it expire.
fn warn_input(config: &Config, outcome: &tickguard::replay::Outcome, started: std::time::Instant) {
    // Broken before its first record, or not of its format at all: the
    // error, written last, is the one line that says why (not "holds no
    // packets", not "replayed 0", not "all records are invalid").
    let summary = &outcome.summary;
    if outcome.input_error.as_ref().is_some_and(|e| e.foreign()) {
        return;
    }
    if outcome.input_error.is_some()
        && summary.capture.reader.records == 0
        && summary
            .feeds
            .values()
            .all(|f| f.file_records().is_none_or(|r| r.records == 0))
    {
        return;
    }
    for line in tickguard::replay::input_warnings(config, &outcome.summary) {
        warn(&line);
    }
    let wall_s = started.elapsed().as_secs_f64();
    let mut lines = tickguard::replay::end_lines(&outcome.summary, wall_s).into_iter();
    if let Some(first) = lines.next() {
        let _ = writeln!(std::io::stderr(), "tickguard: {first}");
    }
    for line in lines {
        warn(&line);
    }
}

/// Writes `--summary`, then fails if the input broke part way (that
/// failure first: a summary on a stdout whose reader left must not hide
/// it).
fn write_summary(args: &ReplayArgs, outcome: tickguard::replay::Outcome) -> Result<()> {
    let written = match &args.summary {
        Some(path) => serde_json::to_string_pretty(&outcome.summary)
            .context("encoding summary")
            .and_then(|mut json| {
                json.push('\n');
                replace_file(path, json.as_bytes())
                    .with_context(|| format!("writing summary {}", path.display()))
            }),
        None => Ok(()),
    };
    let input = match outcome.input_error {
        Some(e) => Err(e.into()),
        None => Ok(()),
    };
    worst([input, written])
}

/// The first failure of `results` that is not a broken pipe (the quiet end
/// of a `| head`, which [`is_broken_pipe`] lets exit 0), else the first
/// broken pipe: a reader leaving early stops what went to it, never the
/// report of a real failure.
fn worst<const N: usize>(results: [Result<()>; N]) -> Result<()> {
    let mut pipe = None;
    for r in results {
        match r {
            Ok(()) => {}
            Err(e) if is_broken_pipe(&e) => {
                pipe.get_or_insert(e);
            }
            Err(e) => return Err(e),
        }
    }
    pipe.map_or(Ok(()), Err)
}

/// Rewrites the existing regular file `path` whole, in place: opened
/// for writing and cut, never created (as [`check_output`] tried it);
/// through a link only when `path` was one (a file of another user's,
/// swapped for a link since, is not followed).
fn write_in_place(path: &std::path::Path, bytes: &[u8], through_link: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let nofollow = if through_link { 0 } else { libc::O_NOFOLLOW };
    std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .custom_flags(nofollow)
        .open(path)
        .and_then(|mut f| f.write_all(bytes))
}

/// Writes `bytes` to `path` whole or not at all: into a new file beside
/// it, renamed over it once written, so that a full disk or a signal part
/// way leaves the previous file (or none), never a torn one. A path that
/// exists and is not a regular file (`/dev/stdout`, a pipe, a symbolic
/// link), or one no file may be renamed over ([`rename_over_allowed`]), is
/// written in place.
fn replace_file(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    if path.as_os_str() == STDOUT || is_own_stdout(path) {
        // This process's own stdout, where it stands (after the results),
        // by `-` or by a name (`/dev/stdout`: which could not be opened
        // were it a socket, as under systemd, and would be cut to nothing
        // were it a file).
        let mut out = std::io::stdout().lock();
        return out.write_all(bytes).and_then(|()| out.flush());
    }
    let Some(staging) = staging(path) else {
        // In place: a regular file behind a link is rewritten whole; a
        // pipe or a device is written without waiting on a FIFO no one
        // reads.
        if std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
            return write_in_place(path, bytes, link);
        }
        return tickguard::sys::open_writer(path)
            .and_then(|mut f| f.write_all(bytes))
            .map_err(|e| lost_reader(path, e));
    };
    let staged = std::fs::File::create_new(&staging)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_data()));
    if let Err(e) = staged {
        let _ = std::fs::remove_file(&staging);
        return Err(e);
    }
    let written = match std::fs::rename(&staging, path) {
        // A mount point the check could not tell (a file bind-mounted
        // from the same filesystem), or a file another user made in a
        // sticky directory since the check: written in place instead.
        Err(e)
            if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EPERM))
                && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_file()) =>
        {
            write_in_place(path, bytes, false).map_err(|_| e)
        }
        other => other,
    };
    match written {
        Ok(()) => {
            // (The write in place leaves it.)
            let _ = std::fs::remove_file(&staging);
            Ok(())
        }
        // Whole, but not where it was asked for: kept, and named.
        Err(e) => Err(std::io::Error::new(
            e.kind(),
            format!("{e}; the whole file is kept at {}", staging.display()),
        )),
    }
}

/// A broken pipe writing `path` is an error, not the quiet end of a
/// `| head` (which [`is_broken_pipe`] lets exit 0), unless `path` is this
/// process's own standard output.
fn lost_reader(path: &std::path::Path, e: std::io::Error) -> std::io::Error {
    if e.kind() != std::io::ErrorKind::BrokenPipe || is_own_stdout(path) {
        return e;
    }
    std::io::Error::other("the pipe's reader went away before it was written")
}

/// Whether `path` names this process's standard output (the same device
/// and inode: `/dev/stdout`, `/proc/self/fd/1`, the file it goes to).
fn is_own_stdout(path: &std::path::Path) -> bool {
    use std::os::fd::AsFd;
    use std::os::unix::fs::MetadataExt;
    let id = |m: std::fs::Metadata| (m.dev(), m.ino());
    let stdout = std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .and_then(|fd| std::fs::File::from(fd).metadata())
        .map(id);
    std::fs::metadata(path)
        .map(id)
        .is_ok_and(|p| stdout.is_ok_and(|o| o == p))
}

/// What `run` logs before it starts, in an operator's words: the
/// publication and the receive thread, then one line per feed.
fn startup_lines(path: &std::path::Path, config: &Config) -> Vec<String> {
    let s = &config.sidecar;
    let ms = |ns: u64| ns / 1_000_000;
    let cpu = s
        .cpu
        .map_or("not pinned".into(), |c| format!("pinned to CPU {c}"));
    let idle = match s.idle {
        tickguard::config::Idle::Spin => "spins when idle".to_string(),
        tickguard::config::Idle::Yield => "yields when idle".to_string(),
        tickguard::config::Idle::Sleep => format!("sleeps {} µs when idle", s.idle_sleep_us),
    };
    let metrics = if config.metrics.enabled {
        format!(
            "metrics on http://{}/metrics every {} ms",
            config.metrics.listen,
            ms(config.metrics.interval_ns)
        )
    } else {
        "metrics off".into()
    };
    let mut lines = vec![format!(
        "starting from {}: publication {} (mode {:o}, {} symbol slots), heartbeat every {} ms, \
         check, stat and metrics given this file call the writer dead after {} ms (a gateway's \
         reader: after the bound it is given); receive thread {cpu}, {idle}, batches of {} \
         datagrams, socket buffer {} bytes asked; {metrics}",
        path.display(),
        s.shm_path.display(),
        s.shm_mode,
        config.capacity,
        ms(s.heartbeat_ns),
        ms(s.dead_after_ns),
        s.batch,
        s.rcvbuf_bytes,
    )];
    for f in &config.feeds {
        // SQF's kind; an exchange feed has none to show.
        let kind = match f.protocol {
            tickguard::config::Protocol::Sqf => match f.kind {
                tickguard::state::FeedKind::Full => " (full quotes)",
                tickguard::state::FeedKind::Delta => " (delta quotes)",
            },
            _ => "",
        };
        let addrs: Vec<String> = f.lines.iter().map(ToString::to_string).collect();
        let source = f.source.map_or(String::new(), |s| format!(" from {s}"));
        lines.push(format!(
            "feed {}: {}{kind} on {}{source}; stale after {} ms of silence, stale_at_source after \
             {} ms of source age, clock offset {}, {} symbol overrides",
            f.name,
            f.protocol.as_str(),
            addrs.join(" and "),
            ms(f.thresholds.stale_ns),
            ms(f.thresholds.source_ns),
            f.offset,
            f.named_overrides.len()
        ));
    }
    lines
}

fn run_sidecar(args: RunArgs) -> Result<()> {
    // An operator's SIGUSR1 from the start on is a request, not the end of
    // the process (the receive loop looks at it once running): handled
    // before the configuration is read, which a large or piped one makes
    // long; a failure to install it is told once logging is up.
    let resync = tickguard::sys::resync_on_sigusr1();
    let config = match Config::load(&args.config) {
        Ok(c) => c,
        Err(e) => {
            init_logging("info", tickguard::config::LogFormat::Plain);
            return Err(e.into());
        }
    };
    // The receive thread logs too: through a queue, never waiting on stderr.
    logq::start(matches!(
        config.log_format,
        tickguard::config::LogFormat::Json
    ));
    init_logging("info", config.log_format);
    let shutdown = tickguard::sys::shutdown_on_signals().context("installing signal handlers")?;
    logq::stop_on_failure(shutdown);
    if let Err(e) = resync {
        tracing::warn!(error = %e, "no SIGUSR1 handler: operators cannot ask for snapshots");
    }
    let stop_while_starting = || stopped_starting(shutdown, logq::thread_failed);
    // Everything that can fail comes before the publication is touched:
    // the writer lock, the line sockets, the metrics listener, then the
    // recording (last: it empties its file, which a start failing after
    // it would have emptied for nothing).
    let mut sidecar = tickguard::sidecar::Sidecar::prepare(&config)?;
    if stop_while_starting()? {
        return Ok(());
    }
    if config.metrics.enabled {
        tickguard::metrics::install(config.metrics.listen)?;
    }
    if let Some(path) = &args.record {
        Inputs::of_config(&args.config, &config).refuse("--record", path)?;
        if stop_while_starting()? {
            return Ok(());
        }
        sidecar.record(path, args.record_max_mb.map(|mb| mb << 20))?;
    }
    // What runs, once nothing before the publication can fail: a start
    // that fails ends in its one line, not after the banner.
    for line in startup_lines(&args.config, &config) {
        tracing::info!("{line}");
    }
    if stop_while_starting()? {
        return Ok(());
    }
    sidecar.publish()?;
    // Sampled with metrics off too (its logs are the operator's), from the
    // publication this run made.
    let stop_metrics = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let monitor = tickguard::metrics::spawn(
        &config,
        sidecar.shared_stats(),
        stop_metrics.clone(),
        std::time::Duration::from_nanos(config.metrics.interval_ns),
        config.metrics.enabled,
    )
    .context("starting the monitor thread")
    // Published already: closed, so that its readers answer stale at
    // once, not once its heartbeat has aged.
    .inspect_err(|_| sidecar.close())?;
    let stats = sidecar.run(shutdown);
    stop_metrics.store(true, std::sync::atomic::Ordering::Relaxed);
    monitor.thread().unpark();
    let _ = monitor.join();
    tracing::info!(
        cycles = stats.cycles,
        datagrams = stats.datagrams,
        worst_cycle_us = stats.worst_cycle_ns / 1000,
        "run ended"
    );
    let recorded = match &args.record {
        Some(path) => recording_complete(path, &stats),
        None => Ok(()),
    };
    if logq::thread_failed() {
        anyhow::bail!("a thread of the sidecar failed (its message is above): stopped");
    }
    if let Some(why) = sidecar.fatal() {
        anyhow::bail!("{why}: stopped, its publication closed");
    }
    recorded
}

/// The end of a `run --record`: an error (so exit 2) naming what is
/// missing when the recording does not hold every datagram applied, so a
/// script that keeps the file for replay does not take a cut one for the
/// whole run.
fn recording_complete(path: &std::path::Path, stats: &tickguard::sidecar::RunStats) -> Result<()> {
    let mut why = Vec::new();
    if stats.record_stopped {
        why.push(match stats.record_errno {
            tickguard::sidecar::RECORD_BOUND_REACHED => {
                "it stopped at its --record-max-mb bound".to_string()
            }
            tickguard::sidecar::RECORD_FELL_BEHIND => {
                "it stopped when the disk fell behind the feed".to_string()
            }
            0 => "it stopped at a failed write".to_string(),
            n => format!(
                "it stopped at a failed write ({})",
                std::io::Error::from_raw_os_error(n)
            ),
        });
    }
    if stats.unrecorded > 0 {
        why.push(format!(
            "{} datagrams and segments were not recorded",
            stats.unrecorded
        ));
    }
    if let Some(e) = &stats.record_unfinished {
        why.push(format!(
            "finishing it failed ({e}): the disk may not hold all of what was written"
        ));
    }
    if why.is_empty() {
        return Ok(());
    }
    anyhow::bail!(
        "the recording {} is incomplete: {}",
        path.display(),
        why.join("; ")
    )
}

/// The shared-memory path and dead-writer bound (ms) from the flags, then
/// the configuration (only its `[sidecar]` table is used: a feed's files
/// need not be there); `None` for the bound when neither gives one (see
/// [`open_reader`]).
fn shm_target(
    shm: &Option<std::path::PathBuf>,
    config: &Option<std::path::PathBuf>,
    dead_after_ms: Option<u64>,
) -> Result<(std::path::PathBuf, Option<u64>)> {
    let (mut path, mut bound) = (None, None);
    if let Some(c) = config {
        let config = Config::read(c)?;
        path = Some(config.sidecar.shm_path.clone());
        bound = Some(config.sidecar.dead_after_ns / 1_000_000);
    }
    let path = shm
        .clone()
        .or(path)
        .unwrap_or_else(|| "/dev/shm/tickguard".into());
    Ok((path, dead_after_ms.or(bound)))
}

/// The dead-writer bound when neither a flag nor a configuration gives
/// one, ms: the reader's default.
const DEFAULT_DEAD_AFTER_MS: u64 = tickguard::reader::DEFAULT_DEAD_AFTER_NS / 1_000_000;

/// The error line of an unusable publication at `shown`: each names the
/// path, a bad state word (which [`Health`] holds alone) included.
fn unusable(health: &tickguard::Health, shown: &str) -> String {
    match health {
        tickguard::Health::BadState(_) => health.to_string().replacen(
            "unusable publication: ",
            &format!("unusable publication: {shown}: "),
            1,
        ),
        _ => health.to_string(),
    }
}

/// Opens the publication at `path` for a reader owned by `owner`, with
/// `bound_ms` as the dead-writer bound, else [`follow_the_heartbeat`].
fn open_reader(
    path: &std::path::Path,
    bound_ms: Option<u64>,
    owner: Option<u32>,
) -> tickguard::Reader {
    let options = tickguard::reader::ReaderOptions {
        dead_after_ns: bound_ms
            .unwrap_or(DEFAULT_DEAD_AFTER_MS)
            .saturating_mul(1_000_000),
        owner,
    };
    let mut reader = tickguard::Reader::open_with(path, options);
    if bound_ms.is_none() {
        follow_the_heartbeat(&mut reader);
    }
    reader
}

/// The dead-writer bound without one given: 100 ms, raised to three of
/// the writer's heartbeat periods as the publication states them (what a
/// configuration without `idle = "sleep"` accepts at least for
/// `dead_after_ms`; one with it asks three sleeps more), so a writer
/// configured to beat every second is not called dead between beats. The
/// period is read only from a file the reader trusts, and a configuration
/// takes at most 1,000 ms, so the raise is at most 3 s.
fn follow_the_heartbeat(reader: &mut tickguard::Reader) {
    let max_period_ms = tickguard::config::HEARTBEAT_MS.max as u64;
    let period_ms = reader
        .heartbeat_period_ns()
        .map_or(0, |p| (p / 1_000_000).min(max_period_ms));
    let bound = DEFAULT_DEAD_AFTER_MS.max(tickguard::config::DEAD_AFTER_HEARTBEATS * period_ms);
    reader.set_dead_after_ns(bound * 1_000_000);
}

fn stat(args: cli::StatArgs) -> Result<()> {
    let (path, bound_ms) = shm_target(&args.shm, &args.config, args.dead_after_ms)?;
    // One read (`--once`) keeps the default dispositions: a signal ends
    // it even while its write waits on a reader that stopped reading (a
    // handler would only set a flag nobody looks at then).
    static NEVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let shutdown = match args.once {
        true => &NEVER,
        false => tickguard::sys::shutdown_on_signals().context("installing signal handlers")?,
    };
    // A publication truncated while mapped answers `stale`, not SIGBUS.
    tickguard::sys::guard::install().context("installing the SIGBUS handler")?;
    let owner = args.owner.as_deref().map(user::user_id).transpose()?;
    let mut reader = open_reader(&path, bound_ms, owner);
    let name = path.display().to_string();
    let filter = tickguard::stat::Filter {
        feed: args.feed.clone(),
        not_ok: args.not_ok,
        top: args.top.map(|n| n as usize),
    };
    loop {
        let now = args.now.unwrap_or_else(tickguard::time::now_ns);
        if !reader.health(now).is_ok() && reader.refresh() && bound_ms.is_none() {
            // A new writer's file: its heartbeat period may differ.
            follow_the_heartbeat(&mut reader);
        }
        let health = reader.health(now);
        // The live view on a terminal: its size this frame, and no more
        // rows read than it shows (the rest counted).
        let screen = match args.json || args.once || !std::io::stdout().is_terminal() {
            true => None,
            false => tickguard::sys::terminal_size(),
        };
        let filter = tickguard::stat::Filter {
            top: match (filter.top, screen) {
                (Some(n), Some((rows, _))) => Some(n.min(rows)),
                (top, screen) => top.or(screen.map(|(rows, _)| rows)),
            },
            ..filter.clone()
        };
        let snap = tickguard::stat::Snapshot::read(&reader, &name, now, &filter)
            .map_err(anyhow::Error::msg)?;
        if args.once && health.is_unusable() {
            // The JSON form says so as the streaming form does (health
            // "missing", writer null) before the error line and exit 2;
            // its reader gone early stops the JSON, not the error.
            let printed = match args.json {
                true => to_stdout(&format!("{}\n", snap.json())),
                false => Ok(()),
            };
            return worst([
                printed,
                Err(anyhow::anyhow!("{}", unusable(&health, &name))),
            ]);
        }
        let text = if args.json {
            format!("{}\n", snap.json())
        } else if args.once {
            snap.text().full()
        } else if !std::io::stdout().is_terminal() {
            // A pipe or a file gets each frame whole, one after another,
            // without the codes that clear a terminal.
            format!("{}\n", snap.text().full())
        } else {
            // The live view fits the terminal: header and worst rows stay.
            match screen {
                Some((rows, cols)) => {
                    tickguard::stat::screen(&snap.text(), tickguard::stat::Size { rows, cols })
                }
                None => format!("\x1b[H\x1b[2J{}", snap.text().full()),
            }
        };
        if args.once {
            return to_stdout(&text);
        }
        // A reader that stopped reading does not hold Ctrl-C or SIGTERM off.
        if !tickguard::sys::write_stdout_until(text.as_bytes(), shutdown)
            .context("writing to stdout")?
        {
            return Ok(());
        }
        for _ in 0..10 {
            if shutdown.load(std::sync::atomic::Ordering::Relaxed) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}

/// `check`: exit 0 when ok, 1 when rejected (a dead or closed writer is
/// rejected as stale), 2 on an error in the question itself or when there
/// is no usable publication (missing, unusable or untrusted file).
fn check(args: CheckArgs) -> ExitCode {
    match check_inner(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            report(&e);
            ExitCode::from(2)
        }
    }
}

fn check_inner(args: &CheckArgs) -> Result<bool> {
    // A publication truncated while mapped answers `stale`, not SIGBUS.
    tickguard::sys::guard::install().context("installing the SIGBUS handler")?;
    let (shm, dead_after_ms) = shm_target(&args.shm, &args.config, args.dead_after_ms)?;
    // A publication names instruments with up to 32 bytes (an SQF or ITCH
    // symbol has 8 at most, an MDP3 Symbol 20, `#SecurityID` 12); an MDP3
    // Symbol may hold spaces (an option's), never at either end.
    let name_ok = |n: &str| {
        (1..=32).contains(&n.len())
            && n.bytes().all(|b| (0x20..=0x7e).contains(&b))
            && !n.starts_with(' ')
            && !n.ends_with(' ')
    };
    if !name_ok(&args.symbol) {
        anyhow::bail!(
            "'{}' is not a valid instrument name (1 to 32 printable ASCII characters, spaces only between others)",
            args.symbol.escape_debug()
        );
    }
    if !tickguard::config::valid_feed_name(&args.feed) {
        anyhow::bail!(
            "'{}' is not a valid feed name (1 to {} printable ASCII characters, no spaces)",
            args.feed.escape_debug(),
            tickguard::config::FEED_NAME_MAX
        );
    }
    let owner = args.owner.as_deref().map(user::user_id).transpose()?;
    let reader = open_reader(&shm, dead_after_ms, owner);
    let now = tickguard::time::now_ns();
    let health = reader.health(now);
    if health.is_unusable() {
        anyhow::bail!("{}", unusable(&health, &shm.display().to_string()));
    }
    // The feeds a publication names are fixed when it is made: a name it
    // lacks is a wrong question whether its writer is alive or not.
    let feed = reader.feeds().iter().find(|f| f.name == args.feed);
    if !reader.feeds().is_empty() && feed.is_none() {
        let known: Vec<_> = reader.feeds().iter().map(|f| f.name.as_str()).collect();
        anyhow::bail!(
            "no feed '{}' in {} (feeds: {})",
            args.feed,
            shm.display(),
            known.join(", ")
        );
    }
    // A name the feed's protocol can never publish (a 9-character SQF
    // symbol) is a wrong question too, not a rejection: a script taking
    // exit 1 for the market's answer would never see the typo.
    let protocol = feed.and_then(|f| Protocol::ALL.into_iter().find(|p| p.as_str() == f.protocol));
    if let Some((p, problem)) =
        protocol.and_then(|p| p.name_problem(&args.symbol).map(|why| (p, why)))
    {
        anyhow::bail!(
            "'{}' is {problem}: feed '{}' ({}) publishes no such name",
            args.symbol.escape_debug(),
            args.feed,
            p.as_str()
        );
    }
    // The verdict, and the book top as published (prices exact) when the
    // writer is healthy, of one version of the slot: a change between the
    // two reads is read again (the top shown is the one judged), and with
    // none alike in 100 tries (a symbol changing all the time) no top is
    // shown.
    let judged = || {
        // One lookup: the verdict and the top through the same handle (two
        // could find two instruments, an MDP3 Symbol moved between them).
        let handle = reader
            .health(now)
            .is_ok()
            .then(|| reader.lookup(&args.feed, &args.symbol))
            .flatten();
        let v = match &handle {
            Some(h) => reader.check(h, now),
            None => reader.check_symbol(&args.feed, &args.symbol, now),
        };
        let handle = handle.filter(|_| v.health.is_ok());
        let record = handle.and_then(|h| reader.record(&h));
        (v, handle, record)
    };
    let (v, handle, record) = (1..100)
        .map(|_| judged())
        .find(|(v, _, r)| r.is_none_or(|r| r.version == v.version))
        .unwrap_or_else(|| {
            let (v, handle, _) = judged();
            (v, handle, None)
        });
    let reasons: Vec<&str> = v.reasons.names().collect();
    let sides = record.map_or([None, None], |r| [r.bid, r.ask]);
    // Prices with the feed's decimals, as everywhere.
    let decimals = reader
        .feeds()
        .iter()
        .find(|f| f.name == args.feed)
        .and_then(|f| f.price_decimals());
    // An unknown symbol (never seen on the feed: a typo, another venue's
    // name, not yet in the directory) is told from a known one whose book
    // is empty; both are rejected as no_quote. Unknown when the writer is
    // not healthy: the table cannot be trusted then.
    let known = v.health.is_ok().then_some(handle.is_some());
    // The state table refused this feed symbols: an unknown one may be one
    // of them, its book kept by the writer but not published.
    // Named as `stat` names it (the feed's own counter: symbols refused,
    // or messages dropped for them).
    let refused = reader
        .feeds()
        .iter()
        .enumerate()
        .find(|(_, f)| f.name == args.feed)
        .and_then(|(i, f)| {
            let id = tickguard::shm::counter::TABLE_FULL;
            let n = reader.counter(i as u16, id).filter(|&n| n > 0)?;
            let name = f.counters.iter().find(|d| d.id == id)?.name.clone();
            Some((name, n))
        });
    let unknown = match refused {
        Some((name, n)) => format!("unknown symbol: not published on this feed (never named, not published yet, or refused a slot: {name} {n}, raise [state] capacity or the feed's own limit on symbols)"),
        None => "unknown symbol: not published on this feed (never named, or not published yet)".into(),
    };
    let quote_state = match known {
        Some(false) => Some(unknown.as_str()),
        Some(true) if sides.iter().all(Option::is_none) => Some("empty book"),
        _ => None,
    };
    if args.json {
        let side = |s: Option<tickguard::reader::Side>| {
            s.map(
                |s| serde_json::json!({ "price": s.price.exact(decimals), "size": s.known_size() }),
            )
        };
        let line = serde_json::json!({
            "time_ns": now,
            "feed": args.feed,
            "symbol": args.symbol,
            "ok": v.is_ok(),
            "reasons": reasons,
            "health": v.health.to_string(),
            "version": v.version,
            "symbol_known": known,
            "bid": side(sides[0]),
            "ask": side(sides[1]),
        });
        return answer(&format!("{line}\n"), v.is_ok());
    }
    let mut out = if v.is_ok() {
        format!("{} {}: ok\n", args.feed, args.symbol)
    } else {
        let detail = quote_state.map_or(String::new(), |q| format!("; {q}"));
        format!(
            "{} {}: rejected: {} ({}{detail})\n",
            args.feed,
            args.symbol,
            reasons.join(", "),
            v.health
        )
    };
    let quote: Vec<String> = ["bid", "ask"]
        .iter()
        .zip(sides)
        .filter_map(|(name, s)| {
            let s = s?;
            Some(match s.known_size() {
                None => format!("{name} {}", s.price.show(decimals)),
                Some(n) => format!("{name} {} × {n}", s.price.show(decimals)),
            })
        })
        .collect();
    if !quote.is_empty() {
        out.push_str(&format!("  {}\n", quote.join("  ")));
    }
    answer(&out, v.is_ok())
}

/// `check`'s answer on stdout: a reader that went away (`| true`) changes
/// no exit code, which is the verdict (as every other command keeps its
/// own status when its reader leaves); a full stdout is an error. (One
/// closed before the start is `/dev/null`: the runtime opens it there.)
fn answer(text: &str, ok: bool) -> Result<bool> {
    match to_stdout(text) {
        Err(e) if is_broken_pipe(&e) => Ok(ok),
        written => written.map(|()| ok),
    }
}

/// `text` on stdout, flushed: a stdout that cannot take it (full, closed)
/// is an error like any other, naming stdout, not a panic.
fn to_stdout(text: &str) -> Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.flush())
        .context("writing to stdout")
}

/// Whether a stop came while the sidecar starts (a slow start: a large
/// table, a large `definitions` file): it then ends before anything
/// visible is done (the recording not emptied, the publication not
/// replaced), exit 0. A stop that a helper thread's failure asked for
/// (the metrics listener's, the log writer's: `failed` says so) fails the
/// start instead, exit 2, for the service manager to start it again.
fn stopped_starting(
    shutdown: &std::sync::atomic::AtomicBool,
    failed: impl Fn() -> bool,
) -> anyhow::Result<bool> {
    // Acquire: pairs with the failing thread's Release store of the stop.
    let stop = shutdown.load(std::sync::atomic::Ordering::Acquire);
    if failed() {
        anyhow::bail!(
            "a thread of the sidecar failed while it started (its message is above): stopped"
        );
    }
    if stop {
        tracing::info!(
            "stopped while starting: nothing published (the file at the path left as it was)"
        );
    }
    Ok(stop)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::sync::atomic::AtomicBool;

    /// The commands the READMEs, the guides and BENCHMARKS.md show, in code blocks
    /// (`tickguard …`, `$ tickguard …`, continued over `\` lines) and in
    /// prose (`` `tickguard …` ``, `` `simulate …` ``), each parsed as
    /// the binary parses it; a simulator's also built as `simulate` builds
    /// it (nothing sent), so a flag it refuses with another (a line B's
    /// loss without a line B) is caught. Shapes with placeholders in
    /// brackets or alternatives (`[--at TIME | …]`) are usage lines, not
    /// commands, and are passed over; a command run through `cargo run`,
    /// `sudo -u` or with variables set for it is read as `tickguard`'s.
    #[test]
    fn the_commands_the_docs_show_are_accepted() {
        use clap::Parser;
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut files: Vec<_> = [
            "README.md",
            "BENCHMARKS.md",
            "fixtures/README.md",
            "contrib/README.md",
        ]
        .iter()
        .map(|f| root.join(f))
        .collect();
        let mut guides: Vec<_> = std::fs::read_dir(root.join("docs"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "md"))
            .collect();
        guides.sort();
        files.extend(guides);
        let mut commands: Vec<(String, String)> = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            commands.extend(shown_commands(&text).into_iter().map(|c| (name.clone(), c)));
        }
        let mut wrong = Vec::new();
        let mut parsed = 0;
        for (file, command) in &commands {
            if command.contains('[') || command.contains('|') {
                continue;
            }
            parsed += 1;
            let words = shell_words(command);
            let problem = match super::cli::Cli::try_parse_from(&words) {
                Err(e)
                    if matches!(
                        e.kind(),
                        clap::error::ErrorKind::DisplayHelp
                            | clap::error::ErrorKind::DisplayVersion
                    ) =>
                {
                    None
                }
                Err(e) => Some(e.to_string().lines().next().unwrap_or("").to_string()),
                Ok(cli) => match cli.command {
                    super::cli::Command::Simulate(args) => simulator_problem(root, &args),
                    _ => None,
                },
            };
            if let Some(problem) = problem {
                wrong.push(format!("{file}: {command}: {problem}"));
            }
        }
        assert!(
            parsed >= 58,
            "{parsed} commands parsed of {}",
            commands.len()
        );
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    /// What `simulate` with `args` would refuse before sending: a flag
    /// of another protocol, or (SQF, or a venue whose configuration is in
    /// the tree) its parameters.
    fn simulator_problem(
        root: &std::path::Path,
        args: &super::cli::SimulateArgs,
    ) -> Option<String> {
        use super::cli::SimProtocol;
        if let Some((flag, protocols)) = args.foreign_flag() {
            return Some(format!("{flag} applies to --protocol {protocols} only"));
        }
        let in_tree = args.config.as_ref().is_some_and(|c| root.join(c).is_file());
        let mut args = args.clone();
        args.config = args.config.map(|c| root.join(c));
        let built = match args.protocol {
            SimProtocol::Sqf => {
                tickguard::simulate::sqf::Simulator::new(&args.params()).map(|_| ())
            }
            SimProtocol::Mdp3 if in_tree => args.mdp3_params().map(|_| ()),
            SimProtocol::Itch50 if in_tree => args.itch_params().map(|_| ()),
            _ => Ok(()),
        };
        built.err().map(|e| e.to_string())
    }

    /// Commands in `text`: code lines starting `tickguard ` (in a block
    /// that shows a prompt, only those starting `$ tickguard `: the rest
    /// is output), joined over a trailing `\\`, a `  #` comment and a
    /// trailing `&` cut off; and code spans in prose of a whole command,
    /// `tickguard ` or `simulate ` and two words more at least (a span
    /// may wrap a line; `simulate --reorder` names a flag).
    fn shown_commands(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut prose = String::new();
        let mut block: Vec<&str> = Vec::new();
        let mut fenced = false;
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            if line.trim_start().starts_with("```") {
                if fenced {
                    out.extend(block_commands(&block));
                    block.clear();
                }
                fenced = !fenced;
            } else if fenced {
                block.push(line);
            } else if line.starts_with("    ") {
                block.push(line);
                if !lines.peek().is_some_and(|l| l.starts_with("    ")) {
                    out.extend(block_commands(&block));
                    block.clear();
                }
            } else {
                prose.push_str(line);
                prose.push(' ');
            }
        }
        for span in prose.split('`').skip(1).step_by(2) {
            let words: Vec<&str> = span.split_whitespace().collect();
            let span = words.join(" ");
            match as_tickguard(&span) {
                Some(c) if words.len() >= 3 => out.push(c),
                _ if words.first() == Some(&"simulate") && words.len() >= 3 => {
                    out.push(format!("tickguard {span}"))
                }
                _ => {}
            }
        }
        out
    }

    /// `line` as a `tickguard` command, when it is one: behind variables
    /// set for it (`TG_GLIMPSE_PW=… tickguard …`) or `sudo -u USER`, or
    /// run as `cargo run [--release] -- …`.
    fn as_tickguard(line: &str) -> Option<String> {
        let mut rest = line;
        loop {
            let (word, after) = rest.split_once(' ')?;
            let assigns = word.split_once('=').is_some_and(|(k, _)| {
                !k.is_empty() && k.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
            });
            rest = match word {
                _ if assigns => after,
                "sudo" => after.strip_prefix("-u ")?.split_once(' ')?.1,
                // The binary itself, not an example.
                "cargo" => match after.strip_prefix("run ")?.split_once("-- ")? {
                    ("" | "--release ", args) => return Some(format!("tickguard {args}")),
                    _ => return None,
                },
                "tickguard" => return Some(format!("tickguard {after}")),
                _ => return None,
            };
        }
    }

    /// The commands of one code block's lines (see [`shown_commands`]).
    fn block_commands(block: &[&str]) -> Vec<String> {
        let prompt = block.iter().any(|l| l.trim_start().starts_with("$ "));
        let mut out = Vec::new();
        let mut open: Option<String> = None;
        for line in block {
            let t = line.trim();
            let t = match open.take() {
                Some(so_far) => format!("{so_far} {t}"),
                None => {
                    let t = if prompt {
                        match t.strip_prefix("$ ") {
                            Some(t) => t,
                            None => continue,
                        }
                    } else {
                        t
                    };
                    match as_tickguard(t) {
                        Some(t) => t,
                        None => continue,
                    }
                }
            };
            let t = match t.find("  #") {
                Some(i) => t[..i].to_string(),
                None => t,
            };
            match t.strip_suffix('\\') {
                Some(head) => open = Some(head.trim().to_string()),
                None => out.push(t.trim().trim_end_matches('&').trim().to_string()),
            }
        }
        out
    }

    /// `command` split as a shell would (single and double quotes).
    fn shell_words(command: &str) -> Vec<String> {
        let mut words = Vec::new();
        let mut word: Option<String> = None;
        let mut quote = None;
        for c in command.chars() {
            match (quote, c) {
                (Some(q), c) if c == q => quote = None,
                (Some(_), c) => word.get_or_insert_default().push(c),
                (None, '\'' | '"') => {
                    quote = Some(c);
                    word.get_or_insert_default();
                }
                (None, c) if c.is_whitespace() => words.extend(word.take()),
                // A `#` starting a word begins a comment, as in a shell.
                (None, '#') if word.is_none() => break,
                (None, c) => word.get_or_insert_default().push(c),
            }
        }
        words.extend(word);
        words
    }

    /// A stop while starting ends the start cleanly; one a helper thread's
    /// failure asked for fails it (the listener's panic while the sidecar
    /// started once ended it with exit 0, which `Restart=on-failure` does
    /// not restart).
    #[test]
    fn a_stop_while_starting_fails_the_start_when_a_thread_failed() {
        let (running, stopped) = (AtomicBool::new(false), AtomicBool::new(true));
        assert!(!super::stopped_starting(&running, || false).unwrap());
        assert!(super::stopped_starting(&stopped, || false).unwrap());
        let e = super::stopped_starting(&stopped, || true).unwrap_err();
        assert!(
            e.to_string().starts_with("a thread of the sidecar failed"),
            "{e}"
        );
    }

    /// A recording that stopped says why in `run`'s last line: its bound,
    /// the disk fallen behind, or the failed write's error.
    #[test]
    fn an_incomplete_recording_says_why_it_stopped() {
        let path = std::path::Path::new("r.pcap");
        let why = |errno| {
            let stats = tickguard::sidecar::RunStats {
                record_stopped: true,
                record_errno: errno,
                unrecorded: 3,
                ..Default::default()
            };
            super::recording_complete(path, &stats)
                .unwrap_err()
                .to_string()
        };
        let bound = why(tickguard::sidecar::RECORD_BOUND_REACHED);
        assert!(bound.contains("at its --record-max-mb bound"), "{bound}");
        let behind = why(tickguard::sidecar::RECORD_FELL_BEHIND);
        assert!(behind.contains("the disk fell behind the feed"), "{behind}");
        assert!(behind.contains("3 datagrams and segments were not recorded"));
        let full = why(libc::ENOSPC);
        assert!(full.contains("a failed write (No space left"), "{full}");
        let ok = tickguard::sidecar::RunStats::default();
        assert!(super::recording_complete(path, &ok).is_ok());
    }

    /// A rename over a file is allowed as the kernel allows it: not in a
    /// sticky directory over another user's file (unless the directory is
    /// this user's, or this is root), nor onto a mount point (a device
    /// other than its directory's).
    #[test]
    fn a_rename_over_a_file_is_allowed_as_the_kernel_allows_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("summary.json");
        std::fs::write(&path, b"{}").unwrap();
        let file = std::fs::metadata(&path).unwrap();
        let (owner, other) = (file.uid(), file.uid() + 1);
        let meta = |p: &std::path::Path| std::fs::metadata(p).unwrap();
        assert!(super::rename_over_allowed(&file, &meta(dir.path()), other));
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o1777)).unwrap();
        let sticky = meta(dir.path());
        assert_eq!(sticky.uid(), owner);
        assert!(!super::rename_over_allowed(&file, &sticky, other));
        assert!(super::rename_over_allowed(&file, &sticky, owner));
        assert!(super::rename_over_allowed(&file, &sticky, 0));
        // A tmpfs mounted inside another filesystem's directory: the same
        // test the kernel's EBUSY answers for a file mounted there.
        let (mounted, parent) = (meta("/dev/shm".as_ref()), meta("/dev".as_ref()));
        if mounted.dev() != parent.dev() {
            assert!(!super::rename_over_allowed(&mounted, &parent, 0));
        }
    }
}
