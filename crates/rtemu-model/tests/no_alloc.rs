//! A link's per-packet path (`decide`, then `depart_by` as the engine calls them) allocates
//! nothing once the link is built, for the stages that hold copies: `slot`, whose queue is
//! sized for its limit when it is built, also when it is full and drops.
//!
//! A counting global allocator counts the allocations made on the test's own thread while it
//! is armed (`rtemu_testutil::alloc_count`).

use rtemu_model::link::NoTables;
use rtemu_model::{netem, LinkModel, Model, Outcome, PacketMeta, Stream};
use rtemu_testutil::alloc_count::{counted, Counting};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What `packets` Poisson arrivals at `pps` of `len` bytes met: (delivered, dropped).
fn drive(m: &mut LinkModel, packets: u64, pps: f64, len: u32) -> (u64, u64) {
    let mut arrivals = Stream::new(1, 2);
    // (delivered, dropped)
    let mut n = (0, 0);
    let count = |n: &mut (u64, u64), o: &Outcome| match o {
        Outcome::Delivered(_) => n.0 += 1,
        Outcome::Dropped(_) => n.1 += 1,
    };
    let mut now = 0u64;
    for seq in 0..packets {
        while let Some(d) = m.depart_by(now) {
            count(&mut n, &d.outcome);
        }
        let fate = m.decide(&PacketMeta {
            len,
            flow: Default::default(),
            arrival_ns: now,
            seq,
            ecn: Default::default(),
        });
        n.0 += fate.delivered.as_slice().len() as u64;
        n.1 += fate.drops().count() as u64;
        now += (-arrivals.open01().ln() / pps * 1e9) as u64;
    }
    while let Some(d) = m.depart_by(u64::MAX) {
        count(&mut n, &d.outcome);
    }
    n
}

#[test]
fn slot_holds_and_releases_copies_without_allocating() {
    // 20 kpps into 50 ms of jittered delay: about 1,000 copies wait to be ready at once, so
    // the slot's queue reaches the size that grew a queue built empty about ten times.
    for line in [
        "delay 50ms 10ms slot 800us 1ms packets 4 limit 5000",
        "delay 50ms 10ms distribution normal slot distribution pareto 2ms 1ms bytes 16kb \
         limit 5000",
    ] {
        let mut m = LinkModel::new(&netem::parse(line).unwrap(), &NoTables, 7, 0).unwrap();
        let ((delivered, dropped), allocations) = counted(|| drive(&mut m, 20_000, 20_000.0, 200));
        assert_eq!(allocations, 0, "{line}: allocations on the packet path");
        // Everything went through the slots: nothing was dropped or forgotten.
        assert_eq!((delivered, dropped), (20_000, 0), "{line}");
    }
}

#[test]
fn a_full_slot_stage_drops_without_allocating() {
    // The default limit of 1,000 against about 2,000 copies in their delay: the excess is
    // dropped, and a full queue does not grow.
    let mut m = LinkModel::new(
        &netem::parse("delay 100ms slot 1ms").unwrap(),
        &NoTables,
        7,
        0,
    )
    .unwrap();
    let ((delivered, dropped), allocations) = counted(|| drive(&mut m, 20_000, 20_000.0, 200));
    assert_eq!(allocations, 0, "allocations on the packet path");
    assert_eq!(delivered + dropped, 20_000);
    // About half arrive to a full stage once it has filled (after its first 50 ms).
    assert!((8_000..12_000).contains(&dropped), "{dropped} dropped");
}
