//! Checks of the deployment files under `contrib/`, so they cannot rot
//! silently as the code changes: every metric the dashboard and the alert
//! rules name is one the sidecar registers (`src/metrics.rs`, and the
//! protocols' counter descriptors it exports; and every registered metric
//! is shown somewhere), the dashboard is valid JSON of the expected shape, the
//! alert rules have the keys Prometheus needs, and the systemd unit keeps the
//! settings the sidecar depends on.
//!
//! External validators run when present and are skipped (with a note) when
//! not: `promtool` (on PATH or `$PROMTOOL`) checks and unit-tests the rules,
//! python3 with PyYAML parses the YAML, `systemd-analyze verify` the unit.
//! With `TICKGUARD_REQUIRE_VALIDATORS=1` (set by `.ci/run`, which installs
//! them) a missing validator fails its test instead.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const METRICS_RS: &str = include_str!("../../src/metrics.rs");
const DASHBOARD: &str = include_str!("../../contrib/grafana/tickguard-dashboard.json");
const ALERTS: &str = include_str!("../../contrib/prometheus/tickguard-alerts.yml");
const ALERT_TESTS: &str = include_str!("../../contrib/prometheus/tickguard-alerts.test.yml");
const UNIT: &str = include_str!("../../contrib/systemd/tickguard.service");
const SYSUSERS: &str = include_str!("../../contrib/systemd/tickguard.sysusers");
const SYSCTL: &str = include_str!("../../contrib/systemd/99-tickguard.conf");
const OPERATOR_GUIDE: &str = include_str!("../../docs/operations.md");

fn contrib(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(path)
}

/// Every identifier `tickguard_[a-z0-9_]+` in `text` that is not part of
/// a longer identifier (digits included: a name with a stray digit is
/// flagged as not exported, not skipped).
fn metric_names(text: &str) -> BTreeSet<String> {
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let bytes = text.as_bytes();
    let mut names = BTreeSet::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("tickguard_") {
        let start = from + at;
        let mut end = start + "tickguard_".len();
        while end < bytes.len()
            && (bytes[end].is_ascii_lowercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'_')
        {
            end += 1;
        }
        let bounded =
            (start == 0 || !ident(bytes[start - 1])) && (end == bytes.len() || !ident(bytes[end]));
        if bounded && end > start + "tickguard_".len() {
            names.insert(text[start..end].to_string());
        }
        from = end;
    }
    names
}

/// Every protocol's counter descriptors (what a publication holds).
fn descriptors() -> Vec<tickguard::shm::Descriptor> {
    tickguard::config::Protocol::ALL
        .into_iter()
        .flat_map(tickguard::protocol::counters)
        .collect()
}

/// The metric names the sidecar exports: the quoted `"tickguard_…"`
/// literals of `src/metrics.rs` (receiver, verdicts, clock), and the names
/// every protocol's counter descriptors are exported under.
fn registered() -> BTreeSet<String> {
    let mut names: BTreeSet<String> = metric_names(METRICS_RS)
        .into_iter()
        .filter(|n| METRICS_RS.contains(&format!("\"{n}\"")))
        .collect();
    assert!(
        names.len() >= 10 && names.contains("tickguard_symbols"),
        "src/metrics.rs no longer names its metrics as string literals: {names:?}"
    );
    names.extend(tickguard::metrics::metric_names(&descriptors()));
    assert!(
        names.len() >= 40 && names.contains("tickguard_packets_total"),
        "the counter descriptors no longer name their metrics: {names:?}"
    );
    names
}

fn assert_all_registered(what: &str, used: &BTreeSet<String>) {
    let known = registered();
    let unknown: Vec<_> = used.difference(&known).collect();
    assert!(
        unknown.is_empty(),
        "{what} uses metrics that src/metrics.rs does not register: {unknown:?}\nregistered: {known:?}"
    );
}

/// GLIMPSE's summary keys are metrics of the same names with the
/// `tickguard_feed_` prefix (glimpse G4, G7.1): counters with `_total`,
/// levels as they are, the text `snapshot_state` as a flag, and
/// `snapshot_session`, text, none; the guide names each.
#[test]
fn glimpse_summary_keys_are_metrics_of_their_names() {
    const ITCH_GUIDE: &str = include_str!("../../docs/itch.md");
    let descriptors = descriptors();
    // (key, the counter exported for it, its metric)
    for (key, counter, metric) in [
        (
            "snapshot_state",
            "snapshot_awaiting",
            Some("tickguard_feed_snapshot_awaiting"),
        ),
        (
            "snapshots",
            "snapshots",
            Some("tickguard_feed_snapshots_total"),
        ),
        (
            "snapshot_attempts",
            "snapshot_attempts",
            Some("tickguard_feed_snapshot_attempts_total"),
        ),
        (
            "snapshot_failures",
            "snapshot_failures",
            Some("tickguard_feed_snapshot_failures_total"),
        ),
        (
            "snapshot_gave_up",
            "snapshot_gave_up",
            Some("tickguard_feed_snapshot_gave_up_total"),
        ),
        (
            "snapshot_discarded",
            "snapshot_discarded",
            Some("tickguard_feed_snapshot_discarded_total"),
        ),
        (
            "snapshot_overflow",
            "snapshot_overflow",
            Some("tickguard_feed_snapshot_overflow_total"),
        ),
        (
            "snapshot_next",
            "snapshot_next",
            Some("tickguard_feed_snapshot_next"),
        ),
        ("snapshot_session", "snapshot_session", None),
        (
            "snapshot_messages",
            "snapshot_messages",
            Some("tickguard_feed_snapshot_messages"),
        ),
        (
            "snapshot_latency",
            "snapshot_latency",
            Some("tickguard_feed_snapshot_latency_seconds"),
        ),
    ] {
        assert!(
            descriptors.iter().any(|d| d.name == key),
            "no counter {key}"
        );
        let of: Vec<_> = descriptors
            .iter()
            .filter(|d| d.name == counter)
            .cloned()
            .collect();
        let names = tickguard::metrics::metric_names(&of);
        match metric {
            Some(m) => {
                let bucket = format!("{m}_bucket");
                assert!(
                    names.contains(m) || names.contains(&bucket),
                    "{key}: exported as {names:?}, not {m}"
                );
                assert!(
                    ITCH_GUIDE.contains(&format!("`{m}")),
                    "docs/itch.md omits {m}"
                );
            }
            None => assert!(names.is_empty(), "{key} is exported as {names:?}"),
        }
    }
}

/// Values of `label="…"` and `label!="…"` matchers in PromQL `text`.
fn label_values(text: &str, label: &str) -> BTreeSet<String> {
    let mut values = BTreeSet::new();
    for op in ["=\"", "!=\"", "=~\"", "!~\""] {
        let pattern = format!("{label}{op}");
        let mut from = 0;
        while let Some(at) = text[from..].find(&pattern) {
            let start = from + at + pattern.len();
            let bounded = from + at == 0 || {
                let c = text.as_bytes()[from + at - 1];
                !(c.is_ascii_alphanumeric() || c == b'_')
            };
            let end = start + text[start..].find('"').expect("unterminated label value");
            if bounded && !op.contains('~') {
                values.insert(text[start..end].to_string());
            }
            from = end;
        }
    }
    values
}

/// Label values used in matchers must be ones the sidecar exports: string
/// literals of `src/metrics.rs`, or attribute values of a counter
/// descriptor under that key (`line="A"`, `reason="bad_magic"`).
fn assert_label_values_exist(what: &str, promql: &str) {
    let described = descriptors();
    for label in ["verdict", "result", "line", "reason"] {
        for value in label_values(promql, label) {
            let known = METRICS_RS.contains(&format!("\"{value}\""))
                || described.iter().any(|d| d.key == label && d.value == value);
            assert!(
                known,
                "{what}: {label}=\"{value}\" is not a label value the sidecar exports"
            );
        }
    }
}

/// Every string in a JSON value, with the key it is under.
fn strings<'a>(v: &'a serde_json::Value, key: &'a str, out: &mut Vec<(&'a str, &'a str)>) {
    match v {
        serde_json::Value::String(s) => out.push((key, s)),
        serde_json::Value::Array(a) => a.iter().for_each(|x| strings(x, key, out)),
        serde_json::Value::Object(o) => o.iter().for_each(|(k, x)| strings(x, k, out)),
        _ => {}
    }
}

fn dashboard() -> serde_json::Value {
    serde_json::from_str(DASHBOARD)
        .expect("contrib/grafana/tickguard-dashboard.json is not valid JSON")
}

/// Every PromQL expression of the dashboard: panel targets and variable queries.
fn dashboard_queries(d: &serde_json::Value) -> Vec<String> {
    let mut all = Vec::new();
    strings(d, "", &mut all);
    all.iter()
        .filter(|(k, _)| matches!(*k, "expr" | "query" | "definition"))
        .map(|(_, s)| s.to_string())
        .collect()
}

#[test]
fn dashboard_is_valid_json_of_the_expected_shape() {
    let d = dashboard();
    assert_eq!(d["uid"], "tickguard-sidecar");
    let schema = d["schemaVersion"].as_u64().expect("schemaVersion");
    assert!((36..=41).contains(&schema), "schemaVersion {schema}");

    let vars = d["templating"]["list"].as_array().expect("templating.list");
    let var = |name: &str| vars.iter().find(|v| v["name"] == name);
    let ds = var("datasource").expect("datasource variable");
    assert_eq!(ds["type"], "datasource");
    assert_eq!(ds["query"], "prometheus");
    let feed = var("feed").expect("template variable `feed`");
    assert_eq!(feed["type"], "query");
    assert!(feed["definition"].as_str().unwrap().contains("feed)"));
    assert!(var("instance").is_some(), "template variable `instance`");

    let panels = d["panels"].as_array().expect("panels");
    let mut ids = BTreeSet::new();
    let mut titles = BTreeSet::new();
    for p in panels {
        let title = p["title"].as_str().expect("panel title");
        assert!(
            ids.insert(p["id"].as_u64().expect("panel id")),
            "duplicate id: {title}"
        );
        let g = &p["gridPos"];
        let (x, w) = (g["x"].as_u64().unwrap(), g["w"].as_u64().unwrap());
        assert!(
            x + w <= 24 && g["h"].as_u64().unwrap() > 0,
            "{title}: gridPos {g}"
        );
        if p["type"] == "row" {
            continue;
        }
        titles.insert(title.to_string());
        assert_eq!(
            p["datasource"]["uid"], "${datasource}",
            "{title}: datasource"
        );
        let targets = p["targets"]
            .as_array()
            .unwrap_or_else(|| panic!("{title}: targets"));
        assert!(!targets.is_empty(), "{title}: no targets");
        let mut refs = BTreeSet::new();
        for t in targets {
            let expr = t["expr"]
                .as_str()
                .unwrap_or_else(|| panic!("{title}: expr"));
            assert!(
                refs.insert(t["refId"].as_str().unwrap()),
                "{title}: refId twice"
            );
            assert_eq!(
                t["datasource"]["uid"], "${datasource}",
                "{title}: target datasource"
            );
            assert_eq!(
                expr.matches('(').count(),
                expr.matches(')').count(),
                "{title}: unbalanced parentheses in {expr}"
            );
            assert!(
                !metric_names(expr).is_empty(),
                "{title}: no tickguard metric in {expr}"
            );
            // Every query is narrowed to the chosen instances, and every
            // per-feed query to the chosen feeds.
            assert!(expr.contains("instance=~\"$instance\""), "{title}: {expr}");
            if expr.contains("feed") {
                assert!(
                    expr.contains("feed=~\"$feed\""),
                    "{title}: not filtered by $feed: {expr}"
                );
            }
        }
    }
    for wanted in [
        "Symbols by verdict",
        "Packets/s per feed and line",
        "Ticks lost/s",
        "Duplicates/s",
        "Rejected packets/s by reason",
        "Kernel drops",
        "Clock offset",
        "Feed silence",
        "Writer heartbeat age",
        "Receiver worst cycle",
        "Receive buffer",
        "Batch size distribution",
        "Busy vs idle polls",
    ] {
        assert!(
            titles.contains(wanted),
            "panel {wanted:?} missing: {titles:?}"
        );
    }
    let verdicts = panels
        .iter()
        .find(|p| p["title"] == "Symbols by verdict")
        .unwrap();
    assert_eq!(
        verdicts["fieldConfig"]["defaults"]["custom"]["stacking"]["mode"], "normal",
        "symbols by verdict is stacked"
    );
}

#[test]
fn dashboard_uses_only_exported_metrics_and_shows_them_all() {
    let d = dashboard();
    let queries = dashboard_queries(&d);
    let used: BTreeSet<String> = queries.iter().flat_map(|q| metric_names(q)).collect();
    assert_all_registered("the dashboard", &used);
    for q in &queries {
        assert_label_values_exist("the dashboard", q);
    }
    // A metric added to src/metrics.rs belongs on the dashboard too.
    let missing: Vec<_> = registered().difference(&used).cloned().collect();
    assert!(
        missing.is_empty(),
        "metrics exported but on no dashboard panel (add them to contrib/grafana/tickguard-dashboard.json): {missing:?}"
    );
}

/// The alert rules, split at each `- alert:` line: (name, its lines).
fn alert_rules(yaml: &str) -> Vec<(String, String)> {
    let mut rules: Vec<(String, String)> = Vec::new();
    for line in yaml.lines() {
        if let Some(name) = line.trim_start().strip_prefix("- alert:") {
            rules.push((name.trim().to_string(), String::new()));
        } else if line.trim_start().starts_with("- name:") {
            rules.push((String::new(), String::new()));
        } else if let Some((_, body)) = rules.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    rules.retain(|(name, _)| !name.is_empty());
    rules
}

#[test]
fn alert_rules_are_well_formed() {
    assert!(
        ALERTS.lines().any(|l| l == "groups:"),
        "top-level `groups:`"
    );
    assert!(!ALERTS.contains('\t'), "tabs in YAML");
    let rules = alert_rules(ALERTS);
    assert!(rules.len() >= 10, "{} rules", rules.len());
    let mut names = BTreeSet::new();
    for (name, body) in &rules {
        assert!(names.insert(name.clone()), "alert {name} defined twice");
        assert!(
            name.starts_with("Tickguard") && name.chars().all(|c| c.is_ascii_alphanumeric()),
            "alert name {name}"
        );
        for key in [
            "expr:",
            "for:",
            "labels:",
            "severity:",
            "annotations:",
            "summary:",
            "description:",
        ] {
            assert!(
                body.lines().any(|l| l.trim_start().starts_with(key)),
                "alert {name} has no `{key}`"
            );
        }
        let severity = body
            .lines()
            .find_map(|l| l.trim_start().strip_prefix("severity:"))
            .unwrap()
            .trim();
        assert!(
            ["critical", "warning", "info"].contains(&severity),
            "alert {name}: severity {severity}"
        );
        // The expression: from `expr:` up to `for:`.
        let expr: String = body
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("expr:"))
            .take_while(|l| !l.trim_start().starts_with("for:"))
            .collect();
        assert_label_values_exist(name, &expr);
        let per_feed = expr.contains("feed") || expr.contains("tickguard_symbols");
        if per_feed {
            assert!(
                body.contains("{{ $labels.feed }}"),
                "alert {name} is per feed but its annotations do not name {{{{ $labels.feed }}}}"
            );
        }
        assert_eq!(
            body.matches("{{").count(),
            body.matches("}}").count(),
            "alert {name}: unbalanced template braces"
        );
    }
    for wanted in [
        "TickguardFeedSilent",
        "TickguardTicksLost",
        "TickguardDuplicatesJump",
        "TickguardKernelDrops",
        "TickguardWriterHeartbeatLate",
        "TickguardDown",
        "TickguardSymbolsStale",
        "TickguardRejectedPackets",
    ] {
        assert!(names.contains(wanted), "alert {wanted} missing");
    }
}

#[test]
fn alert_rules_use_only_exported_metrics() {
    assert_all_registered(
        "contrib/prometheus/tickguard-alerts.yml",
        &metric_names(ALERTS),
    );
    assert_all_registered(
        "contrib/prometheus/tickguard-alerts.test.yml",
        &metric_names(ALERT_TESTS),
    );
    assert_label_values_exist("the alert rules", ALERTS);
    assert_label_values_exist("the alert rule tests", ALERT_TESTS);
    // The unit tests cover every alert at least once, firing: a case that
    // expects it with its labels (an alert only ever expected silent
    // would pass the tests with an expression that never fires).
    for (name, _) in alert_rules(ALERTS) {
        let covered = ALERT_TESTS.contains(&format!("alertname: {name},"))
            || ALERT_TESTS.contains(&format!("alertname: {name}\n"));
        assert!(covered, "no promtool test mentions {name}");
        let fires = ALERT_TESTS
            .split(&format!("alertname: {name}\n"))
            .skip(1)
            .any(|after| {
                let mut lines = after.lines();
                lines.next().is_some_and(|l| l.trim() == "exp_alerts:")
                    && lines
                        .next()
                        .is_some_and(|l| l.trim_start().starts_with("- exp_labels:"))
            });
        assert!(fires, "no promtool test expects {name} to fire");
    }
}

/// A validator is missing: a note, or a failure where one is required.
fn skip(missing: &str) {
    let required = std::env::var_os("TICKGUARD_REQUIRE_VALIDATORS").is_some_and(|v| v == "1");
    assert!(!required, "TICKGUARD_REQUIRE_VALIDATORS=1 but {missing}");
    crate::common::note_skip(missing);
}

fn tool_available(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn yaml_files_parse_with_pyyaml_when_available() {
    if !python_has_yaml() {
        return skip("python3 with PyYAML not available");
    }
    for file in [
        "prometheus/tickguard-alerts.yml",
        "prometheus/tickguard-alerts.test.yml",
    ] {
        let script = "import sys, yaml\n\
             d = yaml.safe_load(open(sys.argv[1]))\n\
             rules = [r for g in d['groups'] for r in g['rules']] if 'groups' in d else d['tests']\n\
             assert rules, 'empty'\n\
             for r in rules if 'groups' in d else []:\n\
             \x20   assert set(r) == {'alert', 'expr', 'for', 'labels', 'annotations'}, r\n\
             \x20   assert isinstance(r['expr'], str) and r['labels']['severity'], r\n";
        let out = Command::new("python3")
            .args(["-c", script])
            .arg(contrib(file))
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "{file} does not parse as the expected YAML:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn python_has_yaml() -> bool {
    Command::new("python3")
        .args(["-c", "import yaml"])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn promtool() -> Option<PathBuf> {
    let p = std::env::var_os("PROMTOOL")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("promtool"));
    tool_available(p.to_str()?, "--version").then_some(p)
}

#[test]
fn promtool_checks_and_unit_tests_the_rules_when_available() {
    let Some(promtool) = promtool() else {
        return skip("promtool not found (PATH or $PROMTOOL)");
    };
    for args in [
        ["check", "rules", "tickguard-alerts.yml"],
        ["test", "rules", "tickguard-alerts.test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(contrib("prometheus"))
            .output()
            .expect("promtool");
        assert!(
            out.status.success(),
            "promtool {}:\n{}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// The value of `key=` in the unit (the last assignment wins, as in systemd).
fn unit_value(key: &str) -> Option<&'static str> {
    UNIT.lines()
        .rev()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::trim)
}

#[test]
fn systemd_unit_keeps_what_the_sidecar_needs() {
    let section = |name: &str| UNIT.lines().any(|l| l == format!("[{name}]"));
    assert!(section("Unit") && section("Service") && section("Install"));

    let exec = unit_value("ExecStart").expect("ExecStart=");
    assert!(exec.starts_with("/usr/local/bin/tickguard "), "{exec}");
    assert!(
        exec.contains(" run --config /etc/tickguard/config.toml"),
        "{exec}"
    );
    for (key, want) in [
        ("User", "tickguard"),
        ("Group", "tickguard"),
        ("RemoveIPC", "no"),
        ("Restart", "on-failure"),
        ("RestartSec", "2"),
        // Never given up on: a start limit would leave every gateway
        // stale after a few quick failures.
        ("StartLimitIntervalSec", "0"),
        ("KillSignal", "SIGTERM"),
        ("TimeoutStopSec", "5"),
        ("LimitMEMLOCK", "infinity"),
        ("NoNewPrivileges", "yes"),
        ("ProtectHome", "yes"),
        ("ProtectSystem", "strict"),
        ("ReadWritePaths", "/dev/shm"),
        ("CapabilityBoundingSet", ""),
        ("WantedBy", "multi-user.target"),
    ] {
        assert_eq!(unit_value(key), Some(want), "{key}=");
    }
    assert!(unit_value("CPUAffinity").is_some(), "CPUAffinity=");
    let families = unit_value("RestrictAddressFamilies").expect("RestrictAddressFamilies=");
    assert!(
        families.split(' ').any(|f| f == "AF_INET"),
        "multicast needs AF_INET"
    );
    // Settings that would delete, hide or privatise /dev/shm or the readers' group.
    for key in [
        "DynamicUser",
        "PrivateDevices",
        "PrivateIPC",
        "PrivateUsers",
        "PrivateNetwork",
    ] {
        assert!(
            unit_value(key).is_none_or(|v| v == "no"),
            "{key}= would break the shared memory or the feeds"
        );
    }
    assert!(!UNIT.lines().any(|l| l.starts_with("IPAddressDeny=")));
    // Nice/FIFO are discussed but not enabled.
    assert!(unit_value("CPUSchedulingPolicy").is_none() && unit_value("Nice").is_none());
    assert!(UNIT.contains("#CPUSchedulingPolicy=fifo") && UNIT.contains("#Nice=-10"));

    // The user the unit names is the one sysusers creates.
    assert!(SYSUSERS.lines().any(|l| l.starts_with("u tickguard ")));
    // The unit and sysctl sample mention the sysctl that caps SO_RCVBUF.
    assert!(UNIT.contains("net.core.rmem_max"));
    assert!(SYSCTL.lines().any(|l| l.starts_with("net.core.rmem_max")));
    // The config keys the unit and README talk about exist.
    let config_rs = include_str!("../../crates/engine/src/config.rs");
    for key in ["shm_mode", "shm_path", "cpu", "rcvbuf_bytes", "listen"] {
        assert!(
            config_rs.contains(&format!("//! {key} =")),
            "config key {key}"
        );
    }
    assert!(OPERATOR_GUIDE.contains("127.0.0.1:9187"));
    assert!(
        config_rs.contains("127.0.0.1:9187"),
        "the default metrics address moved"
    );
}

#[test]
fn systemd_analyze_verifies_the_unit_when_available() {
    if !tool_available("systemd-analyze", "--version") {
        return skip("systemd-analyze not available");
    }
    // Verify against the binary just built: verify insists that ExecStart exists.
    let dir = tempfile::tempdir().unwrap();
    let unit = dir.path().join("tickguard.service");
    std::fs::write(
        &unit,
        UNIT.replace("/usr/local/bin/tickguard", env!("CARGO_BIN_EXE_tickguard")),
    )
    .unwrap();
    let out = Command::new("systemd-analyze")
        .arg("verify")
        .arg(&unit)
        .output()
        .expect("systemd-analyze");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Unknown keys and bad values are only warnings: fail on any line about the unit.
    let about_unit: Vec<_> = stderr
        .lines()
        .filter(|l| l.contains("tickguard.service"))
        .collect();
    assert!(about_unit.is_empty(), "systemd-analyze verify:\n{stderr}");
    if !out.status.success() {
        let required = std::env::var_os("TICKGUARD_REQUIRE_VALIDATORS").is_some_and(|v| v == "1");
        assert!(
            !required,
            "TICKGUARD_REQUIRE_VALIDATORS=1 but systemd-analyze verify failed outside the unit:\n{stderr}"
        );
        eprintln!(
            "systemd-analyze verify failed for reasons outside the unit, not judged:\n{stderr}"
        );
    }
}

#[test]
fn metric_name_extraction() {
    let found = metric_names("rate(tickguard_packets_total{x=\"y\"}[1m]) / my_tickguard_x + tickguard_up2 tickguard_symbols");
    assert_eq!(
        found.into_iter().collect::<Vec<_>>(),
        [
            "tickguard_packets_total",
            "tickguard_symbols",
            "tickguard_up2"
        ]
    );
    assert_eq!(
        label_values(
            "a{verdict=\"ok\", xverdict=\"no\"} b{verdict!=\"stale\", verdict=~\"s.*\"}",
            "verdict"
        )
        .into_iter()
        .collect::<Vec<_>>(),
        ["ok", "stale"]
    );
}
