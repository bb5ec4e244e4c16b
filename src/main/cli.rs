//! Command-line flags (clap lives in the binary only); `main` resolves
//! them into the library's plain parameters.

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use tickguard::config::ProtocolSettings;

/// `simulate --line-a`'s default (told apart from one given by its value).
const DEFAULT_LINE_A: &str = "239.1.1.1:30001";

/// Market-data feed handler (SQF, ITCH 5.0 over MoldUDP64, CME MDP 3.0): per-instrument freshness verdicts for pre-trade checks.
#[derive(Debug, Parser)]
#[command(name = "tickguard", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Replay a packet capture and answer checks as the live handler would have.
    Replay(ReplayArgs),
    /// Run the live sidecar: receive the feeds, publish verdict state in shared memory.
    Run(RunArgs),
    /// Ask a running sidecar whether a symbol may be traded now (exit 0 ok, 1 rejected, 2 error or no usable publication).
    Check(CheckArgs),
    /// Show a running sidecar's shared memory: writer health, counters, symbols worst first.
    Stat(StatArgs),
    /// Publish a simulated SQF feed, an ITCH 5.0 venue with a re-request server, or a CME MDP 3.0 channel (to loopback by default).
    Simulate(Box<SimulateArgs>),
    /// Simulator and sidecar together on loopback, with a live table of every symbol.
    Demo(DemoArgs),
    /// What a packet capture holds: each UDP destination, the protocol it looks like, sessions,
    /// sequences, time span and symbols; with --config-draft, a configuration that replays it.
    Inspect(InspectArgs),
}

/// `tickguard inspect`.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// The packet capture (pcap or pcapng).
    pub capture: PathBuf,
    /// Print a configuration that replays the capture instead (one feed per stream read: lines A and B of one stream make one feed).
    #[arg(long)]
    pub config_draft: bool,
}

/// `tickguard run`. (`run`, `check`, `stat`, `replay`, `simulate` and
/// `demo` take `-1` given apart as a value, told as out of range under
/// its flag, not as an unknown option.)
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct RunArgs {
    /// Configuration file (TOML).
    #[arg(long, default_value = "config.toml")]
    pub config: PathBuf,
    /// Also write every datagram applied, in order, to this pcap (a diagnostic tap: file I/O on the receive thread); exit 2 at the end if it is incomplete.
    #[arg(long)]
    pub record: Option<PathBuf>,
    /// With --record: let the file grow to this many MiB at most, 1 to 1048576 (default: no bound); the write that would pass it stops the recording, as a full disk would.
    #[arg(long, value_name = "MIB", requires = "record", value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub record_max_mb: Option<u64>,
}

/// `tickguard check`.
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct CheckArgs {
    /// Feed name, as configured.
    pub feed: String,
    /// Symbol, e.g. EURUSD.
    pub symbol: String,
    /// Print the verdict as one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Shared-memory file of the sidecar (default: the config's, else /dev/shm/tickguard).
    #[arg(long)]
    pub shm: Option<PathBuf>,
    /// Read the shared-memory path and dead-writer bound from this configuration.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Treat the writer as dead when its heartbeat is older than this, ms: 3 to 60000 (default: the config's, else 100 raised to 3 of the writer's heartbeat periods; given here, taken as it is: below 3 periods, a live writer reads as dead between its beats).
    #[arg(long, value_parser = dead_after_ms())]
    pub dead_after_ms: Option<u64>,
    /// User that must own the shared memory (name or uid; default: this user, or root).
    #[arg(long, value_name = "UID|NAME")]
    pub owner: Option<String>,
}

/// `tickguard stat`.
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct StatArgs {
    /// Shared-memory file of the sidecar (default: the config's, else /dev/shm/tickguard).
    #[arg(long)]
    pub shm: Option<PathBuf>,
    /// Read the shared-memory path and dead-writer bound from this configuration.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Print one snapshot and exit (for scripts); otherwise refresh every second until Ctrl-C.
    #[arg(long)]
    pub once: bool,
    /// Evaluate at this time (ns since the Unix epoch, 0 to 18446744073709551615) instead of the clock.
    #[arg(long)]
    pub now: Option<u64>,
    /// Treat the writer as dead when its heartbeat is older than this, ms: 3 to 60000 (default: the config's, else 100 raised to 3 of the writer's heartbeat periods; given here, taken as it is: below 3 periods, a live writer reads as dead between its beats).
    #[arg(long, value_parser = dead_after_ms())]
    pub dead_after_ms: Option<u64>,
    /// User that must own the shared memory (name or uid; default: this user, or root).
    #[arg(long, value_name = "UID|NAME")]
    pub owner: Option<String>,
    /// Print each snapshot as one JSON document (one line): health, writer, feeds with counters, symbols.
    #[arg(long)]
    pub json: bool,
    /// Only this feed: its counters and its symbols.
    #[arg(long, value_name = "NAME")]
    pub feed: Option<String>,
    /// Only symbols whose verdict is not ok.
    #[arg(long)]
    pub not_ok: bool,
    /// Only the N worst symbols, 1 to 1,000,000 (after --feed and --not-ok).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub top: Option<u32>,
}

/// `tickguard demo`.
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct DemoArgs {
    /// Symbols to simulate: sqf 1 to 100,000, itch50 1 to 65,535 (the mdp3
    /// channel has its own five instruments).
    #[arg(long, default_value_t = DEMO_SYMBOLS)]
    pub symbols: usize,
    /// sqf: quotes per second over all symbols; itch50: messages per second
    /// (each above 0, at most 10,000,000); mdp3: Globex events per second
    /// (above 0, at most 1,000,000).
    #[arg(long, default_value_t = 400.0)]
    pub rate: f64,
    /// Stop after this many seconds, 0 to 31,536,000 (0: sqf until Ctrl-C, a week at most;
    /// itch50 and mdp3 a few seconds after their venue's close, or at
    /// Ctrl-C).
    #[arg(long, default_value_t = 0.0)]
    pub duration_s: f64,
    /// Shared-memory file for the demo's sidecar.
    #[arg(long, default_value = "/dev/shm/tickguard-demo")]
    pub shm: PathBuf,
    /// Seed of the simulator, any number from 0 to 2^64 − 1.
    #[arg(long, default_value_t = 7)]
    pub seed: u64,
    /// The simulated feed: `sqf` (a provider with snapshots) or `itch50`
    /// (an ITCH venue with re-request and GLIMPSE servers; the sidecar is
    /// restarted a third of the way through the session and catches up from
    /// a snapshot), or `mdp3` (a CME channel with snapshot and definition
    /// loops; instruments heal from the loop after losses on both lines).
    #[arg(long, default_value = "sqf", value_parser = ["sqf", "itch50", "mdp3"])]
    pub protocol: String,
}

/// `tickguard demo --symbols`' default.
const DEMO_SYMBOLS: usize = 12;

/// `tickguard replay`.
#[derive(Debug, clap::Args)]
#[command(allow_negative_numbers = true)]
pub struct ReplayArgs {
    /// Capture file: pcap (µs or ns) or pcapng.
    pub capture: PathBuf,
    /// Configuration file (TOML).
    #[arg(long)]
    pub config: PathBuf,
    /// Checks file: CSV with header time_ns,feed,symbol. Results go to stdout as JSON lines.
    #[arg(long)]
    pub checks: Option<PathBuf>,
    /// Where to write the summary JSON (`-`: standard output).
    #[arg(long)]
    pub summary: Option<PathBuf>,
    /// Never show a progress bar (it is shown only when stderr is a terminal).
    #[arg(long)]
    pub no_progress: bool,
    /// Explain one symbol: stdout carries, instead of the check results, every
    /// event that changed its verdict, in time order, with its cause (the
    /// summary is still written).
    // (Set: given twice, refused, as every other single-valued flag.)
    #[arg(long, num_args = 2, value_names = ["FEED", "SYMBOL"], action = clap::ArgAction::Set)]
    pub explain: Option<Vec<String>>,
    /// With --explain: also list the events that did not change the verdict
    /// but explain it (gaps on a full feed, snapshots, heartbeat gaps, invalid prices).
    /// Not with --at, which answers for one instant.
    #[arg(long, requires = "explain", conflicts_with = "at")]
    pub explain_all: bool,
    /// With --explain: print only the verdict at TIME (ns since the Unix epoch,
    /// or a time with its zone like 2026-01-05T09:00:02.5Z or
    /// 2026-01-05T04:00:02.5-05:00), the event behind each reason, and the
    /// state then.
    #[arg(long, value_name = "TIME", requires = "explain", value_parser = tickguard::time::parse_time)]
    pub at: Option<u64>,
    /// After the input's end, run every feed's deadlines up to TIME (ns since
    /// the Unix epoch, or a time with its zone like 2026-01-05T16:00:00Z or
    /// 2026-01-05T11:00:00-05:00): gaps still open
    /// expire (or are counted filled) as they would have live.
    #[arg(long, value_name = "TIME", value_parser = tickguard::time::parse_time)]
    pub until: Option<u64>,
    /// Write an SVG timeline of every SQF symbol's verdict (only FEED's symbols with --explain; not for itch50 or mdp3 feeds; `-`: standard output).
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<PathBuf>,
    /// With --date: read CAPTURE as a Nasdaq BinaryFILE (plain or gzip) of this itch50 feed.
    /// Without: route every UDP datagram of the packet capture to this feed's line A, whatever
    /// its destination (a capture sanitised to 0.0.0.0:0, or recorded on other groups).
    #[arg(long, value_name = "NAME")]
    pub feed: Option<String>,
    /// The BinaryFILE's session date (with --feed), 1970-01-02 to 2554-07-17: source times count from its midnight in the feed's time zone.
    #[arg(long, value_name = "YYYY-MM-DD", requires = "feed", conflicts_with = "timeline", value_parser = parse_date)]
    pub date: Option<jiff::civil::Date>,
}

/// A session date as YYYY-MM-DD, one whose times (its midnight in any time
/// zone, plus a timestamp's 2^48 ns) are ns since the Unix epoch in a u64.
fn parse_date(s: &str) -> Result<jiff::civil::Date, String> {
    use jiff::civil::date;
    // The date alone: a time, an offset or a zone written with it would be
    // read and dropped (midnight is the feed's time zone's), and a time
    // zone the operator meant ignored.
    let shaped = s.len() == 10
        && s.bytes().enumerate().all(|(i, b)| {
            if i == 4 || i == 7 {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    let d = shaped
        .then(|| s.parse::<jiff::civil::Date>().ok())
        .flatten()
        .ok_or_else(|| format!("'{s}' is not a date (YYYY-MM-DD)"))?;
    let (first, last) = (date(1970, 1, 2), date(2554, 7, 17));
    if d < first || d > last {
        return Err(format!("{s} is out of range: {first} to {last}"));
    }
    Ok(d)
}

/// `tickguard simulate`: a provider publishing SQF, an ITCH venue, or a CME MDP3 channel.
#[derive(Debug, Clone, clap::Args)]
// `--loss-a -1` is a value out of range, told as such (not "unexpected
// argument '-1'").
#[command(allow_negative_numbers = true)]
pub struct SimulateArgs {
    /// Protocol to publish.
    #[arg(long, value_enum, default_value_t = SimProtocol::Sqf)]
    pub protocol: SimProtocol,
    /// itch50: take the lines, `recovery` and `timezone` from this configuration's itch50 feed;
    /// mdp3 (required): the incremental, snapshot and definition lines of its mdp3 feed.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// itch50 and mdp3, with --config: the feed (default: the configuration's only feed of the protocol).
    #[arg(long, requires = "config")]
    pub feed: Option<String>,
    /// itch50: address of the re-request server (loopback; the config's `recovery` with --config).
    #[arg(long)]
    pub recovery: Option<std::net::SocketAddrV4>,
    /// itch50: no re-request server, even when the configuration names one.
    #[arg(long)]
    pub no_recovery_server: bool,
    /// itch50: the MoldUDP64 session, 1 to 10 printable ASCII characters.
    #[arg(long, default_value = "TGSIM00001")]
    pub session: String,
    /// itch50: halt a stock every this many seconds, for half of it (0: never); mdp3: an instrument; 0 to 86,400.
    #[arg(long, default_value_t = 0)]
    pub halt_every_s: u64,
    /// itch50: messages the re-request server keeps, 1 to 10,000,000.
    #[arg(long, default_value_t = 1_000_000)]
    pub history: usize,
    /// itch50: delay each re-request answer by this many ms, 0 to 60,000.
    #[arg(long, default_value_t = 0)]
    pub answer_delay_ms: u64,
    /// itch50: percent of re-requests dropped unanswered, 0 to 100.
    #[arg(long, default_value_t = 0.0)]
    pub request_drop: f64,
    /// itch50: keep answering re-requests this long after the end of session, ms, 0 to 600,000.
    #[arg(long, default_value_t = 0)]
    pub linger_ms: u64,
    /// itch50: a GLIMPSE 5.0 snapshot server (SoupBinTCP) on this loopback address.
    #[arg(long, value_name = "ADDR")]
    pub glimpse: Option<std::net::SocketAddrV4>,
    /// itch50, with --glimpse: the username a login must give (case ignored).
    #[arg(long, value_name = "USER", default_value = tickguard::simulate::itch50::glimpse::DEFAULT_USER, requires = "glimpse")]
    pub glimpse_user: String,
    /// itch50, with --glimpse: the environment variable holding the password (the simulator refuses to start when it is not set).
    #[arg(long, value_name = "VAR", default_value = tickguard::simulate::itch50::glimpse::DEFAULT_PASSWORD_ENV, requires = "glimpse")]
    pub glimpse_password_env: String,
    /// itch50, with --glimpse: a fault to play: reject-a, reject-s, absent, slow:RATE, delay:MS, stall:N, drop-fin:N, drop-rst:N, z-before-g, other-session, interleave or byte-writes.
    #[arg(long, value_name = "FAULT", requires = "glimpse", value_parser = |s: &str| s.parse::<tickguard::simulate::itch50::glimpse::Fault>())]
    pub glimpse_fault: Option<tickguard::simulate::itch50::glimpse::Fault>,
    /// itch50, with --glimpse-fault: play it on the first K logins with correct credentials only, 0 to 2^64 − 1 (0: every login).
    #[arg(
        long,
        value_name = "K",
        default_value_t = 0,
        requires = "glimpse_fault"
    )]
    pub glimpse_fault_logins: u64,
    /// mdp3: percent of incremental packets dropped on both lines, 0 to 100 (healed only by the snapshot loop).
    #[arg(long, default_value_t = 0.0)]
    pub loss_both: f64,
    /// mdp3: period of the snapshot loop, ms, 10 to 60,000 (its packets spread over it).
    #[arg(long, default_value_t = 1000)]
    pub loop_ms: u64,
    /// mdp3: period of the definition loop, ms, 10 to 600,000.
    #[arg(long, default_value_t = 5000)]
    pub definition_loop_ms: u64,
    /// mdp3: send a ChannelReset at these times of active time, ms, comma separated, each 0 to 86,400,000, at most 1,000 times (SIGUSR1 sends one too).
    #[arg(long, value_delimiter = ',', value_name = "MS")]
    pub channel_reset_at_ms: Vec<u64>,
    /// mdp3: start in the middle of the week (MsgSeqNum and RptSeqs far from 1, books full): a receiver must heal every instrument from the snapshot loop.
    #[arg(long)]
    pub mid_week: bool,
    /// Destination of line A (ip:port; multicast goes out on loopback with TTL 0).
    #[arg(long, default_value = DEFAULT_LINE_A)]
    pub line_a: std::net::SocketAddrV4,
    /// Destination of line B; omit for a single-line feed.
    #[arg(long)]
    pub line_b: Option<std::net::SocketAddrV4>,
    /// Send from this loopback address (the source a source-specific join filters on; default: the --config feed's `source`, else 127.0.0.1).
    #[arg(long)]
    pub source: Option<std::net::Ipv4Addr>,
    /// Number of symbols, named SYM00000, SYM00001, ...: sqf 1 to 100,000, itch50 1 to 65,535 (ignored when --names is given; mdp3 takes its configuration's channel).
    #[arg(long, default_value_t = 8)]
    pub symbols: usize,
    /// Explicit symbol names, comma separated (overrides --symbols), e.g. --names AAPL,MSFT.
    #[arg(long, value_delimiter = ',')]
    pub names: Vec<String>,
    /// sqf: quotes per second over all symbols; itch50: messages per second (each above 0, at most 10,000,000); mdp3: Globex events per second (above 0, at most 1,000,000).
    #[arg(long, default_value_t = 1000.0)]
    pub rate: f64,
    /// Most quotes (sqf) or messages (itch50) packed into one datagram: sqf 1 to 100, itch50 1 to 64.
    #[arg(long, default_value_t = 8)]
    pub batch: usize,
    /// sqf: feed kind; snapshots are sent at start (and periodically) for delta feeds.
    #[arg(long, value_enum, default_value_t = SimKind::Full)]
    pub kind: SimKind,
    /// Percent of datagrams dropped on line A, 0 to 100.
    #[arg(long, default_value_t = 0.0)]
    pub loss_a: f64,
    /// Percent of datagrams dropped on line B, 0 to 100.
    #[arg(long, default_value_t = 0.0)]
    pub loss_b: f64,
    /// Percent of datagrams sent twice on a line, 0 to 100.
    #[arg(long, default_value_t = 0.0)]
    pub duplicate: f64,
    /// Percent of datagrams held back and sent after the next one, 0 to 100.
    #[arg(long, default_value_t = 0.0)]
    pub reorder: f64,
    /// sqf: percent of quotes with an invalid price (crossed, zero or NaN), 0 to 100.
    #[arg(long, default_value_t = 0.0)]
    pub invalid: f64,
    /// sqf: heartbeat interval per symbol, ms, 0 to 60,000 (0: none; default 250); itch50: after this long idle, 0 to 60,000 (default 1000); mdp3: after this long without an incremental packet, 0 to 60,000 (default 30,000).
    #[arg(long)]
    pub heartbeat_ms: Option<u64>,
    /// sqf: snapshot interval per symbol, ms, 0 to 3,600,000 (0: only at start for delta feeds).
    #[arg(long, default_value_t = 0)]
    pub snapshot_ms: u64,
    /// Every this many seconds, 0 to 86,400, stop sending entirely for --pause-ms (0: never).
    #[arg(long, default_value_t = 0)]
    pub pause_every_s: u64,
    /// Length of each pause, ms, 0 to 86,400,000 and shorter than --pause-every-s.
    #[arg(long, default_value_t = 1000)]
    pub pause_ms: u64,
    /// sqf: after this many seconds, 0 to 86,400, reset the provider: sequences restart at 1 after a snapshot at 0 (0: never).
    #[arg(long, default_value_t = 0)]
    pub reset_after_s: u64,
    /// sqf: provider clock minus local clock, ms, −86,400,000 to 86,400,000 (a skewed provider clock).
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub clock_skew_ms: i64,
    /// Stop after this many seconds, 0 to 31,536,000 (0: run until interrupted, a week at most).
    #[arg(long, default_value_t = 0.0)]
    pub duration_s: f64,
    /// Stop after this many quotes (sqf), messages (itch50) or events (mdp3), 0 to 2^64 − 1 (0: no limit).
    #[arg(long, default_value_t = 0)]
    pub count: u64,
    /// Seed of the random choices (loss, prices, ...), 0 to 2^64 − 1.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Print what was sent (per line: datagrams, dropped, duplicated; quotes, ...) as JSON at the end.
    #[arg(long)]
    pub report: bool,
}

/// Protocol of the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SimProtocol {
    /// SQF quotes.
    Sqf,
    /// ITCH 5.0 over MoldUDP64, with a re-request server.
    Itch50,
    /// A CME MDP 3.0 channel: incremental, snapshot and definition lines.
    Mdp3,
}

/// Feed kind for the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SimKind {
    /// Full quotes.
    Full,
    /// Delta quotes, repaired by snapshots.
    Delta,
}

impl From<SimKind> for tickguard::simulate::sqf::SimKind {
    fn from(k: SimKind) -> Self {
        match k {
            SimKind::Full => tickguard::simulate::sqf::SimKind::Full,
            SimKind::Delta => tickguard::simulate::sqf::SimKind::Delta,
        }
    }
}

impl SimulateArgs {
    /// The simulator's parameters.
    pub fn params(&self) -> tickguard::simulate::sqf::Params {
        tickguard::simulate::sqf::Params {
            line_a: self.line_a,
            line_b: self.line_b,
            source: self.source.unwrap_or(std::net::Ipv4Addr::LOCALHOST),
            symbols: self.symbols,
            names: self.names.clone(),
            rate: self.rate,
            batch: self.batch,
            kind: self.kind.into(),
            loss_a: self.loss_a,
            loss_b: self.loss_b,
            duplicate: self.duplicate,
            reorder: self.reorder,
            invalid: self.invalid,
            heartbeat_ms: self.heartbeat_ms.unwrap_or(250),
            snapshot_ms: self.snapshot_ms,
            pause_every_s: self.pause_every_s,
            pause_ms: self.pause_ms,
            reset_after_s: self.reset_after_s,
            clock_skew_ms: self.clock_skew_ms,
            duration_s: self.duration_s,
            count: self.count,
            seed: self.seed,
            report: self.report,
        }
    }
}

impl SimulateArgs {
    /// Runs the simulator of `--protocol`.
    pub fn run(&self) -> anyhow::Result<()> {
        if let Some((flag, protocols)) = self.foreign_flag() {
            anyhow::bail!("simulate: {flag} applies to --protocol {protocols} only");
        }
        match self.protocol {
            SimProtocol::Sqf => tickguard::simulate::sqf::run(&self.params()),
            SimProtocol::Itch50 => tickguard::simulate::itch50::run(&self.itch_params()?),
            SimProtocol::Mdp3 => tickguard::simulate::mdp3::run(&self.mdp3_params()?),
        }
    }

    /// The first flag given a value other than its default that does not
    /// apply to `--protocol`, and the protocols it applies to.
    pub(crate) fn foreign_flag(&self) -> Option<(&'static str, &'static str)> {
        use SimProtocol::{Itch50, Mdp3, Sqf};
        const ITCH: &[SimProtocol] = &[Itch50];
        const SQF: &[SimProtocol] = &[Sqf];
        const MDP3: &[SimProtocol] = &[Mdp3];
        const VENUES: &[SimProtocol] = &[Itch50, Mdp3];
        const NOT_MDP3: &[SimProtocol] = &[Sqf, Itch50];
        let default_a: std::net::SocketAddrV4 = DEFAULT_LINE_A.parse().ok()?;
        let given: [(&str, bool, &[SimProtocol]); 25] = [
            ("--config", self.config.is_some(), VENUES),
            ("--recovery", self.recovery.is_some(), ITCH),
            ("--no-recovery-server", self.no_recovery_server, ITCH),
            ("--session", self.session != "TGSIM00001", ITCH),
            ("--halt-every-s", self.halt_every_s != 0, VENUES),
            ("--history", self.history != 1_000_000, ITCH),
            ("--answer-delay-ms", self.answer_delay_ms != 0, ITCH),
            ("--request-drop", self.request_drop != 0.0, ITCH),
            ("--linger-ms", self.linger_ms != 0, ITCH),
            ("--glimpse", self.glimpse.is_some(), ITCH),
            ("--kind", self.kind != SimKind::Full, SQF),
            ("--invalid", self.invalid != 0.0, SQF),
            ("--snapshot-ms", self.snapshot_ms != 0, SQF),
            ("--reset-after-s", self.reset_after_s != 0, SQF),
            ("--clock-skew-ms", self.clock_skew_ms != 0, SQF),
            ("--loss-both", self.loss_both != 0.0, MDP3),
            ("--loop-ms", self.loop_ms != 1000, MDP3),
            (
                "--definition-loop-ms",
                self.definition_loop_ms != 5000,
                MDP3,
            ),
            (
                "--channel-reset-at-ms",
                !self.channel_reset_at_ms.is_empty(),
                MDP3,
            ),
            ("--mid-week", self.mid_week, MDP3),
            ("--line-a", self.line_a != default_a, NOT_MDP3),
            ("--line-b", self.line_b.is_some(), NOT_MDP3),
            ("--symbols", self.symbols != 8, NOT_MDP3),
            ("--names", !self.names.is_empty(), NOT_MDP3),
            ("--batch", self.batch != 8, NOT_MDP3),
        ];
        let (flag, _, protocols) = given
            .into_iter()
            .find(|(_, set, protocols)| *set && !protocols.contains(&self.protocol))?;
        let names = match protocols {
            [Sqf] => "sqf",
            [Itch50] => "itch50",
            [Mdp3] => "mdp3",
            [Itch50, Mdp3] => "itch50 and mdp3",
            _ => "sqf and itch50",
        };
        Some((flag, names))
    }

    /// The address to send from for `feed` of `--config`: `--source`,
    /// else the feed's own `source` (a source-specific join would filter
    /// out any other; one not on loopback is refused, naming it), else
    /// 127.0.0.1.
    fn source_for(
        &self,
        feed: &tickguard::config::FeedConfig,
    ) -> anyhow::Result<std::net::Ipv4Addr> {
        match (self.source, feed.source) {
            (Some(s), _) => Ok(s),
            (None, Some(s)) if !s.is_loopback() => anyhow::bail!(
                "simulate: feed '{}' joins from source {s}, not a loopback address a simulator may send from: give --source 127.0.0.x (and a configuration whose source it is)",
                feed.name
            ),
            (None, Some(s)) => Ok(s),
            (None, None) => Ok(std::net::Ipv4Addr::LOCALHOST),
        }
    }

    /// The MDP3 channel's parameters: its lines from `--config`'s mdp3
    /// feed (required; the feeds' files are not opened: `Config::read`).
    pub fn mdp3_params(&self) -> anyhow::Result<tickguard::simulate::mdp3::Params> {
        let Some(path) = &self.config else {
            anyhow::bail!("simulate: --protocol mdp3 needs --config FILE: its mdp3 feed gives the incremental, snapshot and definition lines");
        };
        let config = tickguard::config::Config::read(path)?;
        let (feed, settings) =
            config_feed(&config, path, self.feed.as_deref(), "mdp3", |s| match s {
                ProtocolSettings::Mdp3(c) => Some(c),
                _ => None,
            })?;
        Ok(tickguard::simulate::mdp3::Params {
            lines: feed.lines.clone(),
            snapshot_lines: settings.snapshot_lines.clone(),
            definition_lines: settings.definition_lines.clone(),
            source: self.source_for(feed)?,
            rate: self.rate,
            loss_a: self.loss_a,
            loss_b: self.loss_b,
            loss_both: self.loss_both,
            duplicate: self.duplicate,
            reorder: self.reorder,
            heartbeat_ms: self.heartbeat_ms.unwrap_or(30_000),
            loop_ms: self.loop_ms,
            definition_loop_ms: self.definition_loop_ms,
            halt_every_s: self.halt_every_s,
            channel_reset_at_ms: self.channel_reset_at_ms.clone(),
            pause_every_s: self.pause_every_s,
            pause_ms: self.pause_ms,
            mid_week: self.mid_week,
            duration_s: self.duration_s,
            count: self.count,
            linger_ms: 0,
            seed: self.seed,
            report: self.report,
        })
    }

    /// The ITCH venue's parameters; with `--config`, its feed's lines,
    /// recovery and time zone.
    pub fn itch_params(&self) -> anyhow::Result<tickguard::simulate::itch50::Params> {
        let mut p = tickguard::simulate::itch50::Params {
            line_a: self.line_a,
            line_b: self.line_b,
            source: self.source.unwrap_or(std::net::Ipv4Addr::LOCALHOST),
            recovery: self.recovery,
            session: self.session.clone(),
            symbols: self.symbols,
            names: self.names.clone(),
            rate: self.rate,
            batch: self.batch,
            loss_a: self.loss_a,
            loss_b: self.loss_b,
            duplicate: self.duplicate,
            reorder: self.reorder,
            heartbeat_ms: self.heartbeat_ms.unwrap_or(1000),
            pause_every_s: self.pause_every_s,
            pause_ms: self.pause_ms,
            halt_every_s: self.halt_every_s,
            history: self.history,
            answer_delay_ms: self.answer_delay_ms,
            request_drop: self.request_drop,
            linger_ms: self.linger_ms,
            duration_s: self.duration_s,
            count: self.count,
            seed: self.seed,
            report: self.report,
            glimpse: self
                .glimpse
                .map(|listen| tickguard::simulate::itch50::glimpse::Params {
                    listen,
                    user: self.glimpse_user.clone(),
                    password_env: self.glimpse_password_env.clone(),
                    fault: self.glimpse_fault,
                    fault_logins: self.glimpse_fault_logins,
                }),
            ..Default::default()
        };
        if let Some(path) = &self.config {
            let default_a: std::net::SocketAddrV4 = DEFAULT_LINE_A.parse()?;
            let given = [
                ("--line-a", self.line_a != default_a),
                ("--line-b", self.line_b.is_some()),
                ("--recovery", self.recovery.is_some()),
            ];
            if let Some((flag, _)) = given.iter().find(|(_, set)| *set) {
                anyhow::bail!(
                    "simulate: {flag} does not apply with --config (the feed's lines and recovery are its)"
                );
            }
            let config = tickguard::config::Config::read(path)?;
            let (feed, settings) =
                config_feed(&config, path, self.feed.as_deref(), "itch50", |s| match s {
                    ProtocolSettings::Itch50(c) => Some(c),
                    _ => None,
                })?;
            p.source = self.source_for(feed)?;
            p.line_a = feed.lines[0];
            p.line_b = feed.lines.get(1).copied();
            p.recovery = settings.recovery;
            p.timezone = settings.timezone.clone();
        }
        if self.no_recovery_server {
            p.recovery = None;
        }
        Ok(p)
    }
}

impl DemoArgs {
    /// The demo's parameters.
    pub fn params(&self) -> tickguard::demo::Params {
        tickguard::demo::Params {
            symbols: self.symbols,
            rate: self.rate,
            duration_s: self.duration_s,
            shm: self.shm.clone(),
            seed: self.seed,
        }
    }

    /// Runs the demo of `--protocol`.
    pub fn run(&self) -> anyhow::Result<()> {
        let d = self.duration_s;
        let most = tickguard::simulate::MAX_DURATION_S;
        if !(0.0..=most).contains(&d) {
            anyhow::bail!("demo: --duration-s must be from 0 to {most} seconds, got {d}");
        }
        let most = match self.protocol.as_str() {
            "itch50" => tickguard::simulate::itch50::MAX_STOCKS,
            _ => tickguard::simulate::sqf::MAX_GENERATED_SYMBOLS,
        };
        if self.protocol != "mdp3" && !(1..=most).contains(&self.symbols) {
            anyhow::bail!(
                "demo: --symbols must be from 1 to {most} for {}, got {}",
                self.protocol,
                self.symbols
            );
        }
        match self.protocol.as_str() {
            "itch50" => tickguard::demo::itch50::run(&self.params()),
            "mdp3" => {
                if self.symbols != DEMO_SYMBOLS {
                    anyhow::bail!(
                        "demo: --symbols applies to --protocol sqf, itch50 only (the mdp3 channel has its own instruments)"
                    );
                }
                tickguard::demo::mdp3::run(&self.params())
            }
            _ => tickguard::demo::sqf::run(&self.params()),
        }
    }
}

/// The feed of `protocol` in `config` (loaded from `path`) named `name`,
/// or its only one, with its settings as `settings` finds them.
fn config_feed<'c, T>(
    config: &'c tickguard::config::Config,
    path: &std::path::Path,
    name: Option<&str>,
    protocol: &str,
    settings: impl Fn(&'c ProtocolSettings) -> Option<&'c T>,
) -> anyhow::Result<(&'c tickguard::config::FeedConfig, &'c T)> {
    let found: Vec<_> = config
        .feeds
        .iter()
        .filter_map(|f| settings(&f.settings).map(|c| (f, c)))
        .filter(|(f, _)| name.is_none_or(|n| n == f.name))
        .collect();
    match (found.as_slice(), name) {
        ([f], _) => Ok(*f),
        ([], Some(name)) => anyhow::bail!(
            "simulate: {}: no {protocol} feed named '{name}'",
            path.display()
        ),
        ([], None) => anyhow::bail!("simulate: {}: no {protocol} feed", path.display()),
        (_, _) => anyhow::bail!(
            "simulate: {}: several {protocol} feeds, choose one with --feed",
            path.display()
        ),
    }
}

/// `--dead-after-ms`: the range of the configuration's `dead_after_ms`.
fn dead_after_ms() -> clap::builder::RangedU64ValueParser {
    use tickguard::config::DEAD_AFTER_MS;
    clap::value_parser!(u64).range(DEAD_AFTER_MS.min as u64..=DEAD_AFTER_MS.max as u64)
}
