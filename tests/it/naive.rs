//! The "Live receive" row's comparison (`benches/naive_tokio.rs`, a
//! straightforward tokio implementation of SQF's rules) counts as
//! tickguard's handler does, so the row compares like with like.

#[path = "../../benches/naive_tokio.rs"]
mod naive_tokio;

use naive_tokio::{Feed, Kind};
use tickguard::config::Config;
use tickguard::handler::Handler;
use tickguard::protocol::sqf::PacketBuilder;
use tickguard::symbol::Symbol;

/// A tiny sequence with gaps, a duplicate, a revealing heartbeat, an
/// invalid price and a snapshot: the same counts as tickguard's handler.
#[test]
fn counts_gaps_like_tickguard() {
    for (kind, name) in [(Kind::Full, "full"), (Kind::Delta, "delta")] {
        let config = Config::parse(
            &format!(
                "[[feed]]\nname = \"x\"\nkind = \"{name}\"\nlines = [\"127.0.0.1:9\"]\n\
                 stale_threshold_ms = 500\nsource_threshold_ms = 2000\nclock_offset = 0\n"
            ),
            "test",
        )
        .unwrap();
        let mut tg = Handler::new(&config);
        let mut naive = Feed::new(kind);
        let (a, b) = (Symbol::parse("AAA").unwrap(), Symbol::parse("BB").unwrap());
        let t = 1_767_603_600_000_000_000u64;
        let packets: Vec<Vec<u8>> = vec![
            {
                let mut p = PacketBuilder::new(t);
                p.quote(a, 1, t, 1.0, 1.1).quote(b, 7, t, 2.0, 2.1);
                p.finish()
            },
            {
                let mut p = PacketBuilder::new(t);
                p.quote(a, 2, t, 1.0, 1.1).quote(a, 5, t, 1.0, 1.1); // 3, 4 lost
                p.quote(a, 4, t, 1.0, 1.1); // duplicate
                p.finish()
            },
            {
                let mut p = PacketBuilder::new(t);
                p.heartbeat(a, 9); // 6, 7, 8 lost
                p.quote(b, 8, t, 3.0, 2.0); // invalid price
                p.message(0x7a, &[1, 2, 3]); // unknown type
                p.finish()
            },
            {
                let mut p = PacketBuilder::new(t);
                p.quote(b, 9, t, 1.0, 1.1);
                p.raw(&[0]); // trailing byte: rejected whole
                p.finish()
            },
            {
                let mut p = PacketBuilder::new(t);
                p.quote(b, 11, t, 2.0, 2.1); // 9 (rejected), 10 lost
                p.snapshot(a, 20, t, 1.0, 1.1);
                p.quote(a, 21, t, 1.0, 1.1);
                p.finish()
            },
        ];
        for (i, d) in packets.iter().enumerate() {
            let at = t + i as u64;
            let _ = tg.on_datagram(0, d, at);
            naive.on_datagram(d, at);
        }
        let c = &tg.feeds()[0].counters;
        assert_eq!(naive.counters.ticks_lost, c.ticks_lost, "{name}");
        assert_eq!(naive.counters.ticks_lost, 2 + 3 + 2, "{name}");
        assert_eq!(naive.counters.duplicates, c.duplicates, "{name}");
        assert_eq!(naive.counters.rejected, c.rejected, "{name}");
        assert_eq!(naive.counters.messages, c.messages, "{name}");
        let table = naive.table.lock().unwrap();
        for (sym, key) in [(a, "AAA"), (b, "BB")] {
            let r = tg.table().record(tg.table().find(0, sym).unwrap());
            let n = &table[key];
            assert_eq!(n.last_seq, r.state.seq.last_seq, "{name} {key}");
            assert_eq!(n.ticks_lost, r.state.seq.ticks_lost, "{name} {key}");
            assert_eq!(n.duplicates, r.state.seq.duplicates, "{name} {key}");
            assert_eq!(n.suspect, r.state.suspect, "{name} {key}");
            assert_eq!(n.invalid, r.state.invalid, "{name} {key}");
            assert_eq!(
                n.price,
                r.state.price.map(|p| (p.bid, p.ask, p.source_time)),
                "{name} {key}"
            );
        }
    }
}
