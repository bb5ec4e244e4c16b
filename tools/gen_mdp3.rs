//! Seeded generator of the MDP3 fixtures in `fixtures/mdp3/`.
//!
//! `cargo run --bin tickguard-mdp3-fixtures -- fixtures/mdp3` writes, byte
//! for byte: one CME channel (equity futures, channel 310) over 31 s from
//! the Sunday pre-open through the open, with its incremental lines A and
//! B, snapshot lines A and B and definition line, and everything that
//! goes wrong on them (a pcap); the same channel joined mid-week (a pcap);
//! the definitions file; a configuration; and a checks file.
//! `fixtures/README.md` tells the scenario with its times. The channel
//! itself is `tickguard::protocol::mdp3::synth::Channel`.

use std::io::Write;
use std::net::SocketAddrV4;
use std::path::Path;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::protocol::mdp3::encode::{self, BookEntry, Len, Shape};
use tickguard::protocol::mdp3::synth::{
    self, equity_channel, Channel, Datagram, Rng, Scope, MS, SECOND, US,
};
use tickguard::protocol::mdp3::template::{EntryType, UpdateAction};

const SEED: u64 = 0x4d44_5033_4356_3031; // "MDP3CV01"
/// 2026-01-04 22:59:55 UTC: five seconds before the Sunday open (17:00
/// Chicago), ns since the Unix epoch.
const T0: u64 = 1_767_567_595 * SECOND;
/// 2026-01-07 15:30:00 UTC, a Wednesday: the mid-week capture's start.
const MID: u64 = 1_767_799_800 * SECOND;
/// Length of the channel capture and of the mid-week one.
const CHANNEL_END: u64 = 31 * SECOND;
const MIDWEEK_END: u64 = 8 * SECOND;

const ES: i32 = 294_973;
const NQ: i32 = 206_323;
const RTY: i32 = 309_877;
const GROUPS: [&str; 3] = ["ES", "NQ", "RTY"];

/// A template id no schema version has.
const UNKNOWN_TEMPLATE: u16 = 99;

const CONFIG: &str = r#"# MDP3 fixture configuration: CME channel 310 (equity futures) as
# channel.pcap carries it, with its definitions file, and the same channel
# joined mid-week (midweek.pcap, no definitions) on addresses of its own.
[state]
capacity = 64

# For `tickguard run --config fixtures/mdp3/config.toml` against
# `tickguard simulate --protocol mdp3 --config fixtures/mdp3/config.toml`
# on this machine: the groups joined on loopback, where `simulate` sends
# them (TTL 0), beside config.toml's and itch.toml's sidecars.
[sidecar]
shm_path = "/dev/shm/tickguard-mdp3"
interface = "127.0.0.1"
idle = "sleep"
idle_sleep_us = 50
dead_after_ms = 1000

[metrics]
listen = "127.0.0.1:9189"

[[feed]]
name = "cme-310"
protocol = "mdp3"
lines = ["239.3.1.1:14310", "239.3.1.2:15310"]
snapshot_lines = ["239.3.1.3:14311", "239.3.1.4:15311"]
definition_lines = ["239.3.1.5:14312"]
definitions = "defs.pcap"
stale_threshold_ms = 2500
source_threshold_ms = 2500
gap_timeout_ms = 5

[[feed]]
name = "cme-310-midweek"
protocol = "mdp3"
lines = ["239.3.2.1:14320", "239.3.2.2:15320"]
snapshot_lines = ["239.3.2.3:14321", "239.3.2.4:15321"]
stale_threshold_ms = 2500
source_threshold_ms = 2500
gap_timeout_ms = 5
"#;

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().expect("fixture address")
}

/// Source and destination of each line of one channel's capture.
struct Lines {
    inc: [(SocketAddrV4, SocketAddrV4); 2],
    snap: [(SocketAddrV4, SocketAddrV4); 2],
    def: (SocketAddrV4, SocketAddrV4),
}

fn channel_lines() -> Lines {
    Lines {
        inc: [
            (addr("10.3.1.11:31001"), addr("239.3.1.1:14310")),
            (addr("10.3.1.12:31001"), addr("239.3.1.2:15310")),
        ],
        snap: [
            (addr("10.3.1.11:31002"), addr("239.3.1.3:14311")),
            (addr("10.3.1.12:31002"), addr("239.3.1.4:15311")),
        ],
        def: (addr("10.3.1.11:31003"), addr("239.3.1.5:14312")),
    }
}

fn midweek_lines() -> Lines {
    Lines {
        inc: [
            (addr("10.3.2.11:32001"), addr("239.3.2.1:14320")),
            (addr("10.3.2.12:32001"), addr("239.3.2.2:15320")),
        ],
        snap: [
            (addr("10.3.2.11:32002"), addr("239.3.2.3:14321")),
            (addr("10.3.2.12:32002"), addr("239.3.2.4:15321")),
        ],
        def: (addr("10.3.2.11:32003"), addr("239.3.2.5:14322")),
    }
}

/// A datagram on the wire: local arrival time, source, destination, payload.
struct Sent {
    arrival: u64,
    src: SocketAddrV4,
    dst: SocketAddrV4,
    payload: Vec<u8>,
}

/// What the incremental lines do to a packet, by the time it is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Each line loses about 1% (never both), line A holds about 1% back
    /// by 300 µs and line B about 3% by 1 ms (reordering), line B repeats
    /// about 2%.
    Normal,
    /// Both lines carry every packet once, on time.
    Clean,
    /// Line A loses every fourth packet; line B, 1 ms behind, carries
    /// them.
    LossA,
    /// Line B 3 ms late while line A loses every fifth packet.
    LateB,
    /// Both lines lose everything.
    LossBoth,
}

/// The incremental lines' mode of `channel.pcap` at `rel` after `T0`.
fn channel_mode(rel: u64) -> Mode {
    match rel / MS {
        8_000..=8_099 => Mode::LossA,
        10_000..=10_099 => Mode::LateB,
        15_000..=15_039 => Mode::LossBoth,
        0..=299 | 17_900..=18_099 => Mode::Clean,
        _ => Mode::Normal,
    }
}

/// The lines of one capture.
struct Wire {
    rng: Rng,
    out: Vec<Sent>,
    lines: Lines,
    /// Each destination's last arrival in order (held-back copies aside).
    last: Vec<(SocketAddrV4, u64)>,
}

impl Wire {
    fn new(seed: u64, lines: Lines) -> Wire {
        Wire {
            rng: Rng(seed),
            out: Vec::new(),
            lines,
            last: Vec::new(),
        }
    }

    /// When a datagram sent at `sent` on `line` (0: A, 1: B) to `dst`
    /// arrives: after its delay, and at least 1 µs after the one before it
    /// on the same line (a line keeps its order).
    fn arrival(&mut self, line: usize, dst: SocketAddrV4, sent: u64) -> u64 {
        let at = sent + self.delay(line);
        let slot = match self.last.iter().position(|x| x.0 == dst) {
            Some(i) => i,
            None => {
                self.last.push((dst, 0));
                self.last.len() - 1
            }
        };
        let at = at.max(self.last[slot].1 + US);
        self.last[slot].1 = at;
        at
    }

    fn push(&mut self, arrival: u64, (src, dst): (SocketAddrV4, SocketAddrV4), payload: &[u8]) {
        self.out.push(Sent {
            arrival,
            src,
            dst,
            payload: payload.to_vec(),
        });
    }

    /// Line A's copy arrives 20–80 µs after sending, line B's 150–600 µs.
    fn delay(&mut self, line: usize) -> u64 {
        match line {
            0 => 20 * US + self.rng.below(60 * US),
            _ => 150 * US + self.rng.below(450 * US),
        }
    }

    fn incremental(&mut self, d: &Datagram, mode: Mode) {
        let (mut a, mut b, mut a_late, mut b_late, mut b_twice) = (true, true, 0, 0, false);
        match mode {
            Mode::LossBoth => return,
            Mode::Clean => {}
            Mode::LossA => {
                a = !d.seq_num.is_multiple_of(4);
                b_late = MS;
            }
            Mode::LateB => {
                a = !d.seq_num.is_multiple_of(5);
                b_late = 3 * MS;
            }
            Mode::Normal => {
                if self.rng.chance(10) {
                    a = false;
                } else if self.rng.chance(10) {
                    b = false;
                }
                if self.rng.chance(10) {
                    a_late = 300 * US;
                }
                if self.rng.chance(30) {
                    b_late = MS;
                }
                b_twice = self.rng.chance(20);
            }
        }
        let sent = d.sending_time;
        if a {
            let line = self.lines.inc[0];
            let at = self.arrival(0, line.1, sent) + a_late;
            self.push(at, line, &d.bytes);
        }
        if b {
            // Late as a whole (LateB, LossA), or one copy held back.
            let line = self.lines.inc[1];
            let (late, held) = match mode {
                Mode::Normal => (0, b_late),
                _ => (b_late, 0),
            };
            let at = self.arrival(1, line.1, sent + late) + held;
            self.push(at, line, &d.bytes);
            if b_twice {
                self.push(at + 5 * US, line, &d.bytes);
            }
        }
    }

    fn snapshots(&mut self, loop_: &[Datagram]) {
        for d in loop_ {
            for line in 0..2 {
                let to = self.lines.snap[line];
                let at = self.arrival(line, to.1, d.sending_time);
                self.push(at, to, &d.bytes);
            }
        }
    }

    fn definitions(&mut self, loop_: &[Datagram]) {
        for d in loop_ {
            let to = self.lines.def;
            let at = self.arrival(0, to.1, d.sending_time);
            self.push(at, to, &d.bytes);
        }
    }

    /// Everything sent, by arrival.
    fn finish(mut self) -> Vec<Sent> {
        self.out.sort_by_key(|s| s.arrival);
        self.out
    }
}

/// Datagrams every check rejects whole, one per reason: `short`,
/// `bad_size`, `bad_schema`, `old_version`, `short_block`, `bad_group`.
/// They carry MsgSeqNum `seq` (the last packet's, as a damaged copy).
fn malformed(seq: u32, t: u64) -> Vec<Vec<u8>> {
    let v = Shape::new(13);
    let entry = BookEntry {
        price: Some(6_850_000_000_000),
        size: Some(5),
        security_id: ES,
        rpt_seq: 1,
        orders: Some(1),
        level: 1,
        action: UpdateAction::Change,
        entry_type: EntryType::Bid,
    };
    let book = |shape: Shape| encode::book(46, shape, t, 0x84, &[entry], 0);
    let good = encode::packet(seq, t, &[book(v)]);
    let mut short = good.clone();
    short.truncate(8);
    let mut left_over = good.clone();
    left_over.push(0);
    let mut schema = good.clone();
    schema[12 + 6..12 + 8].copy_from_slice(&2u16.to_le_bytes());
    let mut old = good.clone();
    old[12 + 8..12 + 10].copy_from_slice(&8u16.to_le_bytes());
    let short_block = encode::packet(seq, t, &[book(v.root(Len::Exactly(8)))]);
    // NoMDEntries says three entries; one follows.
    let mut group = good;
    group[12 + 10 + 11 + 2] = 3;
    vec![short, left_over, schema, old, short_block, group]
}

/// One step of the channel's script.
#[derive(Debug, Clone, Copy)]
enum Step {
    /// A Globex event (instrument and activity drawn by the channel).
    Event,
    Status(Scope<'static>, u8),
    FillBooks,
    Cross(i32),
    Reset,
    Unknown,
    Malformed,
    Snapshots,
    Definitions,
}

/// The times of the channel's random events: pre-open 0.25–5 s, trading
/// 5–21 s (quiet around the reset at 18 s) and 25–29 s; gaps mostly 3–40
/// ms, now and then a burst of 20–200 µs.
fn event_times(rng: &mut Rng) -> Vec<u64> {
    let mut out = Vec::new();
    for (from, to) in [(250, 17_950), (18_050, 21_000), (25_000, 29_000)] {
        let mut t = from * MS;
        while t < to * MS {
            out.push(t);
            t += if rng.chance(150) {
                20 * US + rng.below(180 * US)
            } else {
                3 * MS + rng.below(37 * MS)
            };
        }
    }
    out
}

/// The channel's script: times relative to `T0`, in order.
fn script(rng: &mut Rng) -> Vec<(u64, Step)> {
    let mut s: Vec<(u64, Step)> = Vec::new();
    let group = |g| Scope::Group(g);
    for (k, g) in GROUPS.into_iter().enumerate() {
        s.push((
            100 * MS + k as u64 * 100 * US,
            Step::Status(group(g), synth::status::PRE_OPEN),
        ));
        s.push((
            5 * SECOND + k as u64 * 100 * US,
            Step::Status(group(g), synth::status::OPEN),
        ));
        s.push((
            29 * SECOND + k as u64 * 100 * US,
            Step::Status(group(g), synth::status::CLOSE),
        ));
    }
    s.push((200 * MS, Step::FillBooks));
    s.push((3 * SECOND, Step::Cross(RTY)));
    s.push((7 * SECOND, Step::Malformed));
    s.push((7 * SECOND + 100 * MS, Step::Unknown));
    s.push((
        12 * SECOND,
        Step::Status(Scope::Instrument(NQ), synth::status::HALT),
    ));
    s.push((
        14 * SECOND,
        Step::Status(Scope::Instrument(NQ), synth::status::OPEN),
    ));
    // Busy stretches, an event a millisecond, while line A loses packets
    // (8.0–8.1 s) and while line B is late (10.0–10.1 s); one inside the
    // loss on both lines (15.000–15.040 s).
    for k in 0..100 {
        s.push((8 * SECOND + k * MS, Step::Event));
        s.push((10 * SECOND + k * MS, Step::Event));
    }
    for k in 0..10 {
        s.push((15 * SECOND + k * 4 * MS, Step::Event));
    }
    // The reset; MsgSeqNum 1 (ES open) a millisecond later, the next
    // packets 19 ms after it.
    s.push((18 * SECOND, Step::Reset));
    s.push((
        18 * SECOND + MS,
        Step::Status(group("ES"), synth::status::OPEN),
    ));
    s.push((
        18 * SECOND + 20 * MS,
        Step::Status(group("NQ"), synth::status::OPEN),
    ));
    s.push((
        18 * SECOND + 20 * MS + 100 * US,
        Step::Status(group("RTY"), synth::status::OPEN),
    ));
    s.push((18 * SECOND + 21 * MS, Step::FillBooks));
    for k in 0..=14 {
        s.push((1_500 * MS + k * 2 * SECOND, Step::Snapshots));
    }
    for k in 0..=6 {
        s.push((k * 5 * SECOND, Step::Definitions));
    }
    s.extend(event_times(rng).into_iter().map(|t| (t, Step::Event)));
    s.sort_by_key(|x| x.0);
    s
}

/// `channel.pcap`'s datagrams, and `defs.pcap`'s (the first definition
/// loop).
fn channel() -> (Vec<Sent>, Vec<Sent>) {
    let mut ch = Channel::new(SEED, equity_channel());
    ch.heartbeat_ns = SECOND;
    let mut rng = Rng(SEED ^ 0x5c17);
    let mut w = Wire::new(SEED ^ 0x3a7e, channel_lines());
    let mut defs = Wire::new(SEED ^ 0xdef5, channel_lines());
    let mut first_defs = true;
    for (rel, step) in script(&mut rng) {
        let t = T0 + rel;
        for hb in ch.idle(t) {
            w.incremental(&hb, channel_mode(hb.sending_time - T0));
        }
        let sent = match step {
            Step::Event => ch.next_event(t),
            Step::Status(scope, code) => ch.status(t, scope, code),
            Step::FillBooks => ch.fill_books(t),
            Step::Cross(id) => ch.cross(t, id),
            Step::Reset => ch.channel_reset(t),
            Step::Unknown => ch.unknown_template(t, UNKNOWN_TEMPLATE),
            Step::Malformed => {
                for (k, d) in malformed(ch.last_seq_num(), t).iter().enumerate() {
                    let at = t + k as u64 * 10 * US;
                    w.push(at, w.lines.inc[0], d);
                }
                Vec::new()
            }
            Step::Snapshots => {
                w.snapshots(&ch.snapshot_loop(t));
                Vec::new()
            }
            Step::Definitions => {
                let l = ch.definition_loop(t);
                w.definitions(&l);
                if std::mem::take(&mut first_defs) {
                    defs.definitions(&l);
                }
                Vec::new()
            }
        };
        for d in &sent {
            w.incremental(d, channel_mode(d.sending_time - T0));
        }
    }
    for hb in ch.idle(T0 + CHANNEL_END) {
        w.incremental(&hb, Mode::Normal);
    }
    (w.finish(), defs.finish())
}

/// `midweek.pcap`'s datagrams: the channel on a Wednesday afternoon,
/// schema version 9, events every 3–40 ms (bursts now and then), the
/// snapshot loop at 1, 3, 5 and 7 s, no definitions.
fn midweek() -> Vec<Sent> {
    let mut ch = Channel::mid_week(SEED + 1, equity_channel(), MID);
    ch.version = 9;
    ch.heartbeat_ns = SECOND;
    let mut rng = Rng(SEED ^ 0x3d3d);
    let mut w = Wire::new(SEED ^ 0x7e7e, midweek_lines());
    let mut t = MID + MS;
    let mut next_loop = MID + SECOND;
    while t < MID + MIDWEEK_END {
        while next_loop <= t {
            w.snapshots(&ch.snapshot_loop(next_loop));
            next_loop += 2 * SECOND;
        }
        for d in ch.idle(t).iter().chain(&ch.next_event(t)) {
            w.incremental(d, Mode::Normal);
        }
        t += if rng.chance(150) {
            20 * US + rng.below(180 * US)
        } else {
            3 * MS + rng.below(37 * MS)
        };
    }
    w.finish()
}

/// Checks by Symbol and by `#SecurityID`: every 500 ms over both captures,
/// and at the scenario's moments (README); unknown names now and then.
fn checks() -> String {
    let mut rows: Vec<(u64, &str, String)> = Vec::new();
    let symbols = ["ESZ6", "ESH7", "NQZ6", "RTYZ6", "ESZ6-ESH7"];
    let ids = ["#294973", "#309877"];
    let every = |rows: &mut Vec<(u64, &str, String)>, t: u64, feed, names: &[&str]| {
        rows.extend(names.iter().map(|n| (t, feed, n.to_string())));
    };
    let mut t = T0 - 500 * MS;
    while t <= T0 + CHANNEL_END {
        every(&mut rows, t, "cme-310", &symbols);
        every(&mut rows, t, "cme-310", &ids);
        t += 500 * MS;
    }
    // The moments of the story, in ms after T0.
    let moments: [(u64, &[&str]); 14] = [
        (3_200, &["RTYZ6", "#309877"]),
        (5_001, &["RTYZ6", "ESZ6"]),
        (7_050, &symbols),
        (8_050, &symbols),
        (10_050, &symbols),
        (13_000, &["NQZ6", "#206323", "ESZ6"]),
        (15_010, &symbols),
        (15_100, &symbols),
        (15_300, &symbols),
        (15_600, &symbols),
        (18_005, &["ESZ6", "#294973"]),
        (18_010, &symbols),
        (18_100, &symbols),
        (29_200, &symbols),
    ];
    for (ms, names) in moments {
        every(&mut rows, T0 + ms * MS, "cme-310", names);
    }
    for ms in [2_000, 16_000, 27_000] {
        every(&mut rows, T0 + ms * MS, "cme-310", &["ZZZZ", "#999999"]);
    }
    let all_ids = ["#294973", "#118061", "#206323", "#309877", "#442811"];
    let mut t = MID - 500 * MS;
    while t <= MID + MIDWEEK_END + 500 * MS {
        every(&mut rows, t, "cme-310-midweek", &all_ids);
        every(&mut rows, t, "cme-310-midweek", &["ESZ6"]);
        t += 500 * MS;
    }
    for ms in [900, 1_100] {
        every(&mut rows, MID + ms * MS, "cme-310-midweek", &all_ids);
    }
    rows.sort_by_key(|r| r.0);
    let mut out = String::from("time_ns,feed,symbol\n");
    for (t, feed, name) in rows {
        out.push_str(&format!("{t},{feed},{name}\n"));
    }
    out
}

fn write_capture(path: &Path, format: Format, sent: &[Sent]) -> std::io::Result<()> {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut w = CaptureWriter::new(file, format, Link::Ethernet)?;
    for s in sent {
        w.write_udp(s.arrival, s.src, s.dst, &s.payload)?;
    }
    w.finish()?.flush()
}

fn main() -> anyhow::Result<()> {
    let dir = tickguard::fixtures::output_dir("fixtures/mdp3");
    std::fs::create_dir_all(&dir)?;
    let (sent, defs) = channel();
    write_capture(&dir.join("channel.pcap"), Format::PcapNanos, &sent)?;
    write_capture(&dir.join("defs.pcap"), Format::PcapMicros, &defs)?;
    write_capture(&dir.join("midweek.pcap"), Format::PcapMicros, &midweek())?;
    std::fs::write(dir.join("config.toml"), CONFIG)?;
    std::fs::write(dir.join("checks.csv"), checks())?;

    write_goldens(&dir)
}

/// `replay --explain FEED INSTRUMENT` goldens of `channel.pcap`: (feed,
/// instrument, `--explain-all`, `--at` in ms after `T0`).
/// tests/it/mdp3_fixtures.rs holds the same table.
const EXPLAINED: &[(&str, &str, bool, Option<u64>)] = &[
    ("cme-310", "ESZ6", false, None),
    ("cme-310", "RTYZ6", true, None),
    ("cme-310", "#442811", false, None),
    ("cme-310", "ESZ6", false, Some(15_100)),
    ("cme-310", "NQZ6", false, Some(13_000)),
];

/// The file an `--explain` golden is kept in.
fn explained_file(feed: &str, instrument: &str, all: bool, at_ms: Option<u64>) -> String {
    let who = format!("{feed}-{}", instrument.replace('#', "id"));
    match (all, at_ms) {
        (_, Some(ms)) => format!("channel.at-{ms}ms-{who}.txt"),
        (true, None) => format!("channel.explain-all-{who}.txt"),
        (false, None) => format!("channel.explain-{who}.txt"),
    }
}

/// What replaying each capture gives, with `config.toml` and `checks.csv`:
/// the answers as JSON lines (`*.expected.jsonl`), the summary
/// (`*.summary.json`), and the `--explain` goldens of [`EXPLAINED`].
fn write_goldens(dir: &Path) -> anyhow::Result<()> {
    use tickguard::capture::CaptureReader;
    use tickguard::config::Config;
    use tickguard::replay::{answer_json, load_checks, replay, replay_until, Check, Options};
    let config = Config::load(&dir.join("config.toml"))?;
    let checks = load_checks(&dir.join("checks.csv"))?;
    for stem in ["channel", "midweek"] {
        let mut reader = CaptureReader::open(&dir.join(format!("{stem}.pcap")))?;
        let outcome = replay(&config, &mut reader, &checks, |_| {});
        if let Some(e) = outcome.input_error {
            anyhow::bail!("{e}");
        }
        let mut lines = String::new();
        for (c, a) in checks.iter().zip(&outcome.answers) {
            lines.push_str(&answer_json(c, *a));
            lines.push('\n');
        }
        std::fs::write(dir.join(format!("{stem}.expected.jsonl")), lines)?;
        let summary = serde_json::to_string_pretty(&outcome.summary)? + "\n";
        std::fs::write(dir.join(format!("{stem}.summary.json")), summary)?;
    }
    for &(feed, instrument, all, at_ms) in EXPLAINED {
        let id = config
            .feed_id(feed)
            .ok_or_else(|| anyhow::anyhow!("no feed {feed}"))?;
        let at = at_ms.map(|ms| T0 + ms * MS);
        let mut x = tickguard::explain::mdp3::Mdp3Explain::new(
            id,
            &config.feeds[usize::from(id)],
            instrument,
            at,
        );
        let asked: Vec<Check> = at
            .map(|time_ns| Check {
                time_ns,
                feed: feed.into(),
                symbol: instrument.into(),
            })
            .into_iter()
            .collect();
        let mut reader = CaptureReader::open(&dir.join("channel.pcap"))?;
        let outcome = replay_until(
            &config,
            &mut reader,
            &asked,
            Options::default(),
            |_| {},
            &mut x,
        );
        let text = match (at, outcome.answers.last()) {
            (Some(at), Some(answer)) => x.answer_at(at, answer.reasons),
            _ => x.explanation(all),
        };
        std::fs::write(dir.join(explained_file(feed, instrument, all, at_ms)), text)?;
    }
    Ok(())
}
