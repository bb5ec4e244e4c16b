//! The documentation stands on its own: the README stays a short entry
//! point, every link in the docs leads to a file of this repository, and
//! the README's figures are the committed benchmark run's.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every Markdown file a reader of a clone meets: the README, the guides,
/// and the READMEs of the folders.
fn markdown_files() -> Vec<PathBuf> {
    let r = root();
    let mut files = vec![
        r.join("README.md"),
        r.join("BENCHMARKS.md"),
        r.join("contrib/README.md"),
        r.join("fixtures/README.md"),
    ];
    for entry in std::fs::read_dir(r.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    files
}

/// The targets of the Markdown links `[text](target)` in `text`.
fn links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(at, _)| {
            let rest = &text[at + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .collect()
}

#[test]
fn the_readme_is_at_most_200_lines() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let n = readme.lines().count();
    assert!(n <= 200, "README.md has {n} lines: move detail to docs/");
}

/// A relative link resolves to a file inside the repository; nothing
/// points outside it (an absolute path, `..` past the root, another
/// checkout beside this one).
#[test]
fn every_link_in_the_docs_stays_in_the_repository() {
    let r = root().canonicalize().unwrap();
    let mut checked = 0;
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let name = file.strip_prefix(root()).unwrap().display().to_string();
        for target in links(&text) {
            assert!(
                !target.contains("://") && !target.starts_with("mailto:"),
                "{name}: {target} leaves the repository"
            );
            let path = target.split('#').next().unwrap();
            if path.is_empty() {
                continue;
            }
            assert!(
                !Path::new(path).is_absolute(),
                "{name}: absolute link {target}"
            );
            let resolved = file.parent().unwrap().join(path);
            let resolved = resolved
                .canonicalize()
                .unwrap_or_else(|_| panic!("{name}: broken link {target}"));
            assert!(
                resolved.starts_with(&r),
                "{name}: {target} leaves the repository"
            );
            checked += 1;
        }
    }
    assert!(checked >= 10, "only {checked} links checked");
}

/// `figure` as printed in the README ("52.32 M", "0.86", "30") against
/// `value`: equal once `value` is rounded to the digits printed.
fn same_figure(figure: &str, value: f64) -> bool {
    let (number, scale) = match figure.strip_suffix(" M") {
        Some(n) => (n, 1e6),
        None => (figure, 1.0),
    };
    let decimals = number.split('.').nth(1).map_or(0, str::len);
    let printed: f64 = number.parse().unwrap();
    format!("{:.*}", decimals, value / scale) == format!("{printed:.decimals$}")
}

/// The README's performance figures are the values BENCHMARKS.json holds
/// at the path each row names, so they cannot drift from the committed run.
#[test]
fn readme_figures_come_from_benchmarks_json() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(root().join("BENCHMARKS.json")).unwrap())
            .unwrap();
    let table = readme
        .split("<!-- figures:")
        .nth(1)
        .expect("the README's figures table");
    let mut rows = 0;
    for line in table.lines().skip(3) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.len() < 5 {
            break;
        }
        let (figure, path) = (cells[2], cells[3].trim_matches('`'));
        let value = path
            .split('.')
            .try_fold(&json, |v, key| v.get(key))
            .and_then(serde_json::Value::as_f64)
            .unwrap_or_else(|| panic!("BENCHMARKS.json has no number at {path}"));
        assert!(
            same_figure(figure, value),
            "README says {figure} for {path}, BENCHMARKS.json {value}"
        );
        rows += 1;
    }
    assert!(rows >= 4, "{rows} figures");
}

#[test]
fn figures_compare_at_the_printed_precision() {
    assert!(same_figure("52.32 M", 52_318_138.2));
    assert!(!same_figure("52.33 M", 52_318_138.2));
    assert!(same_figure("0.86", 0.861_385));
    assert!(same_figure("30", 30.0));
    assert!(!same_figure("31", 30.0));
}

/// The shared memory the configuration guide gives for the most slots is
/// the layout's.
#[test]
fn the_guide_gives_the_publications_size_at_the_most_slots() {
    let most = tickguard::config::CAPACITY.max as usize;
    let shape = tickguard_reader::layout::Shape::new(1, most).unwrap();
    let per_slot = (shape.slots_offset - shape.directory_offset + 128 * most) / most;
    let gib = shape.file_len as f64 / f64::from(1u32 << 30);
    let text = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap();
    let said = format!("16 Mi slots are {gib:.1} GiB of shared memory ({per_slot} bytes a slot");
    assert!(
        text.contains(&said),
        "docs/configuration.md should say: {said}"
    );
}

/// The line arbitration's memory an SQF feed keeps, as the configuration
/// guide gives it: bytes a slot, and what that is at the default and the
/// most slots.
#[test]
fn the_guide_gives_an_sqf_feeds_bytes_a_slot() {
    let per_slot = tickguard::protocol::sqf::feed::BYTES_A_SLOT;
    let mib = |slots: usize| (slots * per_slot) as f64 / f64::from(1u32 << 20);
    let default = mib(65_536);
    let most = mib(tickguard::config::CAPACITY.max as usize);
    let text = std::fs::read_to_string(root().join("docs/configuration.md")).unwrap();
    let said = format!("each `sqf` feed also keeps {per_slot} bytes a slot");
    let sizes = format!("{default:.1} MiB at the default, {most:.0} MiB at the most");
    for s in [said, sizes] {
        assert!(text.contains(&s), "docs/configuration.md should say: {s}");
    }
}

/// The operator guide's picture of `stat` (`docs/stat.svg`, drawn by
/// `tools/term2svg.py` from `stat --once`) shows the lines `stat` prints
/// now: a feed's header with its protocol and kind, the symbols' tally of
/// every verdict, and the symbol table's header as the committed stat
/// golden has them.
#[test]
fn the_stat_picture_shows_what_stat_prints() {
    let svg = std::fs::read_to_string(root().join("docs/stat.svg")).unwrap();
    let lines: Vec<String> = svg
        .lines()
        .filter_map(|l| {
            let text = l.split_once("xml:space=\"preserve\">")?.1;
            let text = text.strip_suffix("</text>")?;
            Some(
                text.replace("&lt;", "<")
                    .replace("&gt;", ">")
                    .replace("&quot;", "\"")
                    .replace("&#x27;", "'")
                    .replace("&amp;", "&"),
            )
        })
        .collect();
    let golden =
        std::fs::read_to_string(root().join("fixtures/scenario-vlan-ns.stat-4350ms.txt")).unwrap();
    let table = golden
        .lines()
        .find(|l| l.starts_with("feed       symbol"))
        .unwrap();
    assert!(lines.iter().any(|l| l == table), "{lines:#?}");
    let feeds: Vec<&String> = lines
        .iter()
        .filter(|l| l.starts_with("feed ") && !l.starts_with("feed       symbol"))
        .collect();
    assert!(!feeds.is_empty(), "{lines:#?}");
    for f in feeds {
        let kind = f.split_once(" (").and_then(|(_, k)| k.split_once(')'));
        let ok = kind.is_some_and(|(k, _)| {
            let (protocol, kind) = k.split_once(", ").unwrap_or(("", ""));
            ["sqf", "itch50", "mdp3"].contains(&protocol) && ["full", "delta"].contains(&kind)
        });
        assert!(ok, "a feed's header as stat prints it: {f}");
    }
    let tally = golden
        .lines()
        .find(|l| l.starts_with("  symbols: "))
        .unwrap();
    let words = |l: &str| -> Vec<String> {
        l.split_whitespace()
            .filter(|w| w.parse::<u64>().is_err())
            .map(str::to_string)
            .collect()
    };
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("  symbols: ") && words(l) == words(tally)),
        "{lines:#?}"
    );
}
