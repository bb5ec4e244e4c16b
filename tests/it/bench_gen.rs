//! The benchmarks' synthetic MDP3 channel (`tools/bench/mdp3_gen.rs`)
//! reports what it wrote: its counts are read back off its own packets.

#[path = "../../tools/bench/mdp3_gen.rs"]
mod mdp3_gen;

use tickguard::protocol::mdp3::Packet;

/// `events_spanning`: the events whose messages went in more than one
/// packet (one that did not fit the open packet and started the next
/// spans nothing), as line A's packets show them, events told apart by
/// their EndOfEvent.
#[test]
fn the_generators_events_spanning_packets_are_those_in_two() {
    let mut c = mdp3_gen::Channel::new(mdp3_gen::Params::line_a(100_000, 50));
    let mut packets = Vec::new();
    let stats = c
        .run(|_, service, p| {
            if matches!(service, mdp3_gen::Service::A) {
                packets.push(p.to_vec());
            }
            Ok(())
        })
        .unwrap();
    let (mut events, mut spanning) = (0u64, 0u64);
    let mut first: Option<u32> = None;
    for p in &packets {
        let packet = Packet::new_checked(&p[..]).unwrap();
        let s = packet.seq_num();
        for m in packet.messages() {
            let Some(mei) = m.match_event_indicator() else {
                continue;
            };
            let from = *first.get_or_insert(s);
            if mei.end_of_event() {
                events += 1;
                spanning += u64::from(s > from);
                first = None;
            }
        }
    }
    assert_eq!(events, stats.events);
    assert_eq!(spanning, stats.events_spanning);
    assert!(spanning > 0);
}
