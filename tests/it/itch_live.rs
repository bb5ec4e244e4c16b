//! The live ITCH receiver on loopback, driven cycle by cycle: the recovery
//! channel takes answers from the configured server only.

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};
use tickguard::config::Config;
use tickguard::protocol::itch50::mold::{PacketBuilder, Request};
use tickguard::protocol::itch50::{message, Session};
use tickguard::sidecar::Sidecar;
use tickguard::time::now_ns;

const SESSION: Session = Session(*b"LIVE000001");

/// A System Event message (`S`, code `Q`): 12 bytes, locate 0.
fn system_event(code: u8) -> Vec<u8> {
    let m = vec![b'S', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, code];
    assert_eq!(message::check(&m), Ok(()));
    m
}

fn packet(seq: u64, code: u8) -> Vec<u8> {
    let mut b = PacketBuilder::new(SESSION, seq);
    b.message(&system_event(code));
    b.finish()
}

fn port(s: &UdpSocket) -> SocketAddr {
    s.local_addr().unwrap()
}

/// Runs the sidecar's cycles until `done` or 10 s.
fn cycle_until(sidecar: &mut Sidecar, mut done: impl FnMut(&Sidecar) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done(sidecar) {
        assert!(Instant::now() < deadline, "timed out");
        sidecar.cycle(now_ns());
    }
}

fn gaps(s: &Sidecar) -> usize {
    s.handler().feeds()[0]
        .engine()
        .itch()
        .unwrap()
        .sequencer()
        .gaps_open()
}

/// A sidecar with one ITCH feed on a loopback line, re-requesting from
/// `server` (its `recovery_listen`: `listen`, or the default), which has
/// seen sequence 1, then 3; and the server's re-request for 2, with the
/// address it came from.
fn with_a_gap_asked_for(
    server: &UdpSocket,
    listen: Option<SocketAddr>,
    shm: &str,
) -> (Sidecar, SocketAddr) {
    let line = SocketAddr::V4(crate::common::free_addr());
    let listen = listen.map_or(String::new(), |l| format!("recovery_listen = \"{l}\"\n"));
    let cfg = Config::parse(
        &format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\n\
             [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"{line}\"]\n\
             recovery = \"{}\"\n{listen}gap_timeout_ms = 60000\n\
             stale_threshold_ms = 1000\nsource_threshold_ms = 1000\n",
            port(server)
        ),
        "test",
    )
    .unwrap();
    let mut sidecar = Sidecar::start(&cfg).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(&packet(1, b'O'), line).unwrap();
    tx.send_to(&packet(3, b'Q'), line).unwrap();
    cycle_until(&mut sidecar, |s| {
        s.handler().feeds()[0].counters.packets == 2
    });
    assert_eq!(gaps(&sidecar), 1);
    let mut buf = [0u8; 64];
    server
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let (n, from) = server.recv_from(&mut buf).unwrap();
    let request = Request::decode(&buf[..n]).expect("a re-request");
    assert_eq!(
        (request.session, request.sequence, request.count),
        (SESSION, 2, 1)
    );
    (sidecar, from)
}

#[test]
fn a_forged_recovery_answer_is_not_taken_and_the_servers_is() {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let listen = SocketAddr::V4(crate::common::free_addr());
    let shm = format!("/dev/shm/tickguard-itch-live-{}", std::process::id());
    let (mut sidecar, from) = with_a_gap_asked_for(&server, Some(listen), &shm);
    assert_eq!(from, listen);

    // A forged answer from anyone else to the recovery port, an end of
    // messages (which would close the feed's hours): read, counted as
    // another's, not taken.
    let forger = UdpSocket::bind("127.0.0.1:0").unwrap();
    forger.send_to(&packet(2, b'C'), listen).unwrap();
    let reader = crate::common::live_reader(&shm);
    let wrong = tickguard_reader::layout::counter::CHANNEL_WRONG_SOURCE;
    cycle_until(&mut sidecar, |_| reader.counter(0, wrong) == Some(1));
    assert_eq!(gaps(&sidecar), 1, "the forged answer filled nothing");
    assert_eq!(sidecar.handler().feeds()[0].counters.packets, 2);

    // The server's answer, a start of system hours, fills the gap: 1 'O'
    // (closed), 2 'S' (open), 3 'Q' (no change) leave the hours open,
    // which the forged 'C' in its place would have left closed.
    server.send_to(&packet(2, b'S'), from).unwrap();
    cycle_until(&mut sidecar, |s| gaps(s) == 0);
    let it = sidecar.handler().feeds()[0].engine().itch().unwrap();
    assert_eq!(it.sequencer().counters().recovered, 1);
    assert_eq!(it.sequencer().next(), Some(4));
    assert_eq!(it.hours(), tickguard::protocol::itch50::feed::Hours::Open);
    assert_eq!(reader.counter(0, wrong), Some(1));
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

#[test]
fn without_recovery_listen_requests_go_from_an_ephemeral_port_that_takes_the_answer() {
    let server = UdpSocket::bind("127.0.0.1:0").unwrap();
    let shm = format!("/dev/shm/tickguard-itch-live-eph-{}", std::process::id());
    let (mut sidecar, from) = with_a_gap_asked_for(&server, None, &shm);
    assert_ne!(from.port(), 0);
    server.send_to(&packet(2, b'S'), from).unwrap();
    cycle_until(&mut sidecar, |s| gaps(s) == 0);
    let it = sidecar.handler().feeds()[0].engine().itch().unwrap();
    assert_eq!(it.sequencer().counters().recovered, 1);
    drop(sidecar);
    crate::common::remove_publication(&shm);
}

/// Behind on its receives (a burst, a busy core), the receiver still gives
/// a copy that arrived by a gap's deadline its chance to fill it: gaps are
/// given up at the merge horizon, never past a datagram still waiting to
/// be applied, as replay of the same traffic gives them up. Here, one
/// datagram a receive: line A's 1 and 3 (a gap at 2, 1 s to fill it: a
/// sender preempted between the two sends does not miss it), line B's
/// copy of 2 right after, and the receiver 1.3 s late.
#[test]
fn a_copy_in_time_fills_its_gap_however_late_the_receiver_is() {
    let (a, b) = (
        SocketAddr::V4(crate::common::free_addr()),
        SocketAddr::V4(crate::common::free_addr()),
    );
    let shm = format!("/dev/shm/tickguard-itch-late-{}", std::process::id());
    let cfg = Config::parse(
        &format!(
            "[metrics]\nenabled = false\n[sidecar]\nshm_path = \"{shm}\"\nbatch = 1\n\
             [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"{a}\", \"{b}\"]\n\
             gap_timeout_ms = 1000\nstale_threshold_ms = 1000\nsource_threshold_ms = 1000\n"
        ),
        "test",
    )
    .unwrap();
    let mut sidecar = Sidecar::start(&cfg).unwrap();
    let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
    tx.send_to(&packet(1, b'O'), a).unwrap();
    tx.send_to(&packet(3, b'Q'), a).unwrap();
    tx.send_to(&packet(2, b'Q'), b).unwrap();
    std::thread::sleep(Duration::from_millis(1_300));
    cycle_until(&mut sidecar, |s| {
        s.handler().feeds()[0].counters.packets == 3
    });
    let c = &sidecar.handler().feeds()[0].counters;
    assert_eq!((c.ticks_lost, c.duplicates), (0, 0), "{c:?}");
    assert_eq!(gaps(&sidecar), 0);
    drop(sidecar);
    let _ = std::fs::remove_file(&shm);
}
