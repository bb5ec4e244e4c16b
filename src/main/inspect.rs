//! `tickguard inspect CAPTURE`: what a capture holds, for someone handed a
//! pcap and asked to replay it. Each UDP destination with its datagrams,
//! the protocol they look like (every protocol's sniffer is tried; a
//! datagram counts for one only if it passes that protocol's whole validity
//! walk), sessions, sequence range, time span and symbols; and, on request,
//! a configuration that replays it.
//!
//! Memory is bounded whatever the capture: destinations, and the sources,
//! sessions and symbols kept per destination and in all, are capped.

use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::net::SocketAddrV4;
use std::path::Path;
use tickguard::capture::{CaptureReader, CaptureStats};
use tickguard::protocol::{sniff, Protocol};
use tickguard::symbol::Symbol;

/// Most destinations kept; datagrams to others are counted apart.
const MAX_DESTINATIONS: usize = 4096;
/// Most sources, sessions kept per destination.
const MAX_NAMED: usize = 8;
/// Most symbols kept per destination (their count stays exact up to here).
const MAX_SYMBOLS: usize = 100_000;
/// Most symbols kept over all destinations (about 40 MB at most; a draft's
/// look-ups of them as much again).
const MAX_SYMBOLS_TOTAL: usize = 1_000_000;
/// Symbols printed per destination.
const SHOWN_SYMBOLS: usize = 12;

/// What a capture holds.
pub struct Inventory {
    /// The capture's reader counters (records, datagrams, what was not UDP/IPv4).
    pub stats: CaptureStats,
    /// By destination.
    pub destinations: BTreeMap<SocketAddrV4, Destination>,
    /// Datagrams to destinations past [`MAX_DESTINATIONS`].
    pub other_datagrams: u64,
    /// Where the capture broke, if it did: it was inspected up to there.
    pub broken: Option<String>,
}

/// What a draft needs of the protocol a destination carries.
#[derive(Clone, Copy)]
struct Readable {
    looks_like: &'static str,
    protocol: Option<Protocol>,
    keys: &'static str,
    rank: u8,
    recovery_keys: Option<[&'static str; 2]>,
}

/// One UDP destination of a capture.
#[derive(Default)]
pub struct Destination {
    /// Datagrams addressed to it.
    pub datagrams: u64,
    /// Arrival times of the first and last, ns since the Unix epoch.
    pub span_ns: (u64, u64),
    /// Sources seen (at most [`MAX_NAMED`]), and whether there were more.
    pub sources: BTreeSet<SocketAddrV4>,
    more_sources: bool,
    /// Datagrams by what they look like (`None`: no protocol accepts them).
    pub looks: BTreeMap<Option<&'static str>, u64>,
    /// For each protocol some of them look like: its configuration
    /// switch, the highest-ranked keys a draft needs (with their rank) and
    /// the key of its recovery channel's address. Kept per protocol, so
    /// that another protocol's datagrams between them (a mixed
    /// destination) never lose what one of its datagrams decided.
    protocols: BTreeMap<&'static str, Readable>,
    /// The highest-ranked keys that decide only a stream none of whose
    /// datagrams ranks 0 ([`Sniff::draft_alone`](tickguard::protocol::Sniff)),
    /// and the protocols of which a datagram ranked 0.
    weak: Option<Readable>,
    plain: BTreeSet<&'static str>,
    /// Sessions seen (at most [`MAX_NAMED`]).
    pub sessions: BTreeSet<String>,
    /// Lowest and highest sequence number seen.
    pub sequences: Option<(u64, u64)>,
    /// Symbols named (at most [`MAX_SYMBOLS`]).
    pub symbols: BTreeSet<Symbol>,
}

impl Destination {
    /// What a draft needs of it: the keys its datagrams decide, those
    /// that decide only alone where no datagram of their protocol ranked
    /// 0 (and they rank higher).
    fn readable(&self) -> Option<Readable> {
        let protocol = self
            .looks_like()
            .and_then(|l| self.protocols.get(l))
            .copied();
        match (protocol, self.weak) {
            (p, Some(w))
                if self.looks_like() == Some(w.looks_like)
                    && !self.plain.contains(w.looks_like)
                    && p.is_none_or(|p| p.looks_like != w.looks_like || p.rank < w.rank) =>
            {
                Some(w)
            }
            (p, _) => p,
        }
    }

    /// What most of its datagrams look like, if any protocol accepts them.
    pub fn looks_like(&self) -> Option<&'static str> {
        self.looks
            .iter()
            .max_by_key(|(name, n)| (**n, name.is_some()))
            .and_then(|(name, _)| *name)
    }
}

impl Inventory {
    /// Reads the whole capture at `path`.
    pub fn read(path: &Path) -> Result<Inventory> {
        let mut capture = CaptureReader::open(path)?;
        let mut destinations: BTreeMap<SocketAddrV4, Destination> = BTreeMap::new();
        let mut other_datagrams = 0;
        let mut symbols_kept = 0usize;
        let result = capture.for_each(|d| {
            // TCP segments (a recorded snapshot connection) are no feed's
            // datagrams: the capture's counts show them.
            if d.tcp.is_some() {
                return;
            }
            if !destinations.contains_key(&d.dst) && destinations.len() >= MAX_DESTINATIONS {
                other_datagrams += 1;
                return;
            }
            let e = destinations.entry(d.dst).or_default();
            e.span_ns = if e.datagrams == 0 {
                (d.time_ns, d.time_ns)
            } else {
                (e.span_ns.0.min(d.time_ns), e.span_ns.1.max(d.time_ns))
            };
            e.datagrams += 1;
            if e.sources.len() < MAX_NAMED {
                e.sources.insert(d.src);
            } else if !e.sources.contains(&d.src) {
                e.more_sources = true;
            }
            let symbols = &mut e.symbols;
            let found = sniff(d.payload, |s| {
                if symbols.len() < MAX_SYMBOLS
                    && symbols_kept < MAX_SYMBOLS_TOTAL
                    && symbols.insert(s)
                {
                    symbols_kept += 1;
                }
            });
            *e.looks
                .entry(found.as_ref().map(|f| f.looks_like))
                .or_default() += 1;
            let Some(f) = found else { return };
            let readable = Readable {
                looks_like: f.looks_like,
                protocol: f.protocol,
                keys: f.draft_keys,
                rank: f.draft_rank,
                recovery_keys: f.recovery_keys,
            };
            if f.draft_rank == 0 && f.draft_alone {
                e.plain.insert(f.looks_like);
            }
            if !f.draft_alone && f.draft_rank > 0 {
                if e.weak.is_none_or(|w| w.rank < f.draft_rank) {
                    e.weak = Some(readable);
                }
            } else {
                let best = e.protocols.entry(f.looks_like).or_insert(readable);
                if best.rank < f.draft_rank {
                    *best = readable;
                }
            }
            if let Some(session) = f.session {
                if e.sessions.len() < MAX_NAMED {
                    e.sessions.insert(session);
                }
            }
            if let Some((lo, hi)) = f.sequences {
                e.sequences = Some(
                    e.sequences
                        .map_or((lo, hi), |(a, b)| (a.min(lo), b.max(hi))),
                );
            }
        });
        // A capture broken part way is inspected up to the break, and says so.
        Ok(Inventory {
            stats: capture.stats().clone(),
            destinations,
            other_datagrams,
            broken: result.err().map(|e| e.to_string()),
        })
    }

    /// The inventory as text: one paragraph per destination, busiest first.
    pub fn text(&self, name: &str) -> String {
        let s = &self.stats;
        let mut out = format!(
            "{name}: {} records, {} UDP/IPv4 datagrams to {} destinations",
            s.records,
            s.datagrams,
            self.destinations.len()
        );
        let skipped = s.records - s.datagrams;
        if skipped > 0 {
            // Every cause, so that they add up to the records skipped.
            let causes: Vec<String> = s
                .not_datagrams()
                .iter()
                .map(|(cause, n)| format!("{} {n}", cause.replace('_', " ")))
                .collect();
            out.push_str(&format!(
                " ({skipped} records not UDP/IPv4 datagrams: {})",
                causes.join(", ")
            ));
        }
        if self.other_datagrams > 0 {
            out.push_str(&format!(
                "; {} datagrams to more destinations than the {MAX_DESTINATIONS} listed",
                self.other_datagrams
            ));
        }
        out.push('\n');
        let mut by_size: Vec<_> = self.destinations.iter().collect();
        by_size.sort_by_key(|(dst, d)| (std::cmp::Reverse(d.datagrams), **dst));
        for (dst, d) in by_size {
            out.push('\n');
            let looks: Vec<String> = d
                .looks
                .iter()
                .map(|(name, n)| format!("{} {n}", name.unwrap_or("unrecognised")))
                .collect();
            let _ = writeln!(
                out,
                "{dst}  {} datagrams: {}",
                d.datagrams,
                looks.join(", ")
            );
            let sources: Vec<String> = d.sources.iter().map(ToString::to_string).collect();
            let more = if d.more_sources { " and more" } else { "" };
            let _ = writeln!(
                out,
                "  from {}{more}; {} to {} ({:.3} s)",
                sources.join(", "),
                tickguard::explain::iso(d.span_ns.0),
                tickguard::explain::iso(d.span_ns.1),
                d.span_ns.1.saturating_sub(d.span_ns.0) as f64 / 1e9
            );
            if !d.sessions.is_empty() {
                let sessions: Vec<&str> = d.sessions.iter().map(String::as_str).collect();
                let _ = writeln!(out, "  sessions {}", sessions.join(", "));
            }
            if let Some((lo, hi)) = d.sequences {
                let _ = writeln!(out, "  sequences {lo} to {hi}");
            }
            if !d.symbols.is_empty() {
                let mut names: Vec<String> = d.symbols.iter().map(ToString::to_string).collect();
                names.sort();
                let shown = &names[..names.len().min(SHOWN_SYMBOLS)];
                let more = match d.symbols.len().saturating_sub(SHOWN_SYMBOLS) {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                };
                let _ = writeln!(
                    out,
                    "  {} symbols: {}{more}",
                    d.symbols.len(),
                    shown.join(" ")
                );
            }
        }
        out
    }

    /// A configuration that replays the capture: one feed per protocol this
    /// version reads, its lines the multicast destinations carrying it (the
    /// two busiest: A and B), a unicast destination carrying it as the
    /// recovery channel's listen address; what cannot be configured is
    /// said in comments. Thresholds are starting points to tune.
    pub fn config_draft(&self, name: &str) -> String {
        let mut out = format!(
            "# A configuration drafted by `tickguard inspect --config-draft` from {name}.\n\
             # Check the feed names, lines and thresholds before relying on it.\n"
        );
        let mut streams: Vec<Stream> = Vec::new();
        // By what they look like, the lowest stream holding each symbol and
        // each session: a destination finds its stream in one look-up per
        // symbol, however many streams there are.
        let mut by_symbol: HashMap<&str, HashMap<Symbol, u32>> = HashMap::new();
        let mut by_session: HashMap<&str, HashMap<&str, u32>> = HashMap::new();
        let mut dsts: Vec<_> = self.destinations.iter().collect();
        dsts.sort_by_key(|(dst, d)| (std::cmp::Reverse(d.datagrams), **dst));
        for (dst, d) in dsts {
            let readable = d
                .readable()
                .filter(|r| Some(r.looks_like) == d.looks_like());
            let Some(
                r @ Readable {
                    protocol: Some(_), ..
                },
            ) = readable
            else {
                let why = match d.looks_like() {
                    Some(l) => format!("looks like {l}, which this version does not read"),
                    None => "no protocol this version reads accepts its datagrams".into(),
                };
                let _ = writeln!(out, "# {dst} ({} datagrams): {why}", d.datagrams);
                continue;
            };
            // A protocol with a recovery channel gets its answers on a
            // unicast address, where a venue's lines are multicast groups.
            // (Nor a broadcast, which no recovery_listen may be.)
            let answer =
                r.recovery_keys.is_some() && !dst.ip().is_multicast() && !dst.ip().is_broadcast();
            let symbols = by_symbol.entry(r.looks_like).or_default();
            let sessions = by_session.entry(r.looks_like).or_default();
            let same = d
                .symbols
                .iter()
                .filter_map(|x| symbols.get(x))
                .chain(d.sessions.iter().filter_map(|x| sessions.get(x.as_str())))
                .min()
                .copied();
            // (At most `MAX_DESTINATIONS` streams.)
            let k = same.unwrap_or_else(|| {
                streams.push(Stream {
                    readable: r,
                    lines: Vec::new(),
                    answers: Vec::new(),
                    unused: Vec::new(),
                });
                (streams.len() - 1) as u32
            });
            // The lowest stream holding each: the one a search in order
            // would find first.
            for x in &d.symbols {
                let s = symbols.entry(*x).or_insert(k);
                *s = (*s).min(k);
            }
            for x in &d.sessions {
                let s = sessions.entry(x.as_str()).or_insert(k);
                *s = (*s).min(k);
            }
            let s = &mut streams[k as usize];
            if r.rank > s.readable.rank {
                s.readable = r;
            }
            if answer {
                s.answers.push(*dst);
            } else if s.lines.len() < 2 {
                s.lines.push(*dst);
            } else {
                s.unused.push(*dst);
            }
        }
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        // Placeholder lines for sanitised streams: one of their own each,
        // none a real destination of the capture (a line is one feed's).
        let real: Vec<SocketAddrV4> = streams
            .iter()
            .flat_map(|s| s.lines.iter().chain(&s.answers).chain(&s.unused))
            .copied()
            .collect();
        let mut placeholders =
            (1u32..).map(|k| SocketAddrV4::new(std::net::Ipv4Addr::from(0xef00_0000 | k), 1));
        let mut placeholder = || {
            placeholders
                .find(|p| !real.contains(p))
                .expect("fewer destinations than placeholders")
        };
        let mut sanitised_feeds = Vec::new();
        for s in &mut streams {
            let Some(protocol) = s.readable.protocol else {
                continue;
            };
            // Answers alone (no line in the capture): they are the stream.
            if s.lines.is_empty() {
                s.lines = s.answers.drain(..s.answers.len().min(2)).collect();
            }
            s.lines.sort();
            let n = counts.entry(protocol.as_str()).or_default();
            *n += 1;
            let feed = format!("{}_{n}", protocol.as_str());
            let sanitised = s
                .lines
                .iter()
                .any(|l| l.ip().is_unspecified() || l.port() == 0);
            let _ = writeln!(out, "\n# {}", s.readable.looks_like);
            if sanitised {
                let _ = writeln!(
                    out,
                    "# a destination is 0.0.0.0 or port 0 (a sanitised capture): no line can \
                     match it; replay with `--feed {feed}`, which routes every datagram to that feed"
                );
            }
            let _ = writeln!(out, "[[feed]]");
            let _ = writeln!(out, "name = \"{feed}\"");
            let _ = writeln!(out, "protocol = \"{}\"", protocol.as_str());
            out.push_str(s.readable.keys);
            if sanitised {
                sanitised_feeds.push(feed.clone());
            }
            let shown: Vec<String> = s
                .lines
                .iter()
                .map(|l| match sanitised {
                    // Placeholder groups: lines must be valid, and are not used.
                    true => format!("\"{}\"", placeholder()),
                    false => format!("\"{l}\""),
                })
                .collect();
            let _ = writeln!(out, "lines = [{}]", shown.join(", "));
            let _ = writeln!(out, "stale_threshold_ms = 2000");
            let _ = writeln!(out, "source_threshold_ms = 5000");
            if let (Some([server, listen]), Some(first)) =
                (s.readable.recovery_keys, s.answers.first())
            {
                // The server is where the answers come from; replay then
                // keeps its answers only, as live: one sender named, or
                // none set.
                let d = &self.destinations[first];
                // Only a sender a re-request could go to (a sanitised
                // capture's 0.0.0.0:PORT or a port 0 names none).
                let named: Vec<_> = d
                    .sources
                    .iter()
                    .filter(|s| {
                        let ip = s.ip();
                        s.port() != 0
                            && !ip.is_unspecified()
                            && !ip.is_multicast()
                            && !ip.is_broadcast()
                    })
                    .collect();
                match (named.as_slice(), d.more_sources) {
                    ([from], false) => {
                        let _ = writeln!(out, "{server} = \"{from}\"");
                    }
                    ([], _) => {
                        let _ = writeln!(
                            out,
                            "# {server}: the answers name no sender a re-request could go to (a recording, a sanitised capture): set it to the server's ip:port to run live"
                        );
                    }
                    (several, _) => {
                        let list: Vec<String> = several.iter().map(ToString::to_string).collect();
                        let more = if d.more_sources { " and more" } else { "" };
                        let _ = writeln!(
                            out,
                            "# {server}: the answers came from several senders ({}{more}): set it to the server's ip:port (replay then keeps its answers only, as live)",
                            list.join(", ")
                        );
                    }
                }
                let _ = writeln!(out, "{listen} = \"{first}\"");
                s.unused.extend(s.answers.drain(1..));
            }
            for dst in &s.unused {
                let _ = writeln!(
                    out,
                    "# also {} on {dst}, same symbols or session: not routed by this draft",
                    s.readable.looks_like
                );
            }
        }
        if sanitised_feeds.len() > 1 {
            let _ = writeln!(
                out,
                "\n# {} feeds above are of sanitised destinations ({}): `--feed` routes every \
                 datagram to one feed, so replay them one at a time",
                sanitised_feeds.len(),
                sanitised_feeds.join(", ")
            );
        }
        with_capacity(out)
    }
}

/// `draft` with a `[state] capacity` that holds the slots its feeds
/// reserve when the default does not (two feeds, one of which bounds its
/// symbols by the default of a key the draft leaves unset, would be
/// refused otherwise). The feeds' reservations are read by parsing the
/// draft under the largest capacity; a draft that does not parse is left
/// as it is (replay names the problem).
fn with_capacity(draft: String) -> String {
    use tickguard::config::{Config, CAPACITY, DEFAULT_CAPACITY};
    let max = CAPACITY.max as usize;
    let Ok(config) = Config::parse(&format!("[state]\ncapacity = {max}\n{draft}"), "draft") else {
        return draft;
    };
    let held = config
        .reservations()
        .iter()
        .fold(0usize, |n, r| n.saturating_add(*r));
    if config.feeds.len() < 2 || held <= DEFAULT_CAPACITY {
        return draft;
    }
    // After the draft's two lines of heading.
    let at = draft
        .match_indices('\n')
        .nth(1)
        .map_or(draft.len(), |(i, _)| i + 1);
    let (head, feeds) = draft.split_at(at);
    format!(
        "{head}[state]\n# the slots the feeds below reserve together (each feed's default bound on its symbols)\ncapacity = {}\n{feeds}",
        held.min(max)
    )
}

/// The destinations a draft gathers into one feed: those carrying the same
/// protocol and sharing a symbol or a session (a feed's A and B lines, its
/// recovery answers).
struct Stream {
    readable: Readable,
    lines: Vec<SocketAddrV4>,
    answers: Vec<SocketAddrV4>,
    unused: Vec<SocketAddrV4>,
}

/// `tickguard inspect`.
pub fn run(args: &crate::cli::InspectArgs) -> Result<()> {
    let inventory = Inventory::read(&args.capture)?;
    // Its control bytes escaped: a newline in a file name would start a
    // line of the draft's TOML, an escape sequence reach the terminal.
    let name = tickguard::config::one_line(&args.capture.display().to_string(), usize::MAX);
    let text = if args.config_draft {
        inventory.config_draft(&name)
    } else {
        inventory.text(&name)
    };
    let shown = crate::to_stdout(&text);
    // What was read is printed; a broken capture still fails the command,
    // as a replay of it does, whether or not its reader read it all.
    let broken = match inventory.broken {
        Some(e) => Err(anyhow::anyhow!("{e}: inspected up to there")),
        None => Ok(()),
    };
    // A draft is only worth its name if `run` and `replay` take it: one
    // they would refuse (a capture of nothing this version reads, say)
    // fails the command with their error line, the draft printed above.
    let refused = match args.config_draft {
        true => tickguard::config::Config::parse(&text, "the draft")
            .map(drop)
            .map_err(|e| anyhow::anyhow!("{e}")),
        false => Ok(()),
    };
    crate::worst([broken, refused, shown])
}
