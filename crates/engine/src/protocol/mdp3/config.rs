//! An `mdp3` feed's own keys (spec mdp3 §6), their ranges, and the three
//! services the feed receives on: the incremental `lines`, the snapshot
//! (market recovery) lines and the instrument definition lines, each as
//! line A and an optional line B.
//!
//! ```toml
//! [[feed]]
//! name = "cme-310"
//! protocol = "mdp3"                  # no `kind`: an MDP3 channel is a delta feed
//! lines = ["239.3.1.1:14310", "239.3.1.2:15310"]           # incremental, A and optional B
//! stale_threshold_ms = 32000         # CME sends a heartbeat after 30 s of silence
//! source_threshold_ms = 32000
//! snapshot_lines = ["239.3.1.3:14311", "239.3.1.4:15311"]  # 0 to 2; none by default
//! definition_lines = ["239.3.1.5:14312"]                   # 0 to 2; none by default
//! definitions = "defs-310.pcap"      # a capture of definitions, read before the feed's packets
//! snapshot_join = "on_demand"        # the default, or "always"
//! snapshot_max_loops = 3
//! gap_timeout_ms = 5
//! max_cached = 1000000
//! max_instruments = 100000
//! default_depth = 10
//! default_implied_depth = 2
//! restart_margin = 10000
//! ```
//!
//! `definitions` is kept as written while the text is parsed (the parser is
//! given text and a name for errors). A relative path means relative to the
//! directory of the configuration file: loading a file takes it from there
//! and opens it ([`FeedProtocol::locate_files`]), so an unreadable file is a
//! configuration error, one line naming the feed and the file.
//!
//! `kind`, `recovery`, `recovery_listen`, `max_held`, `join_gap_max` and
//! `timezone` are refused, each with its reason ([`FeedProtocol::REFUSED`]);
//! any other protocol's key is refused by the shared code as for every
//! protocol. An address used twice, within one of the lists here or by
//! any two services of any feeds, is refused: within a list here, by
//! [`Mdp3Config::resolve`]; across services, by the shared check of every
//! feed's [`Service`]s.
//!
//! Each integer key's range is a [`Range`] below; docs/configuration.md
//! lists them with the other keys.

use super::book::MAX_DEPTH;
use crate::config::keys::{echo, FeedKeys, FeedProtocol, Problem, Range, Sp, NS_PER_MS};
use crate::config::services::{line_index, Service, COPIES};
use crate::state::FeedKind;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};

/// An `mdp3` feed's settings (spec mdp3 §6).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mdp3Config {
    /// The snapshot (market recovery) lines: none, A, or A and B.
    pub snapshot_lines: Vec<SocketAddrV4>,
    /// The instrument definition lines: none, A, or A and B.
    pub definition_lines: Vec<SocketAddrV4>,
    /// A capture of definition packets read before anything else: as
    /// written in the file when parsed, then (`Config::load`, through
    /// `locate_files`) a relative path joined to the configuration file's
    /// directory, links to the file followed (the current directory for a
    /// configuration read from a pipe).
    pub definitions: Option<PathBuf>,
    /// When the snapshot lines are joined.
    pub snapshot_join: SnapshotJoin,
    /// On demand, the snapshot lines are left after this many whole loops
    /// that healed no instrument.
    pub snapshot_max_loops: u32,
    /// A gap in the incremental sequence open longer than this is given
    /// up, ns.
    pub gap_timeout_ns: u64,
    /// Most entries cached over every instrument of the feed, waiting for
    /// the ones before them.
    pub max_cached: usize,
    /// Most instruments the feed keeps (each costs about 2 KB, up to about
    /// 13 KB at the deepest books a definition can state).
    pub max_instruments: usize,
    /// Whether the configuration sets `max_instruments`: only then is it
    /// also the feed's reservation in the state table.
    pub max_instruments_set: bool,
    /// Levels of an instrument's outright book without a definition that
    /// says.
    pub default_depth: u8,
    /// Levels of an instrument's implied book without a definition that
    /// says.
    pub default_implied_depth: u8,
    /// A MsgSeqNum this far below the highest seen is a restart of the
    /// sequence, not a late copy.
    pub restart_margin: u32,
}

/// When the snapshot lines are joined (`snapshot_join`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotJoin {
    /// `"on_demand"`: while some instrument needs a snapshot, and until
    /// `snapshot_max_loops` loops have healed none.
    #[default]
    OnDemand,
    /// `"always"`: joined from the start, never left.
    Always,
}

/// Position of the incremental lines among the feed's services.
pub const INCREMENTAL_SERVICE: usize = 0;

/// Position of the snapshot lines among the feed's services.
pub const SNAPSHOT_SERVICE: usize = 1;

/// Position of the definition lines among the feed's services.
pub const DEFINITION_SERVICE: usize = 2;

/// The line number of snapshot line A (B is one more).
pub const SNAPSHOT_LINE: usize = line_index(SNAPSHOT_SERVICE, 0);

/// The line number of definition line A (B is one more).
pub const DEFINITION_LINE: usize = line_index(DEFINITION_SERVICE, 0);

/// Which of the feed's services a line number given to the engine is
/// (the copy, A or B, is `line % 2`); `None` past the last.
pub const fn service_of(line: usize) -> Option<usize> {
    match line / COPIES {
        s @ (INCREMENTAL_SERVICE | SNAPSHOT_SERVICE | DEFINITION_SERVICE) => Some(s),
        _ => None,
    }
}

/// `snapshot_max_loops`: whole snapshot loops that heal nothing before the
/// snapshot lines are left (on demand); a loop repeats every active
/// instrument, so a few are enough, and a thousand bounds a feed that
/// never heals.
pub const SNAPSHOT_MAX_LOOPS: Range = Range {
    table: "[[feed]] mdp3",
    key: "snapshot_max_loops",
    min: 1,
    max: 1_000,
    default: Some(3),
    unit: "loops",
};

/// `gap_timeout_ms`: how long line B's copy of a missing incremental
/// packet may take; nothing is held meanwhile, so it only delays marking
/// instruments unverified. At most a minute.
pub const GAP_TIMEOUT_MS: Range = Range {
    table: "[[feed]] mdp3",
    key: "gap_timeout_ms",
    min: 1,
    max: 60_000,
    default: Some(5),
    unit: "ms",
};

/// `max_cached`: entries waiting for an instrument's missing RptSeq, over
/// the whole feed. One more drops that instrument's cache and leaves it to
/// the next snapshot; 0 caches nothing (every hole waits for a snapshot).
pub const MAX_CACHED: Range = Range {
    table: "[[feed]] mdp3",
    key: "max_cached",
    min: 0,
    max: 100_000_000,
    default: Some(1_000_000),
    unit: "entries",
};

/// `max_instruments`: instruments (SecurityIDs) the feed keeps; a message
/// naming one more is ignored for it and counted (`instruments_refused`).
/// CME's largest channels list tens of thousands; each instrument costs
/// about 2 KB at CME's depths (10 and 2), so the default bounds a flood of
/// forged SecurityIDs to about 200 MB; definitions stating the largest
/// MarketDepth the wire holds (127, both books) make it about 13 KB, so
/// forged definitions too could take about 1.3 GB. Group statuses are kept for three (SecurityGroup, Asset)
/// pairs per instrument it allows. Set, it is also the slots the feed
/// reserves in the state table ([`FeedProtocol::reserved_slots`]); the
/// default, more than the default `capacity`, reserves none.
pub const MAX_INSTRUMENTS: Range = Range {
    table: "[[feed]] mdp3",
    key: "max_instruments",
    min: 1,
    max: 10_000_000,
    default: Some(DEFAULT_MAX_INSTRUMENTS),
    unit: "instruments",
};

/// `max_instruments` when the configuration does not set it.
const DEFAULT_MAX_INSTRUMENTS: i64 = 100_000;

/// `default_depth`: levels per side of an outright book whose definition
/// gives none (MarketDepth is an i8).
pub const DEFAULT_DEPTH: Range = Range {
    table: "[[feed]] mdp3",
    key: "default_depth",
    min: 1,
    max: MAX_DEPTH as i64,
    default: Some(10),
    unit: "levels",
};

/// `default_implied_depth`: levels per side of an implied book whose
/// definition gives none (CME publishes two).
pub const DEFAULT_IMPLIED_DEPTH: Range = Range {
    table: "[[feed]] mdp3",
    key: "default_implied_depth",
    min: 1,
    max: MAX_DEPTH as i64,
    default: Some(2),
    unit: "levels",
};

/// `restart_margin`: an incremental MsgSeqNum this many or more below the
/// highest seen (more than this below one past it) restarts the sequence
/// (the weekly reset); within it, a
/// packet is a late copy. Larger than the packets line B may lag behind
/// line A.
pub const RESTART_MARGIN: Range = Range {
    table: "[[feed]] mdp3",
    key: "restart_margin",
    min: 1,
    max: 1_000_000,
    default: Some(10_000),
    unit: "packets",
};

impl FeedProtocol for Mdp3Config {
    /// Prices are mantissas of exponent −9.
    const PRICE_DECIMALS: u8 = 9;

    const KEYS: &'static [&'static str] = &[
        "snapshot_lines",
        "definition_lines",
        "definitions",
        "snapshot_join",
        "snapshot_max_loops",
        "gap_timeout_ms",
        "max_cached",
        "max_instruments",
        "default_depth",
        "default_implied_depth",
        "restart_margin",
    ];

    const RANGES: &'static [Range] = &[
        SNAPSHOT_MAX_LOOPS,
        GAP_TIMEOUT_MS,
        MAX_CACHED,
        MAX_INSTRUMENTS,
        DEFAULT_DEPTH,
        DEFAULT_IMPLIED_DEPTH,
        RESTART_MARGIN,
    ];

    const REFUSED: &'static [(&'static str, &'static str)] = &[
        ("kind", "an MDP3 channel is a delta feed by nature"),
        (
            "recovery",
            "an MDP3 feed recovers from its snapshot_lines, not by re-request",
        ),
        (
            "recovery_listen",
            "an MDP3 feed recovers from its snapshot_lines, not by re-request",
        ),
        (
            "max_held",
            "nothing is held back; max_cached bounds the entries that wait",
        ),
        (
            "join_gap_max",
            "each instrument's RptSeq tells whether its history was seen",
        ),
        (
            "timezone",
            "MDP3 times are nanoseconds since the Unix epoch, UTC",
        ),
    ];

    fn resolve(keys: &mut FeedKeys) -> Result<Mdp3Config, Problem> {
        let snapshot_lines = lines(keys, "snapshot_lines")?;
        let definition_lines = lines(keys, "definition_lines")?;
        let definitions = match keys.text("definitions")? {
            None => None,
            Some(p) if !p.get_ref().is_empty() && !p.get_ref().contains('\0') => {
                Some(PathBuf::from(p.into_inner()))
            }
            Some(p) => {
                return Err(Problem::at(
                    &p,
                    "definitions must be a non-empty path without NUL bytes".into(),
                ))
            }
        };
        let snapshot_join = keys
            .named::<SnapshotJoin>("snapshot_join")?
            .map_or(SnapshotJoin::default(), Sp::into_inner);
        let snapshot_max_loops = keys.int_or_default(&SNAPSHOT_MAX_LOOPS)? as u32;
        if snapshot_lines.is_empty() {
            // Valid, but they would do nothing: no snapshot line to join.
            keys.refuse_without(
                &["snapshot_join", "snapshot_max_loops"],
                "snapshot_lines: without them no snapshot line is joined",
            )?;
        }
        let max_instruments = keys.int(&MAX_INSTRUMENTS)?;
        Ok(Mdp3Config {
            snapshot_lines,
            definition_lines,
            definitions,
            snapshot_join,
            snapshot_max_loops,
            gap_timeout_ns: keys.int_or_default(&GAP_TIMEOUT_MS)? * NS_PER_MS,
            max_cached: keys.int_or_default(&MAX_CACHED)? as usize,
            max_instruments: max_instruments.unwrap_or(DEFAULT_MAX_INSTRUMENTS) as usize,
            max_instruments_set: max_instruments.is_some(),
            default_depth: keys.int_or_default(&DEFAULT_DEPTH)? as u8,
            default_implied_depth: keys.int_or_default(&DEFAULT_IMPLIED_DEPTH)? as u8,
            restart_margin: keys.int_or_default(&RESTART_MARGIN)? as u32,
        })
    }

    fn kind(&self) -> FeedKind {
        FeedKind::Delta
    }

    /// `max_instruments`, when the configuration sets it: an instrument
    /// takes a slot once and keeps it, and the feed never keeps more
    /// (left at its default, which would not fit the default `capacity`
    /// beside another feed, the feed reserves nothing).
    fn reserved_slots(&self) -> Option<(usize, &'static str)> {
        self.max_instruments_set
            .then_some((self.max_instruments, "max_instruments"))
    }

    /// A Symbol for each instrument it reserves a slot for (beside its
    /// `#SecurityID`): another channel's renames, forged or not, never
    /// take the names of this one's instruments.
    fn reserved_names(&self) -> usize {
        self.reserved_slots().map_or(0, |(n, _)| n)
    }

    fn services(&self, lines: &[SocketAddrV4]) -> Vec<Service> {
        vec![
            Service::lines("lines", lines),
            Service::lines("snapshot_lines", &self.snapshot_lines),
            Service::lines("definition_lines", &self.definition_lines),
        ]
    }

    /// A Symbol (1 to 20 printable ASCII characters, spaces only between
    /// others: CME's is a `char[20]`, an option's holds one) or `#` and a
    /// SecurityID in decimal.
    fn name_problem(name: &str) -> Option<&'static str> {
        (!instrument_name_ok(name)).then_some(INSTRUMENT_RULE)
    }

    fn locate_files(&mut self, dir: &Path) -> Result<(), String> {
        let Some(written) = &self.definitions else {
            return Ok(());
        };
        let path = dir.join(written);
        // A capture read whole before the feeds start: a FIFO or a device
        // in its place would block or never end the replay's first step.
        crate::sys::open_regular(&path)
            .map_err(|e| format!("definitions {}: {e}", path.display()))?;
        self.definitions = Some(path);
        Ok(())
    }

    fn files(&self) -> Vec<&Path> {
        self.definitions.as_deref().into_iter().collect()
    }
}

/// What an MDP3 instrument's name is, as errors say it.
pub const INSTRUMENT_RULE: &str = "not a valid instrument (a Symbol of 1 to 20 printable ASCII \
characters, spaces only between others, or # and a SecurityID written in decimal as the channel names it: \
a minus sign only for a negative one, no plus sign, no leading zero)";

/// Whether `name` can name an MDP3 instrument: `#` and a SecurityID (an
/// `Int32`, decimal, as the channel names it: no `+`, no leading zero, so
/// that an override is never accepted under a name no check resolves), or
/// a Symbol of 1 to 20 printable ASCII characters, spaces only between
/// others (an option's, `ESZ6 C5000`; the channel drops trailing ones).
pub fn instrument_name_ok(name: &str) -> bool {
    match name.strip_prefix('#') {
        Some(id) => id.parse::<i32>().is_ok_and(|n| n.to_string() == id),
        None => {
            (1..=20).contains(&name.len())
                && name.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
                && !name.starts_with(' ')
                && !name.ends_with(' ')
        }
    }
}

/// List `key` of 0 to 2 `ip:port` (line A, optional line B), each with a
/// port and listed once; none when absent.
fn lines(keys: &mut FeedKeys, key: &str) -> Result<Vec<SocketAddrV4>, Problem> {
    let Some(list) = keys.strings(key, "ip:port")? else {
        return Ok(Vec::new());
    };
    let n = list.get_ref().len();
    if n > COPIES {
        return Err(Problem::at(
            &list,
            format!("{key} must list 0 to {COPIES} ip:port (line A, optional line B), got {n}"),
        ));
    }
    let mut addrs = Vec::with_capacity(n);
    for l in list.get_ref() {
        let fail = |what: &str| Err(Problem::at(&list, format!("{key}: {} {what}", echo(l))));
        let Ok(addr) = l.parse::<SocketAddrV4>() else {
            return fail("is not an IPv4 ip:port");
        };
        if addr.port() == 0 {
            return fail("has port 0");
        }
        if addrs.contains(&addr) {
            return fail("is listed twice");
        }
        addrs.push(addr);
    }
    Ok(addrs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::services::Receive;

    /// The settings `text` (an mdp3 feed's own keys) resolves to, checking
    /// that every key given was read.
    fn config(text: &str) -> Mdp3Config {
        let mut keys = FeedKeys::from_toml(text);
        let c = Mdp3Config::resolve(&mut keys).unwrap_or_else(|p| panic!("{}", p.message()));
        assert!(keys.left().is_empty(), "left unread: {:?}", keys.left());
        c
    }

    /// The problem `text` is refused with.
    fn refused(text: &str) -> String {
        let mut keys = FeedKeys::from_toml(text);
        match Mdp3Config::resolve(&mut keys) {
            Ok(c) => panic!("{text:?} accepted: {c:?}"),
            Err(p) => {
                assert!(p.offset().is_some(), "{text:?}: {}", p.message());
                p.message().to_string()
            }
        }
    }

    fn addr(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    /// The value a range's key resolved to in `c`.
    fn value(c: &Mdp3Config, r: &Range) -> i64 {
        let v = match r.key {
            "snapshot_max_loops" => u64::from(c.snapshot_max_loops),
            "gap_timeout_ms" => c.gap_timeout_ns / NS_PER_MS,
            "max_cached" => c.max_cached as u64,
            "max_instruments" => c.max_instruments as u64,
            "default_depth" => u64::from(c.default_depth),
            "default_implied_depth" => u64::from(c.default_implied_depth),
            "restart_margin" => u64::from(c.restart_margin),
            k => panic!("no field for {k}"),
        };
        v as i64
    }

    #[test]
    fn defaults() {
        let c = config("");
        assert_eq!(
            c,
            Mdp3Config {
                snapshot_lines: vec![],
                definition_lines: vec![],
                definitions: None,
                snapshot_join: SnapshotJoin::OnDemand,
                snapshot_max_loops: 3,
                gap_timeout_ns: 5 * NS_PER_MS,
                max_cached: 1_000_000,
                max_instruments: 100_000,
                max_instruments_set: false,
                default_depth: 10,
                default_implied_depth: 2,
                restart_margin: 10_000,
            }
        );
        // Each range's default is the one resolved.
        for r in Mdp3Config::RANGES {
            assert_eq!(r.default, Some(value(&c, r)), "{}", r.key);
        }
        assert_eq!(c.kind(), FeedKind::Delta);
        assert_eq!(Mdp3Config::PRICE_DECIMALS, 9);
        // The default bound reserves no slot; one set reserves itself,
        // the default's value too.
        assert_eq!(c.reserved_slots(), None);
        let set = config("max_instruments = 100000\n");
        assert_eq!(set.reserved_slots(), Some((100_000, "max_instruments")));
    }

    #[test]
    fn every_key_is_read_as_written() {
        let c = config(
            "snapshot_lines = [\"239.3.1.3:14311\", \"239.3.1.4:15311\"]\n\
             definition_lines = [\"239.3.1.5:14312\"]\n\
             definitions = \"defs/defs-310.pcap\"\n\
             snapshot_join = \"always\"\n\
             snapshot_max_loops = 7\n\
             gap_timeout_ms = 20\n\
             max_cached = 0\n\
             max_instruments = 9\n\
             default_depth = 5\n\
             default_implied_depth = 3\n\
             restart_margin = 500\n",
        );
        assert_eq!(
            c,
            Mdp3Config {
                snapshot_lines: vec![addr("239.3.1.3:14311"), addr("239.3.1.4:15311")],
                definition_lines: vec![addr("239.3.1.5:14312")],
                definitions: Some("defs/defs-310.pcap".into()),
                snapshot_join: SnapshotJoin::Always,
                snapshot_max_loops: 7,
                gap_timeout_ns: 20 * NS_PER_MS,
                max_cached: 0,
                max_instruments: 9,
                max_instruments_set: true,
                default_depth: 5,
                default_implied_depth: 3,
                restart_margin: 500,
            }
        );
    }

    /// The ranges as the spec sets them, each listed and a key of the
    /// protocol's table.
    #[test]
    fn the_ranges_are_the_specified_ones() {
        let all: Vec<(&str, i64, i64, Option<i64>)> = Mdp3Config::RANGES
            .iter()
            .map(|r| (r.key, r.min, r.max, r.default))
            .collect();
        assert_eq!(
            all,
            [
                ("snapshot_max_loops", 1, 1_000, Some(3)),
                ("gap_timeout_ms", 1, 60_000, Some(5)),
                ("max_cached", 0, 100_000_000, Some(1_000_000)),
                ("max_instruments", 1, 10_000_000, Some(100_000)),
                ("default_depth", 1, 127, Some(10)),
                ("default_implied_depth", 1, 127, Some(2)),
                ("restart_margin", 1, 1_000_000, Some(10_000)),
            ]
        );
        for r in Mdp3Config::RANGES {
            assert_eq!(r.table, "[[feed]] mdp3", "{}", r.key);
            assert!(Mdp3Config::KEYS.contains(&r.key), "{}", r.key);
        }
    }

    #[test]
    fn every_range_is_enforced_at_both_ends() {
        for r in Mdp3Config::RANGES {
            // A snapshot key needs snapshot lines to act on.
            let lines = match r.key.starts_with("snapshot_") {
                true => "snapshot_lines = [\"239.3.1.3:14311\"]\n",
                false => "",
            };
            for v in [r.min, r.max] {
                let c = config(&format!("{lines}{} = {v}\n", r.key));
                assert_eq!(value(&c, r), v, "{}", r.key);
            }
            for v in [r.min - 1, r.max + 1] {
                let e = refused(&format!("{} = {v}\n", r.key));
                let want = format!(
                    "{} = {v} is out of range: {} to {} {}",
                    r.key, r.min, r.max, r.unit
                );
                assert_eq!(e, want);
            }
            let e = refused(&format!("{} = \"1\"\n", r.key));
            assert!(
                e.ends_with(&format!("({} is {})", r.key, r.accepts())),
                "{e}"
            );
        }
    }

    #[test]
    fn snapshot_join_is_on_demand_or_always() {
        let lines = "snapshot_lines = [\"239.3.1.3:14311\"]\n";
        let join = |v: &str| config(&format!("{lines}snapshot_join = {v}\n")).snapshot_join;
        assert_eq!(join("\"on_demand\""), SnapshotJoin::OnDemand);
        assert_eq!(join("\"always\""), SnapshotJoin::Always);
        assert_eq!(config("").snapshot_join, SnapshotJoin::OnDemand);
        for bad in ["\"on-demand\"", "\"never\"", "\"Always\"", "\"\""] {
            let e = refused(&format!("snapshot_join = {bad}\n"));
            assert!(e.contains("expected `on_demand` or `always`"), "{bad}: {e}");
        }
        let e = refused("snapshot_join = true\n");
        assert!(
            e.ends_with("(snapshot_join is `on_demand` or `always`)"),
            "{e}"
        );
    }

    #[test]
    fn snapshot_and_definition_lines_list_zero_to_two() {
        for key in ["snapshot_lines", "definition_lines"] {
            let lists = |c: &Mdp3Config| match key {
                "snapshot_lines" => c.snapshot_lines.clone(),
                _ => c.definition_lines.clone(),
            };
            let of = |list: &str| lists(&config(&format!("{key} = {list}\n")));
            assert_eq!(of("[]"), []);
            assert_eq!(of("[\"239.3.1.3:14311\"]"), [addr("239.3.1.3:14311")]);
            assert_eq!(
                of("[\"239.3.1.3:14311\", \"10.0.0.1:9\"]"),
                [addr("239.3.1.3:14311"), addr("10.0.0.1:9")]
            );
            let e = refused(&format!(
                "{key} = [\"239.3.1.3:1\", \"239.3.1.3:2\", \"239.3.1.3:3\"]\n"
            ));
            assert_eq!(
                e,
                format!("{key} must list 0 to 2 ip:port (line A, optional line B), got 3")
            );
            let cases = [
                ("[\"239.3.1.3\"]", "'239.3.1.3' is not an IPv4 ip:port"),
                ("[\"host:1\"]", "'host:1' is not an IPv4 ip:port"),
                ("[\"239.3.1.3:0\"]", "'239.3.1.3:0' has port 0"),
                (
                    "[\"239.3.1.3:1\", \"239.3.1.3:1\"]",
                    "'239.3.1.3:1' is listed twice",
                ),
            ];
            for (list, why) in cases {
                let e = refused(&format!("{key} = {list}\n"));
                assert_eq!(e, format!("{key}: {why}"), "{list}");
            }
            for bad in ["\"239.3.1.3:1\"", "[1]", "1"] {
                let e = refused(&format!("{key} = {bad}\n"));
                assert_eq!(e, format!("{key} must be a list of ip:port"), "{bad}");
            }
        }
    }

    #[test]
    fn definitions_is_a_path_taken_from_the_configuration_file() {
        let c = config("definitions = \"defs-310.pcap\"\n");
        assert_eq!(c.definitions, Some(PathBuf::from("defs-310.pcap")));
        // Located from the directory `Config::load` gives (its own rule,
        // links and pipes, is tested there): joined once, the file there.
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("defs-310.pcap");
        std::fs::write(&file, b"").unwrap();
        let mut located = c.clone();
        located.locate_files(dir.path()).unwrap();
        assert_eq!(located.definitions, Some(file.clone()));
        assert_eq!(located.files(), [file.as_path()]);
        let mut abs = config(&format!("definitions = \"{}\"\n", file.display()));
        abs.locate_files(Path::new("/nonexistent")).unwrap();
        assert_eq!(abs.definitions, Some(file));
        let mut none = config("");
        none.locate_files(dir.path()).unwrap();
        assert_eq!(none.definitions, None);
        let mut missing = c.clone();
        let e = missing.locate_files(Path::new("/nonexistent")).unwrap_err();
        assert!(
            e.starts_with("definitions /nonexistent/defs-310.pcap: "),
            "{e}"
        );
        for bad in ["\"\"", "\"a\\u0000b\""] {
            let e = refused(&format!("definitions = {bad}\n"));
            assert_eq!(e, "definitions must be a non-empty path without NUL bytes");
        }
        let e = refused("definitions = 1\n");
        assert!(e.contains("invalid type"), "{e}");
    }

    /// The keys the spec makes errors on an mdp3 feed are not its keys
    /// (so the shared code refuses them before resolving, as it refuses
    /// any key a protocol does not take), each with a reason of its own;
    /// resolving never reads them.
    #[test]
    fn other_protocols_keys_are_refused_with_a_reason() {
        const FORBIDDEN: [&str; 6] = [
            "kind",
            "recovery",
            "recovery_listen",
            "max_held",
            "join_gap_max",
            "timezone",
        ];
        let refused: Vec<&str> = Mdp3Config::REFUSED.iter().map(|(k, _)| *k).collect();
        assert_eq!(refused, FORBIDDEN);
        for (key, why) in Mdp3Config::REFUSED {
            assert!(!Mdp3Config::KEYS.contains(key), "{key} is taken");
            assert!(!why.is_empty() && !why.contains('\n'), "{key}");
        }
        let mut keys = FeedKeys::from_toml(
            "kind = \"delta\"\nrecovery = \"127.0.0.1:1\"\nrecovery_listen = \"0.0.0.0:0\"\n\
             max_held = 1\njoin_gap_max = 1\ntimezone = \"UTC\"\n",
        );
        Mdp3Config::resolve(&mut keys).unwrap();
        let mut sorted = FORBIDDEN;
        sorted.sort_unstable();
        assert_eq!(keys.left(), sorted);
    }

    /// Three services in a fixed order, so their line numbers are fixed:
    /// incremental 0 and 1, snapshots 2 and 3, definitions 4 and 5, each
    /// present (empty when not configured).
    #[test]
    fn services_are_incremental_snapshot_definition() {
        let c = config(
            "snapshot_lines = [\"239.3.1.3:14311\", \"239.3.1.4:15311\"]\n\
             definition_lines = [\"239.3.1.5:14312\"]\n",
        );
        let lines = [addr("239.3.1.1:14310"), addr("239.3.1.2:15310")];
        let services = c.services(&lines);
        let seen: Vec<(&str, Receive)> = services
            .iter()
            .map(|s| (s.key, s.receive.clone()))
            .collect();
        assert_eq!(
            seen,
            [
                ("lines", Receive::Lines(lines.to_vec())),
                ("snapshot_lines", Receive::Lines(c.snapshot_lines.clone())),
                (
                    "definition_lines",
                    Receive::Lines(c.definition_lines.clone())
                ),
            ]
        );
        assert_eq!(services[INCREMENTAL_SERVICE].key, "lines");
        assert_eq!(services[SNAPSHOT_SERVICE].key, "snapshot_lines");
        assert_eq!(services[DEFINITION_SERVICE].key, "definition_lines");
        assert_eq!((SNAPSHOT_LINE, DEFINITION_LINE), (2, 4));
        let of = |line| service_of(line);
        assert_eq!(
            (0..7).map(of).collect::<Vec<_>>(),
            [Some(0), Some(0), Some(1), Some(1), Some(2), Some(2), None]
        );
        // Without snapshot or definition lines, and one incremental line,
        // the positions stay.
        let bare = config("").services(&lines[..1]);
        assert_eq!(bare.len(), 3);
        assert_eq!(bare[0].receive, Receive::Lines(lines[..1].to_vec()));
        assert_eq!(bare[1].receive, Receive::Lines(vec![]));
        assert_eq!(bare[2].receive, Receive::Lines(vec![]));
    }
}
