//! The `mdp3-capture` row: book entries/s of replaying a capture of a
//! synthetic CME MDP3 channel (`mdp3_gen`: two incremental lines, a
//! snapshot line, a definitions file) through `replay`, against the floor
//! of only reading the same capture with the same reader, both from the
//! page cache, interleaved in one run. Every replay's visible books are
//! compared with the generator's at the end, level by level.

use crate::harness::{within, RUNS};
use crate::mdp3_gen::{self, Channel, Params, Service, Stats};
use crate::replay_throughput::Runs;
use serde_json::{json, Value};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::Instant;
use tickguard::capture::link::Link;
use tickguard::capture::write::{CaptureWriter, Format};
use tickguard::capture::CaptureReader;
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::mdp3::book::Side;
use tickguard::replay::{FeedSummary, Observer};

/// Flags.
#[derive(clap::Args)]
pub struct Args {
    /// Book entries (of 46 messages) in the channel, at least (1 to
    /// 50,000,000: about 6.6 GB of capture).
    #[arg(long, default_value_t = 5_000_000)]
    book_entries: u64,
    /// Instruments (1 to 100,000).
    #[arg(long, default_value_t = 500)]
    instruments: usize,
    /// Percent of events after whose end a packet is sent at once (0 to
    /// 100; 20: a busy channel, several events a packet; 100: one event a
    /// packet).
    #[arg(long, default_value_t = 20)]
    send_percent: u64,
    /// Runs of each side, interleaved (1 to 100): the best of each is the
    /// row's figure, and every run is recorded.
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Also write the capture, definitions and config here, and keep them.
    #[arg(long)]
    keep: Option<PathBuf>,
}

impl Args {
    /// Refuses a flag out of its range.
    fn check(&self) -> anyhow::Result<()> {
        within("--book-entries", self.book_entries, 1..=50_000_000)?;
        within("--instruments", self.instruments, 1..=100_000)?;
        within("--send-percent", self.send_percent, 0..=100)?;
        within("--runs", self.runs, RUNS)
    }
}

/// The channel's configuration (its `definitions` beside it).
pub const CONFIG: &str = r#"[[feed]]
name = "cme"
protocol = "mdp3"
lines = ["239.3.1.1:14310", "239.3.1.2:15310"]
snapshot_lines = ["239.3.1.3:14311"]
definitions = "defs.pcap"
stale_threshold_ms = 32000
source_threshold_ms = 32000
clock_offset = 0
gap_timeout_ms = 5
"#;

fn addr(s: &str) -> SocketAddrV4 {
    s.parse().expect("an address")
}

/// A generated channel on disk.
pub struct Written {
    /// The configuration, loaded.
    pub config: Config,
    /// The capture.
    pub capture: PathBuf,
    /// What was generated.
    pub stats: Stats,
    /// The generator, its books as the capture leaves them.
    pub channel: Channel,
}

/// Writes the channel of `p` into `dir`: `defs.pcap`, `channel.pcap`,
/// `cme.toml`.
pub fn write(dir: &Path, p: Params) -> anyhow::Result<Written> {
    let mut channel = Channel::new(p);
    let capture_file = |path: &Path| -> anyhow::Result<_> {
        let file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
        Ok(CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet)?)
    };
    let src = addr("10.3.3.3:5000");
    let mut defs = capture_file(&dir.join("defs.pcap"))?;
    for d in channel.definitions() {
        defs.write_udp(mdp3_gen::T0, src, addr("10.1.1.1:9"), &d)?;
    }
    defs.finish()?;
    let capture = dir.join("channel.pcap");
    let mut w = capture_file(&capture)?;
    let (a, b, s) = (
        addr("239.3.1.1:14310"),
        addr("239.3.1.2:15310"),
        addr("239.3.1.3:14311"),
    );
    let stats = channel.run(|t, service, bytes| {
        let dst = match service {
            Service::A => a,
            Service::B => b,
            Service::Snapshot => s,
        };
        w.write_udp(t, src, dst, bytes)
    })?;
    w.finish()?;
    let path = dir.join("cme.toml");
    std::fs::write(&path, CONFIG)?;
    let config = Config::load(&path).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(Written {
        config,
        capture,
        stats,
        channel,
    })
}

/// At the end of a replay: every instrument's visible books against the
/// generator's, and the state a whole replay leaves.
pub struct Compare<'a> {
    /// The generator's instruments.
    pub want: &'a [mdp3_gen::Instrument],
    /// The first difference found, if any.
    pub problem: Option<String>,
    /// Instruments compared.
    pub compared: usize,
    /// Called with the handler before it is dropped.
    pub also: Option<&'a mut dyn FnMut(&Handler)>,
}

impl<'a> Compare<'a> {
    /// A comparison with `want`.
    pub fn new(want: &'a [mdp3_gen::Instrument]) -> Compare<'a> {
        Compare {
            want,
            problem: None,
            compared: 0,
            also: None,
        }
    }
}

/// The levels of `side` as the generator writes them.
fn levels(side: &Side) -> Vec<Option<(i64, u64, i32)>> {
    (1..=side.depth())
        .map(|n| {
            side.level(n)
                .map(|l| (l.price, l.size, l.orders.unwrap_or(-1)))
        })
        .collect()
}

fn want_levels(side: &[Option<mdp3_gen::Level>]) -> Vec<Option<(i64, u64, i32)>> {
    side.iter()
        .map(|l| l.map(|l| (l.price, l.size, l.orders)))
        .collect()
}

impl Observer for Compare<'_> {
    fn end(&mut self, handler: &mut Handler) {
        if let Some(f) = self.also.as_mut() {
            f(handler);
        }
        let Some(feed) = handler.feeds().first().and_then(|f| f.engine().mdp3()) else {
            self.problem = Some("no mdp3 feed".into());
            return;
        };
        for w in self.want {
            let Some(e) = feed.find(&format!("#{}", w.id)) else {
                self.problem = Some(format!("#{} unknown", w.id));
                return;
            };
            let v = feed.visible(e);
            let got = [
                levels(&v.outright.bid),
                levels(&v.outright.offer),
                levels(&v.implied.bid),
                levels(&v.implied.offer),
            ];
            let want = [
                want_levels(&w.outright[0]),
                want_levels(&w.outright[1]),
                want_levels(&w.implied[0]),
                want_levels(&w.implied[1]),
            ];
            let seq = &e.instrument.seq;
            if got != want || seq.rpt_seq() != Some(w.rpt) || seq.suspect() || seq.unverified() {
                self.problem = Some(format!(
                    "#{}: rpt_seq {:?} (want {}), suspect {}, unverified {}, books {got:?}, want {want:?}",
                    w.id,
                    seq.rpt_seq(),
                    w.rpt,
                    seq.suspect(),
                    seq.unverified()
                ));
                return;
            }
            self.compared += 1;
        }
    }
}

/// Reads every datagram and touches its payload (`replay-throughput`'s
/// ceiling): seconds and datagrams.
fn floor(capture: &Path) -> anyhow::Result<(f64, u64)> {
    crate::replay_throughput::ceiling(capture)
}

/// One replay of `w`, compared at its end: seconds and the feed's summary.
pub fn replay<'a>(
    w: &'a Written,
    also: Option<&'a mut dyn FnMut(&Handler)>,
) -> anyhow::Result<(f64, tickguard::protocol::mdp3::summary::FeedSummary)> {
    let mut reader = CaptureReader::open(&w.capture)?;
    let mut compare = Compare::new(w.channel.instruments());
    compare.also = also;
    let start = Instant::now();
    let outcome = tickguard::replay::replay_with(&w.config, &mut reader, &[], |_| {}, &mut compare);
    let secs = start.elapsed().as_secs_f64();
    anyhow::ensure!(outcome.input_error.is_none(), "replay stopped early");
    if let Some(p) = compare.problem {
        anyhow::bail!("the replay's books differ from the generator's: {p}");
    }
    anyhow::ensure!(
        compare.compared == w.channel.instruments().len(),
        "compared {} instruments",
        compare.compared
    );
    let Some((_, FeedSummary::Mdp3(feed))) = outcome.summary.feeds.into_iter().next() else {
        anyhow::bail!("no mdp3 feed in the summary");
    };
    let s = &w.stats;
    let want = (
        feed.next.unwrap_or(0),
        feed.packets_lost,
        feed.snapshots_applied,
        feed.ticks_lost,
        feed.rejected,
        feed.cached,
        feed.gaps_open,
    );
    anyhow::ensure!(
        want == (
            s.packets + 1,
            s.lost_both,
            s.snapshots,
            s.lost_entries,
            0,
            0,
            0
        ),
        "the summary's (next, packets_lost, snapshots_applied, ticks_lost, rejected, cached, gaps_open) {want:?} against what was written {s:?}"
    );
    Ok((secs, feed))
}

/// Runs the row.
pub fn run(a: &Args) -> anyhow::Result<Value> {
    a.check()?;
    let tmp = tempfile::tempdir()?;
    let dir = a.keep.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    std::fs::create_dir_all(&dir)?;
    let gen_start = Instant::now();
    let params = Params {
        send_percent: a.send_percent.min(100),
        ..Params::capture(a.book_entries, a.instruments)
    };
    let w = write(&dir, params)?;
    let generate_s = gen_start.elapsed().as_secs_f64();
    let bytes = std::fs::metadata(&w.capture)?.len();
    let s = w.stats;
    let (mut floors, mut replays) = (Runs::default(), Runs::default());
    let mut last = None;
    for _ in 0..a.runs.max(1) {
        let (floor_s, read) = floor(&w.capture)?;
        anyhow::ensure!(
            read == s.datagrams,
            "read {read} of {} datagrams",
            s.datagrams
        );
        floors.add(floor_s);
        let (secs, feed) = replay(&w, None)?;
        replays.add(secs);
        last = Some(feed);
    }
    let feed = last.expect("at least one run");
    let entries = s.book_entries;
    let rate = |secs: f64| entries as f64 / secs;
    let (floor_s, replay_s) = (floors.best(), replays.best());
    let (target_rate, target_ratio) = (25_000_000u64, 0.15);
    let ratio = floor_s / replay_s;
    Ok(json!({
        "row": "mdp3_capture",
        "book_entries": entries,
        "other_entries": s.other_entries,
        "instruments": a.instruments,
        "events": s.events,
        "events_spanning_packets": s.events_spanning,
        "send_percent": params.send_percent,
        "messages_per_line": s.messages,
        "packets_per_line": s.packets,
        "book_entries_per_packet": entries as f64 / s.packets as f64,
        "datagrams": s.datagrams,
        "capture_bytes": bytes,
        "generate_seconds": generate_s,
        "lost_on_a_only": s.lost_a,
        "lost_on_both_lines": s.lost_both,
        "snapshots": s.snapshots,
        "summary": {
            "packet_gaps": feed.packet_gaps,
            "recovered": feed.recovered,
            "duplicates": feed.duplicates,
            "packets_lost": feed.packets_lost,
            "snapshots_applied": feed.snapshots_applied,
            "ticks_lost": feed.ticks_lost,
            "messages": feed.messages,
        },
        "runs": a.runs.max(1),
        "floor_seconds": floor_s,
        "replay_seconds": replay_s,
        "floor_book_entries_per_s": rate(floor_s),
        "replay_book_entries_per_s": rate(replay_s),
        "replay_book_entries_per_s_each": replays.rates(entries),
        "floor_book_entries_per_s_each": floors.rates(entries),
        "ratio": ratio,
        "target_book_entries_per_s": target_rate,
        "target_ratio": target_ratio,
        "target_met": rate(replay_s) >= target_rate as f64 && ratio >= target_ratio,
    }))
}
