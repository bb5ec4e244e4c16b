//! An ITCH feed with `glimpse` whose handler publishes into a publication,
//! driven as a replay drives it: datagrams, and snapshot connections as
//! the TCP segments a capture holds. What `stat` and the metrics read of
//! its snapshots comes from the engine itself.

use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tickguard::capture::link::Tcp;
use tickguard::config::Config;
use tickguard::engine::Segment;
use tickguard::handler::Handler;
use tickguard::protocol::itch50::message::encode;
use tickguard::protocol::itch50::{soup, PacketBuilder, Session, Side};
use tickguard::protocol::publication_feeds;
use tickguard::shm::Publication;
use tickguard::state::StateTable;
use tickguard::symbol::Symbol;

/// The venue's session.
pub const SESSION: Session = Session(*b"20260105XA");
/// 2026-01-05 14:30:00 UTC.
pub const T0: u64 = 1_767_623_400_000_000_000;
pub const MS: u64 = 1_000_000;

/// Feed `nq` (itch50, `glimpse`, joins past 10 sequences) of a
/// publication at `path`, and the time of the last thing it took.
pub struct Venue {
    pub config: Config,
    pub path: PathBuf,
    pub publication: Arc<Publication>,
    pub handler: Handler,
    pub t: u64,
    local: SocketAddrV4,
    seq: u32,
}

impl Venue {
    pub fn new(path: &Path) -> Venue {
        let config = Config::parse(
            &format!(
                "[sidecar]\nshm_path = \"{}\"\n\
                 [[feed]]\nname = \"nq\"\nprotocol = \"itch50\"\nlines = [\"239.9.9.1:9000\"]\n\
                 stale_threshold_ms = 1000\nsource_threshold_ms = 1000\njoin_gap_max = 10\n\
                 glimpse = \"127.0.0.1:18100\"\nglimpse_user = \"tgsim\"\n\
                 glimpse_password_env = \"TG_TEST_NEVER_READ\"\n",
                path.display()
            ),
            "test.toml",
        )
        .unwrap();
        let publication = Arc::new(
            Publication::create(
                path,
                0o600,
                config.capacity,
                &publication_feeds(&config),
                T0,
                1_000_000,
            )
            .unwrap(),
        );
        publication.ready();
        let handler = Handler::with_table(&config, StateTable::shared(publication.clone()), 1024);
        Venue {
            config,
            path: path.to_path_buf(),
            publication,
            handler,
            t: T0,
            local: "127.0.0.1:40000".parse().unwrap(),
            seq: 1_000,
        }
    }

    fn tick(&mut self) -> u64 {
        self.t += 10_000;
        self.t
    }

    /// The datagrams of sequences `qs`, 10 µs apart (the first of a
    /// session past 10 triggers a snapshot).
    pub fn datagrams(&mut self, qs: std::ops::Range<u64>) {
        for q in qs {
            let mut b = PacketBuilder::new(SESSION, q);
            b.message(&message(q));
            let t = self.tick();
            let _ = self.handler.on_datagram_line(0, 0, &b.finish(), t);
        }
    }

    fn segment(&mut self, from_server: bool, flags: u8, payload: &[u8]) {
        let segment = Segment {
            local: self.local,
            from_server,
            seq: if from_server { self.seq } else { 7 },
            flags,
            payload,
        };
        let t = self.tick();
        self.handler.on_segment(0, &segment, t);
        if from_server {
            self.seq = self.seq.wrapping_add(payload.len() as u32);
        }
    }

    /// A snapshot connection from a new local port: our SYN, the server's
    /// `bytes` in one segment, its FIN; 10 µs apart.
    pub fn connection(&mut self, bytes: &[u8]) {
        self.local.set_port(self.local.port() + 1);
        self.segment(false, Tcp::SYN, b"");
        self.segment(true, Tcp::ACK | Tcp::PSH, bytes);
        self.segment(true, Tcp::FIN | Tcp::ACK, b"");
    }

    /// A receive cycle's end at the time of the last thing taken, as the
    /// sidecar's at a heartbeat: the feed catches up (its counters copied),
    /// then the counters and the heartbeat are published.
    pub fn publish(&mut self) {
        self.handler.upkeep(self.t);
        let p = &self.publication;
        p.write_counters(|| self.handler.publish_counters());
        p.heartbeat(self.t);
    }
}

fn aaa() -> Symbol {
    Symbol::parse("AAA").unwrap()
}

/// The day's message of sequence `q`: an order added to AAA (locate 1).
pub fn message(q: u64) -> Vec<u8> {
    encode::add_order(
        1,
        34_200_000_000_000 + q,
        q,
        Side::Buy,
        100,
        aaa(),
        1_000_000,
        None,
    )
}

/// What GLIMPSE answers with N = `n`: Login Accepted, AAA's directory and
/// one order (two `S` packets), End of Snapshot.
pub fn spin(n: u64) -> Vec<u8> {
    spin_of(n, 1)
}

/// [`spin`] with `orders` orders (`orders + 1` `S` packets).
pub fn spin_of(n: u64, orders: u64) -> Vec<u8> {
    let mut out = soup::login_accepted(&SESSION.0, 1).to_vec();
    soup::sequenced(
        &encode::stock_directory(1, 34_200_000_000_000, aaa()),
        &mut out,
    );
    for q in n - orders..n {
        soup::sequenced(&message(q), &mut out);
    }
    soup::sequenced(format!("G{n:>20}").as_bytes(), &mut out);
    out
}

/// A Login Rejected: session not available.
pub fn not_available() -> [u8; 4] {
    soup::login_rejected(soup::SESSION_NOT_AVAILABLE)
}
