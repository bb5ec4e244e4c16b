//! The live MDP3 receiver on loopback, driven cycle by cycle: a seeded CME
//! channel (`mdp3::synth`) sent to unicast lines (incremental A/B, snapshot
//! A/B, definition A), the instruments read back through the publication
//! as a gateway reads them (`Reader`), by Symbol and by `#SecurityID`.

use std::net::{SocketAddrV4, UdpSocket};
use std::time::{Duration, Instant};
use tickguard::config::Config;
use tickguard::protocol::mdp3::feed::Feed;
use tickguard::protocol::mdp3::synth::{equity_channel, Activity, Channel, Datagram, Scope};
use tickguard::sidecar::Sidecar;
use tickguard::state::price::Price as Exact;
use tickguard::time::now_ns;
use tickguard::Reader;

/// Five free loopback ports: incremental A, B, snapshot A, B, definition A
/// (each a different one: [`crate::common::free_port`]).
fn ports() -> [SocketAddrV4; 5] {
    std::array::from_fn(|_| crate::common::free_addr())
}

struct Rig {
    sidecar: Sidecar,
    /// Datagrams sent to the sidecar's lines so far.
    sent: u64,
    tx: UdpSocket,
    lines: [SocketAddrV4; 5],
    shm: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn new(join: &str) -> Rig {
        Rig::with(join, "")
    }

    /// With `extra` lines of the feed's configuration (`gap_timeout_ms`
    /// 5 unless they set it).
    fn with(join: &str, extra: &str) -> Rig {
        Rig::try_with(join, extra).unwrap()
    }

    /// [`with`](Self::with), or why the receiver did not start.
    fn try_with(join: &str, extra: &str) -> anyhow::Result<Rig> {
        let gap = if extra.contains("gap_timeout_ms") {
            ""
        } else {
            "gap_timeout_ms = 5"
        };
        let dir = tempfile::tempdir().unwrap();
        let shm = dir.path().join("tg.shm");
        let l = ports();
        let cfg = Config::parse(
            &format!(
                r#"
[metrics]
enabled = false
[sidecar]
shm_path = "{}"
[[feed]]
name = "cme"
protocol = "mdp3"
lines = ["{}", "{}"]
snapshot_lines = ["{}", "{}"]
definition_lines = ["{}"]
snapshot_join = "{join}"
snapshot_max_loops = 2
stale_threshold_ms = 30000
source_threshold_ms = 30000
clock_offset = 0
{gap}
{extra}
"#,
                shm.display(),
                l[0],
                l[1],
                l[2],
                l[3],
                l[4]
            ),
            "test",
        )
        .unwrap();
        let sidecar = Sidecar::start(&cfg)?;
        Ok(Rig {
            sidecar,
            sent: 0,
            tx: UdpSocket::bind("127.0.0.1:0").unwrap(),
            lines: l,
            shm,
            _dir: dir,
        })
    }

    /// Sends `d` on the lines `to` (indices into `lines`), then cycles
    /// until the sidecar has taken everything sent (or 5 s).
    fn send(&mut self, d: &[Datagram], to: &[usize]) {
        for x in d {
            for &i in to {
                self.tx.send_to(&x.bytes, self.lines[i]).unwrap();
                self.sent += 1;
            }
        }
        self.settle();
    }

    /// Sends raw datagrams on line `to`, then settles.
    fn send_raw(&mut self, d: &[Vec<u8>], to: usize) {
        for x in d {
            self.tx.send_to(x, self.lines[to]).unwrap();
            self.sent += 1;
        }
        self.settle();
    }

    /// Cycles until the sidecar has received every datagram sent (on a
    /// loaded machine loopback may hand them over late), then until its
    /// lines stay quiet for 20 cycles.
    fn settle(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while self.sidecar.stats().datagrams < self.sent {
            assert!(
                Instant::now() < deadline,
                "timed out: datagrams not received"
            );
            self.sidecar.cycle(now_ns());
        }
        let mut idle = 0;
        while idle < 20 {
            assert!(Instant::now() < deadline, "timed out");
            if self.sidecar.cycle(now_ns()) == 0 {
                idle += 1;
                std::thread::sleep(Duration::from_micros(200));
            } else {
                idle = 0;
            }
        }
    }

    /// The venue's events `range` (the k-th at `t` + k µs), on both
    /// incremental lines.
    fn events(&mut self, venue: &mut Channel, t: u64, range: std::ops::Range<u64>) {
        for k in range {
            self.send(&venue.next_event(t + k * 1000), &[0, 1]);
        }
    }

    fn snapshot_wanted(&self) -> bool {
        self.sidecar.handler().wants(0, 2)
    }

    /// The channel as the receiver holds it.
    fn feed(&self) -> &Feed {
        self.sidecar.handler().feeds()[0].engine().mdp3().unwrap()
    }

    /// Joining on demand, the equity channel (seed 7) defined on the
    /// definition line and its books filled on both lines: the rig and
    /// the venue's instruments.
    fn equity_defined() -> (Rig, Vec<tickguard::protocol::mdp3::synth::Spec>) {
        Rig::equity_defined_with("")
    }

    /// [`equity_defined`](Self::equity_defined) with `extra` configuration
    /// lines.
    fn equity_defined_with(extra: &str) -> (Rig, Vec<tickguard::protocol::mdp3::synth::Spec>) {
        let mut rig = Rig::with("on_demand", extra);
        let t = now_ns();
        let mut venue = Channel::new(7, equity_channel());
        rig.send(&venue.definition_loop(t), &[4]);
        rig.send(&venue.fill_books(t), &[0, 1]);
        (rig, venue.specs().cloned().collect())
    }

    /// Joining on demand with `extra` configuration lines, the equity
    /// channel (seed 11) with its books filled on both lines: the rig, the
    /// venue's clock and the venue.
    fn equity_filled(extra: &str) -> (Rig, u64, Channel) {
        let mut rig = Rig::with("on_demand", extra);
        let t = now_ns();
        let mut venue = Channel::new(11, equity_channel());
        rig.send(&venue.fill_books(t), &[0, 1]);
        (rig, t, venue)
    }

    /// Joining on demand with `extra` configuration lines, the equity
    /// channel (seed 3) with its books filled and 20 events sent on both
    /// lines: the rig, the venue's clock and the venue.
    fn equity_traded(extra: &str) -> (Rig, u64, Channel) {
        let mut rig = Rig::with("on_demand", extra);
        let t = now_ns();
        let mut venue = Channel::new(3, equity_channel());
        rig.send(&venue.fill_books(t), &[0, 1]);
        rig.events(&mut venue, t, 0..20u64);
        (rig, t, venue)
    }
}

/// The key of the slot a reader finds by `name` (the instrument whose
/// `#SecurityID` made it: [`publish::key`]), if it finds one.
///
/// [`publish::key`]: tickguard::protocol::mdp3::publish::key
fn slot_key(r: &Reader, name: &str) -> Option<Option<tickguard::symbol::Symbol>> {
    r.lookup("cme", name).map(|h| r.record(&h).unwrap().symbol)
}

/// The slot key of SecurityID `id`, as [`slot_key`] gives it.
fn key_of(id: i32) -> Option<Option<tickguard::symbol::Symbol>> {
    Some(Some(tickguard::protocol::mdp3::publish::key(id)))
}

/// Feed `cme`'s counter `name` (the feed-wide one) as the publication
/// shows it.
fn counter(r: &Reader, name: &str) -> u64 {
    r.readings(0)
        .unwrap()
        .iter()
        .find(|c| c.descriptor.name == name && c.descriptor.key.is_empty())
        .unwrap_or_else(|| panic!("no counter {name}"))
        .value
}

fn reasons(r: &Reader, name: &str) -> String {
    r.check_symbol("cme", name, now_ns()).reasons.to_string()
}

#[test]
fn a_channel_is_published_by_symbol_and_security_id_and_heals_from_the_loop() {
    let mut rig = Rig::new("on_demand");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    // Definitions, then the books filled on both incremental lines.
    rig.send(&venue.definition_loop(t), &[4]);
    rig.send(&venue.fill_books(t), &[0, 1]);
    for k in 0..200 {
        let d = venue.next_event(t + k * 1000);
        rig.send(&d, &[0, 1]);
    }
    let reader = crate::common::live_reader(&rig.shm);
    for spec in venue.specs() {
        let book = venue.book(spec.security_id).unwrap();
        let id = format!("#{}", spec.security_id);
        for name in [spec.symbol.as_str(), id.as_str()] {
            let h = reader
                .lookup("cme", name)
                .unwrap_or_else(|| panic!("{name} not published"));
            let rec = reader.record(&h).unwrap();
            let bid = rec.bid.map(|s| s.price);
            let want = book.bids.first().map(|l| Exact::Decimal {
                mantissa: l.price,
                exponent: -9,
            });
            assert_eq!(bid, want, "{name}: best bid");
            let expected = if book.crossed() {
                "invalid_price"
            } else {
                "ok"
            };
            assert_eq!(reasons(&reader, name), expected, "{name}");
        }
    }
    assert!(!rig.snapshot_wanted(), "nothing needs the loop");
    // Joined while the books had no baseline, and left: how many times
    // depends on how the start's datagrams fell into receive cycles.
    let joins_before = counter(&reader, "snapshot_joins");
    assert!(joins_before >= 1, "joined at start");
    assert_eq!(counter(&reader, "snapshot_leaves"), joins_before);

    // A packet lost on both lines: the instruments it touched turn
    // suspect once the gap is given up; the others only unverified until
    // their next entry. The loop heals them, then is left.
    let lost = venue.next_event(t + 300_000);
    let after = venue.next_event(t + 400_000);
    rig.send(&after, &[0, 1]);
    std::thread::sleep(Duration::from_millis(10));
    rig.settle();
    assert!(
        rig.snapshot_wanted(),
        "the loop is wanted while instruments need healing"
    );
    let suspect: Vec<String> = venue
        .specs()
        .map(|s| format!("#{}", s.security_id))
        .filter(|n| reasons(&reader, n).contains("suspect"))
        .collect();
    assert!(
        !suspect.is_empty(),
        "a loss on both lines shows ({} lost)",
        lost.len()
    );
    // The channel's counters say so: the gap given up, the instruments
    // suspect or unverified, the snapshot lines joined a second time.
    assert!(counter(&reader, "gaps_expired") >= 1);
    assert!(counter(&reader, "packets_lost") >= 1);
    assert!(
        counter(&reader, "instruments_suspect") + counter(&reader, "instruments_unverified") > 0
    );
    assert_eq!(counter(&reader, "snapshot_joined"), 1);
    assert_eq!(
        counter(&reader, "snapshot_joins"),
        joins_before + 1,
        "joined once more, for the loss"
    );
    rig.send(&venue.snapshot_loop(t + 500_000), &[2, 3]);
    all_answer_their_books(&reader, &venue, "healed by the loop");
    assert_eq!(counter(&reader, "instruments_unverified"), 0);
    // Kept for a whole loop after the give-up, which the first may not be.
    assert!(rig.snapshot_wanted(), "kept for a whole loop");
    rig.send(&venue.snapshot_loop(t + 550_000), &[2, 3]);
    assert!(!rig.snapshot_wanted(), "left once nothing needs the loop");
    for name in [
        "instruments_suspect",
        "instruments_unverified",
        "instruments_overflowed",
        "snapshot_joined",
    ] {
        assert_eq!(counter(&reader, name), 0, "{name}");
    }
    assert_eq!(counter(&reader, "snapshot_leaves"), joins_before + 1);
    assert!(counter(&reader, "snapshots_applied") > 0);
    // What the snapshot lines still carry once left is dropped, counted.
    let before = counter(&reader, "unwanted");
    let again = venue.snapshot_loop(t + 600_000);
    rig.send(&again, &[2]);
    assert_eq!(counter(&reader, "unwanted"), before + again.len() as u64);
}

/// Whether any instrument of the channel is suspect or unverified, as the
/// feed holds it.
fn any_needy(rig: &Rig) -> bool {
    let f = rig.feed();
    f.instruments()
        .iter()
        .any(|e| e.instrument.seq.suspect() || e.instrument.seq.unverified())
}

/// Every instrument of `venue` answers as its true book says (`ok`, or
/// `invalid_price` for a crossed one), by `#SecurityID`.
fn all_answer_their_books(reader: &Reader, venue: &Channel, what: &str) {
    for spec in venue.specs() {
        let id = format!("#{}", spec.security_id);
        let book = venue.book(spec.security_id).unwrap();
        let expected = if book.crossed() {
            "invalid_price"
        } else {
            "ok"
        };
        assert_eq!(reasons(reader, &id), expected, "{id}: {what}");
    }
}

/// Each packet lost on one line only is taken from the other: no
/// instrument is ever suspect or unverified, the snapshot lines stay left.
#[test]
fn a_b_loss_is_recovered_with_no_instrument_suspect() {
    let (mut rig, t, mut venue) = Rig::equity_filled("");
    for k in 0..300u64 {
        // Alternately only on A, only on B, on both.
        let to: &[usize] = match k % 3 {
            0 => &[0],
            1 => &[1],
            _ => &[0, 1],
        };
        let d = venue.next_event(t + k * 1000);
        rig.send(&d, to);
        assert!(!any_needy(&rig), "after event {k}");
        assert!(!rig.snapshot_wanted(), "after event {k}");
    }
    let reader = crate::common::live_reader(&rig.shm);
    all_answer_their_books(&reader, &venue, "A/B arbitration");
    let f = rig.feed();
    assert_eq!(f.sequence().counters().packets_lost, 0);
    // Every duplicate was the other line's copy: none counts as a packet
    // sent twice on one line.
    let c = &rig.sidecar.handler().feeds()[0].counters;
    assert!(c.line_copies > 0);
    assert_eq!(c.duplicates, c.line_copies, "{c:?}");
}

/// A packet lost on line A whose copy line B brings late: the instruments
/// it touched are suspect until the copy fills the gap, and the snapshot
/// lines are not joined for that (the need did not last the gap timeout),
/// so a channel losing one line's packets now and then does not join and
/// leave the loop for each.
#[test]
fn a_gap_the_other_line_fills_joins_no_snapshot_line() {
    let (mut rig, t, mut venue) = Rig::equity_filled("gap_timeout_ms = 2000");
    assert!(!rig.snapshot_wanted());
    let mut suspect_seen = 0;
    for k in 0..20u64 {
        let first = venue.next_event(t + (2 * k + 1) * 1000);
        let second = venue.next_event(t + (2 * k + 2) * 1000);
        rig.send(&second, &[0]);
        suspect_seen += usize::from(any_needy(&rig));
        assert!(
            !rig.snapshot_wanted(),
            "event {k}: joined for a gap still open"
        );
        rig.send(&first, &[1]);
        assert!(!any_needy(&rig), "event {k}: the fill heals");
    }
    assert!(suspect_seen > 0, "no event revealed the gap");
    // The counters as the next heartbeat publishes them.
    std::thread::sleep(Duration::from_millis(300));
    rig.settle();
    let reader = crate::common::live_reader(&rig.shm);
    assert_eq!(counter(&reader, "snapshot_joins"), 1, "only at start");
    all_answer_their_books(&reader, &venue, "filled by line B");
}

/// A packet lost on both lines that touched no instrument seen since: no
/// RptSeq hole shows, so the need comes only when the gap is given up
/// (every instrument unverified), and the snapshot lines are joined then,
/// not a gap timeout later: no copy can fill a given-up gap.
#[test]
fn a_gap_given_up_joins_the_snapshot_lines_at_once() {
    // (Two seconds: the checks before it is given up come first however
    // long a loaded machine takes to settle the heartbeat.)
    let (mut rig, t, mut venue) = Rig::equity_filled("gap_timeout_ms = 2000");
    assert!(!rig.snapshot_wanted());
    let _lost = venue.next_event(t + 1_000);
    rig.send(&[venue.heartbeat(t + 2_000)], &[0, 1]);
    assert!(!any_needy(&rig), "no RptSeq hole shows yet");
    let lost = |rig: &Rig| rig.feed().sequence().counters().packets_lost;
    let deadline = Instant::now() + Duration::from_secs(10);
    while lost(&rig) == 0 {
        assert!(Instant::now() < deadline, "the gap was never given up");
        assert!(!rig.snapshot_wanted(), "joined before the gap was given up");
        rig.sidecar.cycle(now_ns());
        std::thread::sleep(Duration::from_millis(1));
    }
    assert!(any_needy(&rig), "every instrument unverified");
    assert!(
        rig.snapshot_wanted(),
        "joined in the cycle that gave the gap up"
    );
    rig.send(&venue.snapshot_loop(t + 3_000), &[2, 3]);
    assert!(!any_needy(&rig), "healed by the loop");
    let reader = crate::common::live_reader(&rig.shm);
    all_answer_their_books(&reader, &venue, "healed by the loop");
    // Kept until a whole loop was read after the give-up (a status lost
    // with the gap is said again only by the loop's snapshots): the loop
    // read counts as whole once the next one begins.
    assert!(
        rig.snapshot_wanted(),
        "kept for a whole loop after the give-up"
    );
    rig.send(&venue.snapshot_loop(t + 4_000), &[2, 3]);
    assert!(
        !rig.snapshot_wanted(),
        "left once a whole loop was read and none needs one"
    );
}

/// Started in the middle of the week, every instrument is suspect (no
/// baseline) until the loop: one loop heals every active instrument and
/// the snapshot lines are left.
#[test]
fn a_mid_week_start_heals_every_instrument_within_one_loop() {
    let mut rig = Rig::new("on_demand");
    let t = now_ns();
    let mut venue = Channel::mid_week(5, equity_channel(), t);
    rig.events(&mut venue, t, 0..50u64);
    assert!(
        rig.snapshot_wanted(),
        "joined: instruments have no baseline"
    );
    rig.send(&venue.snapshot_loop(t + 60_000), &[2, 3]);
    let reader = crate::common::live_reader(&rig.shm);
    all_answer_their_books(&reader, &venue, "healed by one loop");
    assert!(!any_needy(&rig));
    assert!(!rig.snapshot_wanted(), "left once every instrument healed");
    for k in 0..50u64 {
        rig.send(&venue.next_event(t + 100_000 + k * 1000), &[0, 1]);
    }
    all_answer_their_books(&reader, &venue, "after the loop");
}

/// A ChannelReset empties every book (`no_quote`) and restarts RptSeq; the
/// books refilled after it are published and answer `ok` without a loop.
#[test]
fn a_channel_reset_empties_every_book_until_it_is_refilled() {
    // MsgSeqNum restarts at 1 after the reset; with the channel's old
    // sequence this short, a margin of 1 keeps the new sequence's first
    // packets from being taken for late copies of the old one (spec mdp3
    // §9.2 judges by MsgSeqNum alone).
    let (mut rig, t, mut venue) = Rig::equity_traded("restart_margin = 1");
    let reader = crate::common::live_reader(&rig.shm);
    all_answer_their_books(&reader, &venue, "before the reset");
    rig.send(&venue.channel_reset(t + 50_000), &[0, 1]);
    for spec in venue.specs() {
        for name in [format!("#{}", spec.security_id), spec.symbol.clone()] {
            assert_eq!(
                reasons(&reader, &name),
                "no_quote",
                "{name} after the reset"
            );
        }
    }
    rig.send(&venue.fill_books(t + 60_000), &[0, 1]);
    for k in 0..20u64 {
        rig.send(&venue.next_event(t + 70_000 + k * 1000), &[0, 1]);
    }
    all_answer_their_books(&reader, &venue, "refilled after the reset");
    assert!(!rig.snapshot_wanted());
    let f = rig.feed();
    assert_eq!(f.counters().channel_resets, 1);
    // Published as the channel's own count, not as the provider resets
    // (SQF's word), which the monitor would log a second time, unlimited,
    // as "sequences went back": the engine logs a ChannelReset itself.
    let deadline = Instant::now() + Duration::from_secs(5);
    while counter(&reader, "channel_resets") < 1 {
        assert!(Instant::now() < deadline, "counters not published");
        std::thread::sleep(Duration::from_millis(2));
        rig.settle();
    }
    assert_eq!(reader.counter(0, tickguard::shm::counter::RESETS), Some(0));
}

/// Loses one event on both lines and lets its gap be given up: every
/// instrument turns unverified, those the event touched suspect once their
/// next entry shows the hole.
fn lose_an_event_on_both_lines(rig: &mut Rig, venue: &mut Channel, t: u64) {
    let _lost = venue.next_event(t);
    let after = venue.next_event(t + 1_000);
    rig.send(&after, &[0, 1]);
    // Past the gap timeout (5 ms): given up at the loop's clock.
    std::thread::sleep(Duration::from_millis(10));
    rig.settle();
}

/// Instrument `x`'s pre-open (21: `closed`) lost on both lines at `t`,
/// the packet after it (an entry of `then`) received, and the gap given
/// up: every instrument unverified, the snapshot lines joined.
fn lose_a_status_on_both_lines(rig: &mut Rig, venue: &mut Channel, t: u64, x: i32, then: i32) {
    let _lost = venue.status(t, Scope::Instrument(x), 21);
    rig.send(&venue.event(t + 1_000, then, Activity::Quote), &[0, 1]);
    std::thread::sleep(Duration::from_millis(10));
    rig.settle();
    assert!(rig.snapshot_wanted(), "joined after the give-up");
}

/// A gap given up keeps the snapshot lines until a loop begun after it has
/// been read whole: an instrument's status lost with the gap (its next
/// entry in order verifying it again, so it reads `ok`), its snapshot lost
/// in the first loop too, is said again by the next loop, which the lines
/// are not left before, however many loops have begun.
#[test]
fn a_status_lost_with_a_gap_and_in_a_loop_comes_with_the_next_whole_loop() {
    let (mut rig, t, mut venue) = Rig::equity_traded("");
    assert!(!rig.snapshot_wanted());
    let x = venue.specs().nth(1).unwrap().security_id;
    let id = format!("#{x}");
    // Once the gap is given up, X's next quote in order verifies X again.
    lose_a_status_on_both_lines(&mut rig, &mut venue, t + 30_000, x, x);
    let quote = venue.event(t + 32_000, x, Activity::Quote);
    assert!(!quote.is_empty());
    rig.send(&quote, &[0, 1]);
    let reader = crate::common::live_reader(&rig.shm);
    assert_eq!(reasons(&reader, &id), "ok", "the status is lost");
    // The first loop, X's snapshot (its second packet) lost on both lines:
    // every other instrument heals from it.
    let mut first = venue.snapshot_loop(t + 40_000);
    first.remove(1);
    rig.send(&first, &[2, 3]);
    assert!(!any_needy(&rig), "healed, or verified by an entry");
    // The next loop's beginning ends a loop read with a hole: still joined.
    let next = venue.snapshot_loop(t + 50_000);
    rig.send(&next[..1], &[2, 3]);
    assert!(
        rig.snapshot_wanted(),
        "no loop read whole since the give-up"
    );
    rig.send(&next[1..], &[2, 3]);
    assert_eq!(reasons(&reader, &id), "closed", "said again by the loop");
    // That loop read whole, the lines are left at the next beginning.
    rig.send(&venue.snapshot_loop(t + 60_000)[..1], &[2, 3]);
    assert!(!rig.snapshot_wanted(), "left once a loop was read whole");
}

/// A snapshot loop taken ahead of the incremental lines (its snapshots
/// past the packets received, their statuses not placed) says no status
/// again: it ends no hold, though read whole, and the next loop says the
/// status lost with the gap.
#[test]
fn a_loop_ahead_of_the_lines_does_not_end_a_give_ups_hold() {
    let (mut rig, t, mut venue) = Rig::equity_traded("");
    let ids: Vec<i32> = venue.specs().map(|s| s.security_id).collect();
    let (y, x) = (ids[0], ids[1]);
    let id = format!("#{x}");
    lose_a_status_on_both_lines(&mut rig, &mut venue, t + 30_000, x, x);
    rig.send(&venue.event(t + 32_000, x, Activity::Quote), &[0, 1]);
    // The venue's next packet, still on its way when its loop comes.
    let pending = venue.event(t + 33_000, y, Activity::Quote);
    assert!(!pending.is_empty());
    rig.send(&venue.snapshot_loop(t + 40_000), &[2, 3]);
    rig.send(&pending, &[0, 1]);
    let next = venue.snapshot_loop(t + 50_000);
    rig.send(&next[..1], &[2, 3]);
    assert!(!any_needy(&rig), "healed, or verified by an entry");
    assert!(
        rig.snapshot_wanted(),
        "a loop ahead of the lines said nothing"
    );
    rig.send(&next[1..], &[2, 3]);
    let reader = crate::common::live_reader(&rig.shm);
    assert_eq!(reasons(&reader, &id), "closed", "said again by the loop");
}

/// Snapshots taken before the packets a gap lost say none of what those
/// held: a loop of them, read whole after the give-up (a line's copies
/// late, say), ends no hold, however its line numbers it.
#[test]
fn a_loop_taken_before_the_lost_packets_does_not_end_a_give_ups_hold() {
    let (mut rig, t, mut venue) = Rig::equity_traded("");
    let (first, second) = (
        venue.snapshot_loop(t + 25_000),
        venue.snapshot_loop(t + 26_000),
    );
    let ids: Vec<i32> = venue.specs().map(|s| s.security_id).collect();
    // A status lost on both lines (no RptSeq hole), given up.
    lose_a_status_on_both_lines(&mut rig, &mut venue, t + 30_000, ids[1], ids[0]);
    // Every instrument verified again by an entry in order.
    for (k, &id) in ids.iter().enumerate() {
        rig.send(
            &venue.event(t + 31_000 + k as u64 * 1000, id, Activity::Quote),
            &[0, 1],
        );
    }
    assert!(!any_needy(&rig), "verified by their entries");
    rig.send(&first, &[2, 3]);
    rig.send(&second[..1], &[2, 3]);
    assert!(rig.snapshot_wanted(), "a loop taken before the lost packet");
    rig.send(&second[1..], &[2, 3]);
    rig.send(&venue.snapshot_loop(t + 60_000), &[2, 3]);
    rig.send(&venue.snapshot_loop(t + 70_000)[..1], &[2, 3]);
    assert!(!rig.snapshot_wanted(), "left after a loop taken since");
    let reader = crate::common::live_reader(&rig.shm);
    assert_eq!(reasons(&reader, &format!("#{}", ids[1])), "closed");
}

/// Loops that heal nothing (the instruments that need healing have no
/// snapshot in them) are left after `snapshot_max_loops` (2 here), and
/// joined again only when another instrument turns suspect or unverified;
/// with `always` the lines are never left.
#[test]
fn loops_that_heal_nothing_are_left_until_another_instrument_needs_one() {
    let (mut rig, t, mut venue) = Rig::equity_traded("");
    assert!(!rig.snapshot_wanted());
    lose_an_event_on_both_lines(&mut rig, &mut venue, t + 30_000);
    assert!(rig.snapshot_wanted(), "joined after the give-up");
    // Another channel's loops: none of this channel's instruments in them.
    let mut specs = equity_channel();
    for s in &mut specs {
        s.security_id += 100_000;
    }
    let mut other = Channel::new(9, specs);
    other.fill_books(t);
    // Its loops taken past this channel's lost packet (their
    // LastMsgSeqNumProcessed above it), as this channel's would be: loops
    // read whole since the give-up, which end its hold.
    while other.next_seq_num() <= venue.next_seq_num() {
        other.next_event(t);
    }
    for loop_no in 0..3u64 {
        rig.send(&other.snapshot_loop(t + 40_000 + loop_no * 10_000), &[2, 3]);
        // A loop ends when the next begins: two whole loops are behind
        // once the third begins.
        assert_eq!(!rig.snapshot_wanted(), loop_no >= 2, "after loop {loop_no}");
    }
    assert!(any_needy(&rig), "nothing healed them");
    // The same instruments needing them longer than the gap timeout (5 ms)
    // do not join them again: only a new need does.
    std::thread::sleep(Duration::from_millis(20));
    rig.settle();
    assert!(!rig.snapshot_wanted(), "no new need: stays left");
    // What still arrives on the left lines is not applied.
    let counted = |rig: &Rig| {
        let f = rig.feed();
        f.counters().snapshots_applied + f.counters().snapshots_ignored
    };
    let before = counted(&rig);
    rig.send(&venue.snapshot_loop(t + 80_000), &[2, 3]);
    assert_eq!(counted(&rig), before, "a left line's snapshots are dropped");
    // Another loss: the instruments healthy again turn unverified, so the
    // loop is wanted again, and heals the suspect ones.
    for k in 0..20u64 {
        rig.send(&venue.next_event(t + 90_000 + k * 1000), &[0, 1]);
    }
    lose_an_event_on_both_lines(&mut rig, &mut venue, t + 120_000);
    assert!(rig.snapshot_wanted(), "joined again");
    rig.send(&venue.snapshot_loop(t + 130_000), &[2, 3]);
    for k in 0..30u64 {
        rig.send(&venue.next_event(t + 140_000 + k * 1000), &[0, 1]);
    }
    let reader = crate::common::live_reader(&rig.shm);
    all_answer_their_books(&reader, &venue, "healed after joining again");
    // The other channel's instruments, unverified by the second give-up,
    // get no entry and no snapshot here: the lines are left after two
    // more loops that heal nothing.
    assert!(rig.snapshot_wanted());
    for loop_no in 0..3u64 {
        rig.send(
            &venue.snapshot_loop(t + 200_000 + loop_no * 10_000),
            &[2, 3],
        );
    }
    assert!(!rig.snapshot_wanted(), "left after loops healing nothing");
    // A new instrument turning suspect (no packet lost) needs the loop:
    // joined again once the need has lasted the gap timeout.
    let seq = venue.next_seq_num();
    rig.send_raw(&[new_then_hole(seq, 999_001)], 0);
    std::thread::sleep(Duration::from_millis(10));
    rig.settle();
    assert!(rig.snapshot_wanted(), "an instrument newly suspect");

    // `always`: joined from the start, and still joined after more loops
    // than `snapshot_max_loops` that heal nothing while an instrument
    // stays suspect (the case `on_demand` leaves).
    let mut always = Rig::new("always");
    always.settle();
    assert!(always.snapshot_wanted(), "always joined");
    let mut venue = Channel::new(5, equity_channel());
    always.send(&venue.fill_books(t), &[0, 1]);
    let seq = venue.next_seq_num();
    always.send_raw(&[new_then_hole(seq, 999_001)], 0);
    std::thread::sleep(Duration::from_millis(10));
    always.settle();
    for loop_no in 0..4u64 {
        always.send(
            &venue.snapshot_loop(t + 300_000 + loop_no * 10_000),
            &[2, 3],
        );
        assert!(always.snapshot_wanted(), "always: after loop {loop_no}");
    }
    let reader = crate::common::live_reader(&always.shm);
    assert!(
        reasons(&reader, "#999001").contains("suspect"),
        "no loop healed it"
    );
    assert_eq!(counter(&reader, "snapshot_leaves"), 0);
}

/// `tickguard check` takes an instrument's Symbol longer than 8
/// characters (a calendar spread's) and its `#SecurityID`; a name with a
/// space between others is a name (an option's Symbol holds one), one
/// at either end is refused as a mistake in the question.
#[test]
fn check_names_an_instrument_by_a_long_symbol() {
    let mut rig = Rig::new("on_demand");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    rig.send(&venue.definition_loop(t), &[4]);
    rig.send(&venue.fill_books(t), &[0, 1]);
    let spread = venue
        .specs()
        .find(|s| s.symbol.len() > 8)
        .expect("a spread's Symbol is longer than 8 characters");
    let book = venue.book(spread.security_id).unwrap();
    let expected = if book.crossed() { 1 } else { 0 };
    let check = |name: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tickguard"))
            .args([
                "check",
                "cme",
                name,
                "--json",
                "--dead-after-ms",
                "60000",
                "--shm",
            ])
            .arg(&rig.shm)
            .output()
            .unwrap()
    };
    for name in [spread.symbol.clone(), format!("#{}", spread.security_id)] {
        let out = check(&name);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|_| panic!("{name}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(out.status.code(), Some(expected), "{name}: {v}");
        assert_eq!(v["symbol_known"], true, "{name}: {v}");
        let bid = book.bids.first().map(|l| l.price);
        assert_eq!(v["bid"]["price"].is_null(), bid.is_none(), "{name}: {v}");
    }
    let out = check("ESZ6 C5000");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (out.status.code(), &v["symbol_known"]),
        (Some(1), &serde_json::json!(false))
    );
    for name in [" ESZ6", "ESZ6 "] {
        let out = check(name);
        assert_eq!(out.status.code(), Some(2), "'{name}'");
        assert!(String::from_utf8_lossy(&out.stderr).contains("is not a valid instrument name"));
    }
}

/// `Reader::names` (what `stat` shows) names each instrument by its
/// Symbol once a definition maps it, before that by `#SecurityID`: names
/// `lookup` finds it by, never the slot's key.
#[test]
fn instruments_are_shown_by_symbol_then_security_id() {
    let mut rig = Rig::new("on_demand");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    // Books before definitions: shown by #SecurityID.
    rig.send(&venue.fill_books(t), &[0, 1]);
    let reader = crate::common::live_reader(&rig.shm);
    let shown = |reader: &Reader| -> std::collections::BTreeSet<String> {
        let names = reader.names();
        reader
            .records()
            .iter()
            .map(|r| names[&(r.feed, r.symbol.unwrap())].clone())
            .collect()
    };
    let ids: std::collections::BTreeSet<String> = venue
        .specs()
        .map(|s| format!("#{}", s.security_id))
        .collect();
    assert_eq!(shown(&reader), ids);
    rig.send(&venue.definition_loop(t), &[4]);
    let symbols: std::collections::BTreeSet<String> =
        venue.specs().map(|s| s.symbol.clone()).collect();
    assert_eq!(shown(&reader), symbols);
    for name in &symbols {
        assert!(reader.lookup("cme", name).is_some(), "{name}");
    }
}

/// Incremental packet `seq`: instrument `id`'s first entry (RptSeq 1, a
/// bid) then RptSeq 3, one ahead of its next: suspect with a book.
fn new_then_hole(seq: u32, id: i32) -> Vec<u8> {
    bids(seq, id, &[1, 3])
}

/// Incremental packet `seq`: bids at level 1 of instrument `id`, of
/// RptSeq `rpt` (a New at 1, Changes after), ending the event.
fn bids(seq: u32, id: i32, rpt: &[u32]) -> Vec<u8> {
    use tickguard::protocol::mdp3::encode::{self, BookEntry, Shape};
    use tickguard::protocol::mdp3::template::{EntryType, UpdateAction};
    let bid = |rpt_seq| BookEntry {
        price: Some(100_000_000_000),
        size: Some(1),
        security_id: id,
        rpt_seq,
        orders: Some(1),
        level: 1,
        action: if rpt_seq == 1 {
            UpdateAction::New
        } else {
            UpdateAction::Change
        },
        entry_type: EntryType::Bid,
    };
    let entries: Vec<BookEntry> = rpt.iter().map(|&r| bid(r)).collect();
    let m = encode::book(46, Shape::new(13), now_ns(), 0x80, &entries, 0);
    encode::packet(seq, now_ns(), &[m])
}

/// A loop counts as useful only when a snapshot heals: an instrument
/// healed by its own entries while the lines are joined does not keep
/// them joined past `snapshot_max_loops` loops that heal nothing.
#[test]
fn an_instrument_healed_by_its_own_entries_does_not_make_a_loop_useful() {
    // A gap timeout the fill below comes well within, however loaded the
    // machine; the lines are joined once a need lasted as long.
    let mut rig = Rig::with("on_demand", "gap_timeout_ms = 1000");
    let t = now_ns();
    let mut venue = Channel::new(3, equity_channel());
    rig.send(&venue.fill_books(t), &[0, 1]);
    assert!(!rig.snapshot_wanted());
    // An instrument the venue's loop does not carry turns suspect.
    let seq = venue.next_seq_num();
    rig.send_raw(&[new_then_hole(seq, 999_001)], 0);
    std::thread::sleep(Duration::from_millis(1_100));
    rig.settle();
    assert!(rig.snapshot_wanted(), "joined for it");
    for loop_no in 0..3u64 {
        rig.send(&venue.snapshot_loop(t + 40_000 + loop_no * 10_000), &[2, 3]);
        if loop_no == 1 {
            // Another turns suspect (its RptSeq 2 in a packet that comes
            // after the next one: published so within the gap timeout) and heals by its own entries once that packet fills
            // the gap, as a venue's RptSeq follows MsgSeqNum.
            for p in [bids(seq + 1, 999_002, &[1]), bids(seq + 3, 999_002, &[3])] {
                rig.tx.send_to(&p, rig.lines[0]).unwrap();
                rig.sent += 1;
            }
            // Both taken, and no more: the gap at seq + 2 stays open.
            let deadline = Instant::now() + Duration::from_secs(5);
            while rig.sidecar.stats().datagrams < rig.sent {
                assert!(Instant::now() < deadline, "not received");
                rig.sidecar.cycle(now_ns());
            }
            let r = reasons(&crate::common::live_reader(&rig.shm), "#999002");
            assert!(r.contains("suspect"), "{r:?}");
            rig.send_raw(&[bids(seq + 2, 999_002, &[2])], 0);
            let r = reasons(&crate::common::live_reader(&rig.shm), "#999002");
            assert!(!r.contains("suspect"), "{r:?}");
        }
    }
    assert!(
        !rig.snapshot_wanted(),
        "left after two loops healing nothing"
    );
}

/// A definition packet (template 54) of `id` named `symbol`, with
/// SecurityUpdateAction `action` (`A`, `M`, `D`).
fn definition(seq: u32, id: i32, symbol: &str, action: u8) -> Vec<u8> {
    use tickguard::protocol::mdp3::encode::{self, FeedType, Instrument, Shape};
    let d = Instrument {
        match_event_indicator: 0x80,
        tot_num_reports: Some(1),
        security_update_action: action,
        trading_status: None,
        appl_id: 310,
        security_group: "ES",
        asset: "ES",
        symbol,
        security_id: id,
        min_price_increment: Some(250_000_000),
        display_factor: 1_000_000_000,
    };
    let feeds = [FeedType {
        md_feed_type: "GBX",
        market_depth: 10,
    }];
    let m = encode::definition(54, Shape::new(13), &d, 0, &feeds);
    encode::packet(seq, now_ns(), &[m])
}

/// A Symbol that a definition moves to another instrument finds that one
/// (an empty book answers `no_quote`, as in-process), finds the first
/// again when it moves back, and finds nothing once deleted: readers
/// answer for a name as the channel maps it.
#[test]
fn a_symbol_moved_or_deleted_is_found_where_the_channel_maps_it() {
    let (mut rig, specs) = Rig::equity_defined();
    let reader = crate::common::live_reader(&rig.shm);
    let (a, name) = (specs[0].security_id, specs[0].symbol.clone());
    let slot_of = |n: &str| slot_key(&reader, n);
    assert_eq!(slot_of(&name), key_of(a));
    // An instrument no message quoted takes the Symbol: its empty slot.
    let quiet = 999_001;
    rig.send_raw(&[definition(100, quiet, &name, b'A')], 4);
    assert_eq!(slot_of(&name), key_of(quiet));
    assert_eq!(reasons(&reader, &name), "no_quote");
    let th = tickguard::verdict::Thresholds {
        stale_ns: u64::MAX / 4,
        source_ns: u64::MAX / 4,
    };
    let f = rig.feed();
    assert_eq!(f.verdict(&name, th, now_ns()).to_string(), "no_quote");
    // Back to the first.
    rig.send_raw(&[definition(101, a, &name, b'M')], 4);
    assert_eq!(slot_of(&name), key_of(a));
    assert_ne!(reasons(&reader, &name), "no_quote");
    // Deleted: the name finds nothing; `#SecurityID` still answers.
    rig.send_raw(&[definition(102, a, &name, b'D')], 4);
    assert_eq!(slot_of(&name), None);
    assert_eq!(reasons(&reader, &name), "no_quote");
    assert_ne!(reasons(&reader, &format!("#{a}")), "no_quote");
    let names = reader.names();
    assert_eq!(
        names[&(0, tickguard::protocol::mdp3::publish::key(a))],
        format!("#{a}")
    );
}

/// A gateway's handle held while definitions move its Symbol: found by
/// the Symbol, it answers `no_quote` (and reads no quote) once the
/// channel gives the Symbol to another quoted instrument, with no `D` for
/// the first, which still quotes; a handle found by `#SecurityID` keeps
/// answering for its instrument. The Symbol moved back, a handle from
/// before either move still answers `no_quote` (the name left its slot
/// since it was found), as does one found at the second instrument;
/// fresh lookups follow the name each time. Deleted, the Symbol's handle
/// answers `no_quote` where `#SecurityID` answers `closed`.
#[test]
fn a_handle_held_across_a_symbol_move_answers_no_quote() {
    let (mut rig, specs) = Rig::equity_defined();
    let reader = crate::common::live_reader(&rig.shm);
    let (a, b, name) = (
        specs[0].security_id,
        specs[1].security_id,
        specs[0].symbol.clone(),
    );
    let check = |h: &tickguard::Handle| reader.check(h, now_ns()).reasons.to_string();
    let (by_name, by_id) = (
        reader.lookup("cme", &name).unwrap(),
        reader.lookup("cme", &format!("#{a}")).unwrap(),
    );
    let quoted = check(&by_id);
    assert_ne!(quoted, "no_quote");
    assert_eq!(check(&by_name), quoted);
    // To a second quoted instrument, with no `D` for the first.
    rig.send_raw(&[definition(100, b, &name, b'M')], 4);
    assert_eq!(check(&by_name), "no_quote", "{name} left its instrument");
    assert_eq!(reader.record(&by_name), None);
    assert_eq!(check(&by_id), quoted, "#{a} unmoved");
    let at_b = reader.lookup("cme", &name).unwrap();
    assert_eq!(slot_key(&reader, &name), key_of(b));
    let b_quoted = check(&at_b);
    assert_ne!(b_quoted, "no_quote", "#{b}'s book by the name");
    // Back to the first.
    rig.send_raw(&[definition(101, a, &name, b'M')], 4);
    assert_eq!(check(&by_name), "no_quote", "found before it left");
    assert_eq!(check(&at_b), "no_quote", "found at the second");
    assert_eq!(
        reader
            .check(&reader.lookup("cme", &format!("#{b}")).unwrap(), now_ns())
            .reasons
            .to_string(),
        b_quoted
    );
    let again = reader.lookup("cme", &name).unwrap();
    assert_eq!(check(&again), quoted, "a fresh lookup follows it back");
    assert_eq!(check(&by_id), quoted);
    // Deleted: the Symbol withdrawn, its handle answers no_quote, not the
    // deleted instrument's `closed` its `#SecurityID` answers.
    rig.send_raw(&[definition(102, a, &name, b'D')], 4);
    assert_eq!(check(&again), "no_quote", "withdrawn");
    assert!(reader.lookup("cme", &name).is_none());
    assert_eq!(check(&by_id), "closed");
}

/// A definition whose Symbol is spelled as another instrument's
/// `#SecurityID` name (forged, or corrupt) does not take that name: a
/// reader looking up `#SecurityID` finds that instrument's slot, as the
/// in-process check does, never the forged one's; the forged instrument
/// loses its old Symbol and keeps its own `#SecurityID`.
#[test]
fn a_symbol_spelled_as_a_security_id_never_takes_that_name() {
    let (mut rig, specs) = Rig::equity_defined();
    let reader = crate::common::live_reader(&rig.shm);
    let (victim, forged) = (&specs[0], &specs[1]);
    let victim_id = format!("#{}", victim.security_id);
    let slot_of = |n: &str| slot_key(&reader, n);
    assert_eq!(slot_of(&victim_id), key_of(victim.security_id));
    let anomalies = counter(&reader, "anomalies");
    rig.send_raw(&[definition(100, forged.security_id, &victim_id, b'M')], 4);
    assert_eq!(slot_of(&victim_id), key_of(victim.security_id));
    assert_eq!(slot_of(&forged.symbol), None);
    let own = format!("#{}", forged.security_id);
    assert_eq!(slot_of(&own), key_of(forged.security_id));
    assert_eq!(counter(&reader, "anomalies"), anomalies + 1);
    let f = rig.feed();
    assert_eq!(
        f.find(&victim_id).map(|e| e.security_id),
        Some(victim.security_id)
    );
    assert_eq!(f.symbol_index(&victim_id), None);
    // A byte no venue's Symbol holds: no Symbol either (its text is not
    // the bytes a reader's name compares).
    let third = &specs[2];
    rig.send_raw(&[definition(101, third.security_id, "ESZ6\u{e9}", b'M')], 4);
    assert_eq!(slot_of(&third.symbol), None);
    assert_eq!(slot_of("ESZ6\u{e9}"), None);
    assert_eq!(counter(&reader, "anomalies"), anomalies + 2);
}

/// A definition giving a Symbol to a SecurityID past `max_instruments`
/// (not kept): the Symbol no longer finds the instrument it named, in
/// process and through the publication (`no_quote`, not that one's book
/// under a name that now means another); its `#SecurityID` still does.
#[test]
fn a_symbol_given_to_an_instrument_not_kept_finds_nothing() {
    let (mut rig, specs) = Rig::equity_defined_with("max_instruments = 5");
    let reader = crate::common::live_reader(&rig.shm);
    let (kept, name) = (specs[0].security_id, specs[0].symbol.clone());
    assert_eq!(slot_key(&reader, &name), key_of(kept));
    rig.send_raw(&[definition(100, 999_009, &name, b'A')], 4);
    assert_eq!(rig.feed().instruments().len(), 5);
    assert_eq!(slot_key(&reader, &name), None);
    assert!(rig.feed().find(&name).is_none());
    assert_eq!(slot_key(&reader, &format!("#{kept}")), key_of(kept));
}

/// With the table's every slot taken and its directory full (two names a
/// slot: each instrument's `#SecurityID` and Symbol), a Symbol moved to
/// another instrument cannot be entered for it: counted once in
/// `table_full_symbols` (which the table-full alert watches), however
/// often the instrument is published again, while `#SecurityID` still
/// answers.
#[test]
fn a_symbol_the_full_directory_refuses_is_counted_once() {
    let mut rig = Rig::with("on_demand", "[state]\ncapacity = 5");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    assert_eq!(venue.specs().count(), 5, "one slot each");
    rig.send(&venue.definition_loop(t), &[4]);
    rig.send(&venue.fill_books(t), &[0, 1]);
    let specs: Vec<_> = venue.specs().cloned().collect();
    let full = |rig: &Rig| rig.sidecar.handler().feeds()[0].counters.table_full;
    assert_eq!(full(&rig), 0, "every instrument has its slot and names");
    // The second instrument takes the first one's Symbol.
    let (b, name) = (specs[1].security_id, specs[0].symbol.clone());
    rig.send_raw(&[definition(100, b, &name, b'M')], 4);
    rig.events(&mut venue, t, 1..20u64);
    assert_eq!(full(&rig), 1, "refused once, published again since");
    let reader = crate::common::live_reader(&rig.shm);
    assert_ne!(reasons(&reader, &format!("#{b}")), "no_quote");
    // The name's entry in force still finds the first instrument's slot,
    // whose book the name no longer means: never `ok` by that name (the
    // slot is suspect while the stale entry finds it).
    let a = specs[0].security_id;
    let slot = |n: &str| reader.lookup("cme", n).map(|h| h.slot());
    assert_eq!(
        slot(&name),
        slot(&format!("#{a}")),
        "the entry in force is the first instrument's"
    );
    let by_name = reasons(&reader, &name);
    assert!(by_name.contains("suspect"), "{name}: {by_name}");
    // The other instruments are untouched.
    for s in &specs[2..] {
        assert_eq!(reasons(&reader, &s.symbol), "ok", "{}", s.symbol);
    }
}

/// A Symbol deleted once the directory is full cannot be withdrawn: it
/// still finds its instrument, which is published suspect while it does
/// (counted once); the definition naming it again clears the mark.
#[test]
fn a_symbol_the_full_directory_cannot_withdraw_marks_its_instrument() {
    let mut rig = Rig::with("on_demand", "[state]\ncapacity = 5");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    rig.send(&venue.definition_loop(t), &[4]);
    rig.send(&venue.fill_books(t), &[0, 1]);
    let specs: Vec<_> = venue.specs().cloned().collect();
    let full = |rig: &Rig| rig.sidecar.handler().feeds()[0].counters.table_full;
    let (a, name) = (specs[0].security_id, specs[0].symbol.clone());
    rig.send_raw(&[definition(100, a, &name, b'D')], 4);
    rig.events(&mut venue, t, 1..20u64);
    assert_eq!(full(&rig), 1);
    let reader = crate::common::live_reader(&rig.shm);
    let by_name = reasons(&reader, &name);
    assert!(by_name.contains("suspect"), "{name}: {by_name}");
    for s in &specs[1..] {
        assert_eq!(reasons(&reader, &s.symbol), "ok", "{}", s.symbol);
    }
    // The gauge counts the slot it shows suspect.
    assert_eq!(counter(&reader, "instruments_suspect"), 1);
    rig.send_raw(&[definition(101, a, &name, b'A')], 4);
    rig.events(&mut venue, t, 20..30u64);
    assert_eq!(reasons(&reader, &name), "ok", "named again");
    assert_eq!(full(&rig), 1);
    assert_eq!(counter(&reader, "instruments_suspect"), 0);
}

/// A Symbol moved to another instrument and deleted there within one
/// receive batch finds nothing once published (withdrawn, the directory
/// having room), as a replay answers, and a handle found by it before
/// answers `no_quote`; its first instrument, which the name no longer
/// means, is not marked; the one deleted answers `closed`.
#[test]
fn a_symbol_moved_and_deleted_in_one_batch_finds_nothing() {
    let mut rig = Rig::new("on_demand");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    rig.send(&venue.definition_loop(t), &[4]);
    rig.send(&venue.fill_books(t), &[0, 1]);
    let specs: Vec<_> = venue.specs().cloned().collect();
    let (a, b, name) = (
        specs[0].security_id,
        specs[1].security_id,
        specs[0].symbol.clone(),
    );
    let reader = crate::common::live_reader(&rig.shm);
    let held = reader.lookup("cme", &name).unwrap();
    assert_eq!(reader.check(&held, now_ns()).reasons.to_string(), "ok");
    rig.send_raw(
        &[
            definition(100, b, &name, b'M'),
            definition(101, b, &name, b'D'),
        ],
        4,
    );
    rig.events(&mut venue, t, 1..20u64);
    assert!(reader.lookup("cme", &name).is_none(), "{name} withdrawn");
    let held = reader.check(&held, now_ns());
    assert_eq!(held.reasons.to_string(), "no_quote", "a handle held");
    assert_eq!(reasons(&reader, &format!("#{a}")), "ok");
    assert_eq!(reasons(&reader, &format!("#{b}")), "closed");
}

/// Live as in a replay, a datagram of a packet header alone (no message)
/// on an incremental line is rejected as `short` and counted, and moves
/// no MsgSeqNum.
#[test]
fn a_header_alone_is_rejected_live() {
    let mut rig = Rig::new("on_demand");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    rig.send(&venue.fill_books(t), &[0, 1]);
    let before = rig.sidecar.handler().feeds()[0].counters.rejected;
    let next = rig.feed().sequence().high();
    let seq = venue.next_seq_num();
    let header = tickguard::protocol::mdp3::encode::packet(seq, t, &[]);
    assert_eq!(header.len(), 12);
    rig.send_raw(&[header], 0);
    let feed = &rig.sidecar.handler().feeds()[0];
    assert_eq!(feed.counters.rejected, before + 1);
    assert_eq!(rig.feed().sequence().high(), next);
}

/// With fewer slots than instruments, the instrument left without one
/// is counted once in `table_full_symbols`, however often it trades, and
/// answers nothing from the table; the others keep theirs.
#[test]
fn an_instrument_the_full_table_refuses_is_counted_once() {
    let mut rig = Rig::with("on_demand", "[state]\ncapacity = 4");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    rig.send(&venue.fill_books(t), &[0, 1]);
    // Settled: idle for longer than the heartbeat (1 ms) that publishes
    // the counters.
    rig.events(&mut venue, t, 1..40u64);
    let reader = crate::common::live_reader(&rig.shm);
    assert_eq!(counter(&reader, "table_full_symbols"), 1);
    let slotted = venue
        .specs()
        .filter(|s| {
            reader
                .lookup("cme", &format!("#{}", s.security_id))
                .is_some()
        })
        .count();
    assert_eq!(slotted, 4);
}

/// A `definitions` file is read when the receiver starts: every
/// instrument answers by its Symbol from its first book, before any
/// definition line speaks; a file that cannot be read stops the start,
/// naming the key.
#[test]
fn a_definitions_file_names_the_instruments_from_the_start() {
    use tickguard::capture::link::Link;
    use tickguard::capture::write::{CaptureWriter, Format};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("defs.pcap");
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    let file = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let mut w = CaptureWriter::new(file, Format::PcapNanos, Link::Ethernet).unwrap();
    let (src, dst) = (
        "10.3.3.3:5000".parse().unwrap(),
        "10.1.1.1:9".parse().unwrap(),
    );
    for d in venue.definition_loop(t) {
        w.write_udp(t, src, dst, &d.bytes).unwrap();
    }
    w.finish().unwrap();
    let mut rig = Rig::with(
        "on_demand",
        &format!("definitions = \"{}\"", path.display()),
    );
    let n = venue.specs().count() as u64;
    assert_eq!(rig.feed().counters().definitions, n);
    rig.send(&venue.fill_books(t), &[0, 1]);
    let reader = crate::common::live_reader(&rig.shm);
    for spec in venue.specs() {
        let answer = reasons(&reader, &spec.symbol);
        assert!(
            answer == "ok" || answer == "invalid_price",
            "{}: {answer}",
            spec.symbol
        );
    }
    let missing = format!(
        "definitions = \"{}\"",
        dir.path().join("none.pcap").display()
    );
    let e = Rig::try_with("on_demand", &missing).err().expect("refused");
    assert!(format!("{e:#}").contains("definitions"), "{e:#}");
}

/// A per-instrument override reaches the publication a gateway checks,
/// by Symbol and by `#SecurityID`, also when the Symbol is mapped after
/// the instrument took its slot; the others keep the feed's thresholds.
#[test]
fn an_override_reaches_the_published_slot_once_its_symbol_is_known() {
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    let specs: Vec<_> = venue.specs().cloned().collect();
    let (one, other) = (&specs[0], &specs[1]);
    let keys = format!(
        "[[feed.symbol]]\nname = \"{}\"\nstale_threshold_ms = 1\n",
        one.symbol
    );
    let mut rig = Rig::with("on_demand", &keys);
    // Books first (slots under `#SecurityID`), then the definitions.
    rig.send(&venue.fill_books(t), &[0, 1]);
    rig.send(&venue.definition_loop(t), &[4]);
    std::thread::sleep(Duration::from_millis(5));
    let reader = crate::common::live_reader(&rig.shm);
    let id = format!("#{}", one.security_id);
    for name in [one.symbol.as_str(), id.as_str()] {
        assert!(reasons(&reader, name).contains("stale"), "{name}");
    }
    assert!(!reasons(&reader, &other.symbol).contains("stale"));
}

/// A Symbol with an override moved to another instrument while the
/// directory is full (the name's entry cannot follow it): the limits go
/// with the Symbol all the same, so a check by `#SecurityID` answers as
/// in-process: the instrument that took it is held to the override; the
/// one it left (whose definition may still say it), to the feed's.
/// Whether each of `names` reads `stale` from the publication as the
/// in-process verdict (its limits as `Feed::thresholds` gives them) does,
/// a few ms after the last publish.
fn limits_agree(rig: &Rig, reader: &Reader, names: &[&str]) {
    std::thread::sleep(Duration::from_millis(5));
    let config = &rig.sidecar.config().feeds[0];
    let now = now_ns();
    for name in names {
        let th = rig.feed().thresholds(config, name);
        let inside = rig.feed().verdict(name, th, now).to_string();
        assert_eq!(
            reasons(reader, name).contains("stale"),
            inside.contains("stale"),
            "{name}: in-process {inside}"
        );
    }
}

/// A Symbol with an override that leaves an instrument untouched by the
/// batch (moved on twice in one batch, or given to an instrument past
/// `max_instruments`) leaves it held to its own limits, live as in
/// process: only the Symbol's record of whom it left says so.
#[test]
fn an_override_leaves_an_instrument_the_batch_did_not_touch() {
    for how in ["twice", "not kept"] {
        // (The channel `equity_defined_with` defines.)
        let name = Channel::new(7, equity_channel())
            .specs()
            .next()
            .unwrap()
            .symbol
            .clone();
        let keys = format!(
            "max_instruments = 5\n[[feed.symbol]]\nname = \"{name}\"\nstale_threshold_ms = 1\n"
        );
        let (mut rig, specs) = Rig::equity_defined_with(&keys);
        let reader = crate::common::live_reader(&rig.shm);
        let ids: Vec<String> = specs
            .iter()
            .map(|s| format!("#{}", s.security_id))
            .collect();
        std::thread::sleep(Duration::from_millis(5));
        assert!(reasons(&reader, &ids[0]).contains("stale"), "{how}");
        let moves = match how {
            "twice" => vec![
                definition(100, specs[1].security_id, &name, b'M'),
                definition(101, specs[2].security_id, &name, b'M'),
            ],
            _ => vec![definition(100, 999_009, &name, b'A')],
        };
        rig.send_raw(&moves, 4);
        let names: Vec<&str> = ids.iter().map(String::as_str).collect();
        limits_agree(&rig, &reader, &names);
        assert!(!reasons(&reader, &ids[0]).contains("stale"), "{how}");
    }
}

#[test]
fn an_override_follows_its_symbol_when_the_directory_is_full() {
    an_override_follows_its_symbol(true);
}

/// As [`an_override_follows_its_symbol_when_the_directory_is_full`], the
/// directory with room: the name's entry follows the Symbol, and the
/// instrument it left (untouched meanwhile) is held to the feed's limits.
#[test]
fn an_override_follows_its_symbol_into_the_directory() {
    an_override_follows_its_symbol(false);
}

fn an_override_follows_its_symbol(directory_full: bool) {
    let t = now_ns();
    let mut venue = Channel::new(7, equity_channel());
    let specs: Vec<_> = venue.specs().cloned().collect();
    let capacity = if directory_full {
        "[state]\ncapacity = 5\n"
    } else {
        ""
    };
    let keys = format!(
        "[[feed.symbol]]\nname = \"{}\"\nstale_threshold_ms = 1\n{capacity}",
        specs[0].symbol
    );
    let mut rig = Rig::with("on_demand", &keys);
    rig.send(&venue.definition_loop(t), &[4]);
    rig.send(&venue.fill_books(t), &[0, 1]);
    let (a, b) = (
        format!("#{}", specs[0].security_id),
        format!("#{}", specs[1].security_id),
    );
    std::thread::sleep(Duration::from_millis(5));
    let reader = crate::common::live_reader(&rig.shm);
    assert!(reasons(&reader, &a).contains("stale"));
    assert!(!reasons(&reader, &b).contains("stale"));
    let agree = |rig: &Rig| limits_agree(rig, &reader, &[&a, &b]);
    // The second instrument takes the first one's Symbol (a full
    // directory keeps the name's entry on the first): at once, before
    // anything touches the first, each is held to its own limits.
    rig.send_raw(
        &[definition(
            100,
            specs[1].security_id,
            &specs[0].symbol,
            b'M',
        )],
        4,
    );
    agree(&rig);
    rig.events(&mut venue, t, 1..20u64);
    let full = u64::from(directory_full);
    assert_eq!(rig.sidecar.handler().feeds()[0].counters.table_full, full);
    agree(&rig);
    assert!(reasons(&reader, &b).contains("stale"));
    // The first, whose definition still says the Symbol, no longer has
    // it: the override is the second's alone.
    assert!(!reasons(&reader, &a).contains("stale"));
    // The first's definition then turns blank (no mapping moves: the
    // second holds the name); the second is renamed again. Both are
    // left without the override.
    rig.send_raw(&[definition(101, specs[0].security_id, "", b'M')], 4);
    rig.send_raw(&[definition(102, specs[1].security_id, "ZZZ9", b'M')], 4);
    rig.events(&mut venue, t, 20..40u64);
    agree(&rig);
    assert!(!reasons(&reader, &a).contains("stale"));
    assert!(!reasons(&reader, &b).contains("stale"));
}

/// Past `max_instruments` a SecurityID is ignored, and the refusals are
/// counted where an operator sees them (the published counters).
#[test]
fn instruments_past_the_most_kept_are_counted_where_an_operator_sees_them() {
    let (rig, _, venue) = Rig::equity_filled("max_instruments = 3");
    let reader = crate::common::live_reader(&rig.shm);
    assert_eq!(rig.feed().instruments().len(), 3);
    assert!(counter(&reader, "instruments_refused") > 0);
    let published = venue
        .specs()
        .filter(|s| {
            reader
                .lookup("cme", &format!("#{}", s.security_id))
                .is_some()
        })
        .count();
    assert!(published <= 3, "{published}");
}

/// Every channel counter the publication carries is the channel's own
/// value, each apart (the flag counts over the published instruments):
/// after losses filled by the other line, losses on both, an instrument
/// suspect, one overflowed and a ChannelReset refilled.
#[test]
fn published_counters_are_the_channels_own() {
    let (mut rig, t, mut venue) = Rig::equity_filled("max_cached = 2");
    for k in 0..10u64 {
        // Lost on A, its copy on B late: a gap filled.
        let first = venue.next_event(t + k * 2000);
        let second = venue.next_event(t + k * 2000 + 1000);
        // Sent together: settling in between could outlast the gap
        // timeout.
        for (d, to) in [(&second, 0), (&second, 1), (&first, 1)] {
            for x in d {
                rig.tx.send_to(&x.bytes, rig.lines[to]).unwrap();
                rig.sent += 1;
            }
        }
        rig.settle();
    }
    lose_an_event_on_both_lines(&mut rig, &mut venue, t + 40_000);
    let seq = venue.next_seq_num();
    rig.send_raw(&[new_then_hole(seq, 999_001)], 0);
    rig.send_raw(&[bids(seq + 1, 999_002, &[1, 3, 4, 5])], 0);
    // A packet sent twice on one line: a duplicate, not a line copy.
    rig.send_raw(&[bids(seq + 2, 999_003, &[1])], 0);
    // Settled: idle for longer than the heartbeat (1 ms) that publishes
    // the counters.
    rig.send_raw(&[bids(seq + 2, 999_003, &[1])], 0);
    let reader = crate::common::live_reader(&rig.shm);
    let f = rig.feed();
    let (n, q) = (f.counters(), f.sequence().counters());
    let published = |flag: fn(&tickguard::protocol::mdp3::feed::Entry) -> bool| {
        f.instruments()
            .iter()
            .filter(|e| {
                flag(e)
                    && reader
                        .lookup("cme", &format!("#{}", e.security_id))
                        .is_some()
            })
            .count() as u64
    };
    let want = [
        ("next", f.sequence().high().unwrap()),
        ("gaps_open", f.sequence().gaps_open() as u64),
        ("recovered", q.recovered),
        ("packet_gaps", q.packet_gaps),
        ("packets_lost", q.packets_lost),
        ("gaps_expired", q.gaps_given_up),
        ("sequence_restarts", q.sequence_restarts),
        ("stale_sequence", q.stale_sequence),
        ("channel_resets", n.channel_resets),
        ("anomalies", n.anomalies),
        ("snapshots_applied", n.snapshots_applied),
        ("snapshots_ignored", n.snapshots_ignored),
        ("cache_overflows", n.cache_overflows),
        ("cached", f.cached() as u64),
        ("definitions", n.definitions),
        ("instruments_refused", n.instruments_refused),
        (
            "instruments_suspect",
            published(|e| e.instrument.seq.suspect()),
        ),
        (
            "instruments_unverified",
            published(|e| e.instrument.seq.unverified()),
        ),
        (
            "instruments_overflowed",
            published(|e| e.instrument.seq.overflowed()),
        ),
    ];
    for (name, value) in want {
        assert_eq!(counter(&reader, name), value, "{name}");
    }
    // The losses above make these more than 0, so a swap shows.
    for name in [
        "recovered",
        "packets_lost",
        "instruments_suspect",
        "instruments_overflowed",
        "cache_overflows",
    ] {
        assert!(counter(&reader, name) > 0, "{name}");
    }
    assert_ne!(
        counter(&reader, "instruments_suspect"),
        counter(&reader, "instruments_unverified")
    );
    let c = &rig.sidecar.handler().feeds()[0].counters;
    assert_eq!(c.duplicates - c.line_copies, 1, "{c:?}");
}
