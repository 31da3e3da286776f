//! The link model end to end: statistical checks of each stage through the whole pipeline,
//! and properties that must hold for any valid configuration.

use proptest::prelude::*;
use rtemu_model::chance::ChanceConfig;
use rtemu_model::config::{DistName, LinkConfig};
use rtemu_model::link::NoTables;
use rtemu_model::loss::LossConfig;
use rtemu_model::rate::RateConfig;
use rtemu_model::units::{Percent, Rate, Size, Time};
use rtemu_model::{netem, DropReason, Ecn, Fate, LinkModel, Model, Outcome, PacketMeta};

mod strategies;
use strategies::{arb_config, arb_printable};

fn model(netem_args: &str, seed: u64) -> LinkModel {
    LinkModel::new(&netem::parse(netem_args).unwrap(), &NoTables, seed, 0).unwrap()
}

fn packet(seq: u64, arrival_ns: u64, len: u32) -> PacketMeta {
    PacketMeta {
        len,
        flow: Default::default(),
        arrival_ns,
        seq,
        ecn: Default::default(),
    }
}

/// Fates of `n` packets of `len` bytes arriving every `gap_ns`.
fn run(m: &mut LinkModel, n: u64, gap_ns: u64, len: u32) -> Vec<(PacketMeta, Fate)> {
    (0..n)
        .map(|i| {
            let p = packet(i, 1_000_000_000 + i * gap_ns, len);
            (p, m.decide(&p))
        })
        .collect()
}

#[test]
fn rate_limit_delivers_the_configured_rate_and_the_queue_stays_bounded() {
    // 1000-byte packets every 50 µs offer 160 Mbit/s to a 100 Mbit/s link with a 100-packet
    // queue: drops are certain, and the link is busy from the first packet to the last.
    let mut m = model("rate 100mbit limit 100", 1);
    let fates = run(&mut m, 200_000, 50_000, 1000);
    let delivered: Vec<u64> = fates
        .iter()
        .flat_map(|(_, f)| f.delivered.as_slice().iter().map(|d| d.at_ns))
        .collect();
    let dropped = fates
        .iter()
        .filter(|(_, f)| f.drop_reason() == Some(DropReason::QueueFull))
        .count();
    assert!(dropped > 0);
    let span = delivered.iter().max().unwrap() - fates[0].0.arrival_ns;
    let rate = delivered.len() as f64 * 8000.0 * 1e9 / span as f64;
    assert!(
        (rate - 100e6).abs() < 0.005 * 100e6,
        "delivered {rate} bit/s"
    );
    // The backlog never exceeded the limit: at each arrival, count copies admitted and not
    // yet finished; with no delay stage, a delivery time is the serialization finish time.
    assert!(m.counters().max_backlog_packets <= 100);
    let mut finishes = std::collections::VecDeque::new();
    for (p, f) in &fates {
        while finishes.front().is_some_and(|&t| t <= p.arrival_ns) {
            finishes.pop_front();
        }
        if let Some(d) = f.delivered.as_slice().first() {
            finishes.push_back(d.at_ns);
        }
        assert!(finishes.len() <= 100);
    }
}

/// netem's `ecn`: every copy the loss model picks is marked CE when ECN-capable (ECT(0),
/// ECT(1) or already CE) and delivered, and dropped otherwise; the loss decisions themselves
/// are those of the same link without `ecn`.
#[test]
fn ecn_marks_what_loss_would_drop_and_only_ecn_capable_copies() {
    let codepoints = [Ecn::NotEct, Ecn::Ect0, Ecn::Ect1, Ecn::Ce];
    let mut with = model("loss 20% ecn", 3);
    let mut without = model("loss 20%", 3);
    let (mut marked, mut dropped) = (0, 0);
    for i in 0..20_000u64 {
        let p = PacketMeta {
            ecn: codepoints[i as usize % 4],
            ..packet(i, i * 1000, 500)
        };
        let (a, b) = (with.decide(&p), without.decide(&p));
        match (b.drop_reason(), p.ecn.is_capable()) {
            (None, _) => assert_eq!(a, b),
            (Some(DropReason::Loss), true) => {
                let d = a.delivered.as_slice();
                assert!(d.len() == 1 && d[0].marked && d[0].at_ns == p.arrival_ns);
                marked += 1;
            }
            (Some(_), false) => {
                assert_eq!(a.drop_reason(), Some(DropReason::Loss));
                dropped += 1;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    // 20 % of 15 000 ECN-capable and of 5 000 Not-ECT packets; sd ≈ 49 and 28.
    assert!((marked as f64 - 3000.0).abs() < 6.0 * 49.0, "{marked}");
    assert!((dropped as f64 - 1000.0).abs() < 6.0 * 28.3, "{dropped}");
}

/// `limit 500ms` is a buffer of 500 ms at the link's rate, whatever the rate: under overload
/// the queueing delay climbs to 500 ms and no further (within one packet), and at 100 Mbit/s
/// the queue holds the 6250 packets those 500 ms take, past netem's default of 1000 packets.
#[test]
fn a_time_limit_bounds_the_queueing_delay_at_any_rate() {
    for (rate, bits_per_s) in [("10mbit", 10e6), ("100mbit", 100e6)] {
        let mut m = model(&format!("rate {rate} limit 500ms"), 1);
        let tx_ns = (1000.0 * 8.0 * 1e9 / bits_per_s) as u64;
        // Twice the rate, for 2 s: the queue fills after about 1 s.
        let fates = run(&mut m, (2e9 / (tx_ns / 2) as f64) as u64, tx_ns / 2, 1000);
        let delays: Vec<u64> = fates
            .iter()
            .flat_map(|(p, f)| {
                f.delivered
                    .as_slice()
                    .iter()
                    .map(|d| d.at_ns - p.arrival_ns)
            })
            .collect();
        let worst = *delays.iter().max().unwrap();
        assert!(
            worst <= 500_000_000 + tx_ns && worst >= 500_000_000 - tx_ns,
            "{rate}: worst queueing {worst} ns"
        );
        assert!(fates
            .iter()
            .any(|(_, f)| f.drop_reason() == Some(DropReason::QueueFull)));
        let most = m.counters().max_backlog_packets;
        let expected = (bits_per_s * 0.5 / 8000.0) as u64;
        assert!(
            most.abs_diff(expected) <= 1,
            "{rate}: {most} packets queued"
        );
    }
}

/// `set_rate` on a whole link: a link without a rate and a rate out of range are refused with
/// the reason; a managed queue keeps its packets across the change and sends those not yet
/// started at the new rate.
#[test]
fn a_rate_change_keeps_the_managed_queue_and_refuses_what_it_cannot_do() {
    use rtemu_model::link::RateChangeError;
    let mut plain = model("delay 10ms", 1);
    assert_eq!(
        plain.set_rate(Rate(1_000_000)),
        Err(RateChangeError::NoRate)
    );
    let mut m = model("rate 8mbit codel", 1);
    assert_eq!(
        m.set_rate(Rate(0)),
        Err(RateChangeError::OutOfRange(Rate(0)))
    );
    assert!(RateChangeError::OutOfRange(Rate(0))
        .to_string()
        .contains("between 1bit and"));
    // Ten 1000-byte packets at once: the first goes on the wire at once (1 ms at 8 Mbit/s).
    for i in 0..10 {
        assert!(m.decide(&packet(i, 0, 1000)).delivered.is_empty());
    }
    let first = m.depart_by(0).unwrap();
    assert_eq!(first.seq, 0);
    m.set_rate(Rate(1_000_000)).unwrap();
    let mut at = Vec::new();
    while let Some(d) = m.depart_by(u64::MAX) {
        match d.outcome {
            Outcome::Delivered(del) => at.push((d.seq, del.at_ns)),
            Outcome::Dropped(r) => panic!("{r:?}"),
        }
    }
    // The rest, in order, 8 ms each at 1 Mbit/s after the first's 1 ms.
    let expected: Vec<(u64, u64)> = (1..10).map(|i| (i, 1_000_000 + i * 8_000_000)).collect();
    assert_eq!(at, expected);
}

#[test]
fn correlated_loss_keeps_its_marginal_rate() {
    // netem's own arithmetic makes `loss 1% 25%` drop far fewer than 1 %; rtemu must not.
    let mut m = model("loss 1% 25%", 3);
    let n = 1_000_000;
    let lost = run(&mut m, n, 1000, 100)
        .iter()
        .filter(|(_, f)| f.drop_reason().is_some())
        .count();
    // Effective sample n·(1−ρ)/(1+ρ) = 600 000; sd of the rate ≈ sqrt(0.01·0.99/6e5) = 1.3e-4.
    assert!(
        (lost as f64 / n as f64 - 0.01).abs() < 6.5e-4,
        "lost {lost}"
    );
}

#[test]
fn duplicate_and_corrupt_rates_match() {
    let mut m = model("duplicate 5% corrupt 2%", 4);
    let n = 400_000u64;
    let fates = run(&mut m, n, 1000, 200);
    let dups = fates.iter().filter(|(_, f)| f.delivered.len() == 2).count() as f64;
    let copies: Vec<_> = fates
        .iter()
        .flat_map(|(_, f)| f.delivered.as_slice().to_vec())
        .collect();
    let corrupted = copies
        .iter()
        .filter(|d| d.corruption.single_bit.is_some())
        .count() as f64;
    // Binomial standard errors: sqrt(0.05·0.95/4e5) = 3.4e-4, sqrt(0.02·0.98/4.2e5) = 2.2e-4; 5 σ.
    assert!((dups / n as f64 - 0.05).abs() < 1.7e-3, "dup {dups}");
    assert!(
        (corrupted / copies.len() as f64 - 0.02).abs() < 1.1e-3,
        "corrupt {corrupted}"
    );
    // A flipped bit lies inside the 200-byte frame.
    assert!(copies
        .iter()
        .filter_map(|d| d.corruption.single_bit)
        .all(|b| b < 1600));
}

#[test]
fn bit_error_rate_flips_bits_independently() {
    let mut m = model("ber 1e-4", 5);
    let n = 100_000u64;
    let fates = run(&mut m, n, 1000, 1500);
    let flips: usize = fates
        .iter()
        .flat_map(|(_, f)| f.delivered.as_slice().to_vec())
        .map(|d| d.corruption.bits().count())
        .sum();
    let expected = n as f64 * 12_000.0 * 1e-4;
    // Poisson: sd = sqrt(120 000) ≈ 346; 5 σ.
    assert!(
        (flips as f64 - expected).abs() < 5.0 * expected.sqrt(),
        "{flips} flips"
    );
    // Some packets carry more than one error, which netem's `corrupt` cannot do.
    assert!(fates
        .iter()
        .any(|(_, f)| f.delivered.as_slice()[0].corruption.bits().count() > 1));
}

#[test]
fn reorder_with_gap_sends_every_gap_th_packet_ahead() {
    let mut m = model("delay 10ms reorder 100% gap 5", 6);
    let fates = run(&mut m, 100, 1_000_000, 100);
    for (p, f) in &fates {
        let d = f.delivered.as_slice()[0];
        let expect_reordered = p.seq % 5 == 4;
        assert_eq!(d.reordered, expect_reordered, "seq {}", p.seq);
        assert_eq!(
            d.at_ns - p.arrival_ns,
            if expect_reordered { 0 } else { 10_000_000 }
        );
    }
}

#[test]
fn ordered_links_never_reorder_and_jitter_does_by_default() {
    let inversions = |args: &str| {
        let mut m = model(args, 7);
        let times: Vec<u64> = run(&mut m, 10_000, 100_000, 100)
            .iter()
            .map(|(_, f)| f.delivered.as_slice()[0].at_ns)
            .collect();
        times.windows(2).filter(|w| w[1] < w[0]).count()
    };
    assert!(inversions("delay 10ms 5ms") > 100);
    assert_eq!(inversions("delay 10ms 5ms ordered"), 0);
}

#[test]
fn a_delay_alone_never_drops_however_many_packets_are_in_flight() {
    // 1 s of delay at 1 Mpps keeps a million packets in flight, far beyond netem's 1000.
    let mut m = model("delay 1s", 8);
    let fates = run(&mut m, 2_000_000, 1000, 64);
    assert!(fates.iter().all(|(_, f)| f.delivered.len() == 1));
}

#[test]
fn seeds_decide_reproducibly() {
    let args = "delay 20ms 5ms 25% distribution normal loss 1% 25% duplicate 0.5% corrupt 0.1% reorder 10% 50% rate 10mbit";
    let a = run(&mut model(args, 42), 20_000, 200_000, 500);
    let b = run(&mut model(args, 42), 20_000, 200_000, 500);
    let c = run(&mut model(args, 43), 20_000, 200_000, 500);
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// Configurations of which many break one rule: values just out of range, reordering
/// without delay, loss-state probabilities over 100 %, table names that are not one word.
/// (An empty table name has no netem form at all; only the structured form can say it, and a
/// unit test covers it.)
fn arb_maybe_invalid() -> impl Strategy<Value = LinkConfig> {
    (
        arb_config(),
        0usize..12,
        0.0f64..=1.0,
        prop_oneof![Just("a b".to_string()), "[a-z]{1,8}"],
    )
        .prop_map(|(mut cfg, which, x, name)| {
            match which {
                0 => cfg.ber = Some(x * 3.0),
                1 => cfg.limit = (x * 2.0) as u32,
                2 => {
                    cfg.delay = Time(0);
                    cfg.jitter = Time(0);
                    cfg.reorder = Some(ChanceConfig {
                        probability: Percent(x),
                        ..Default::default()
                    });
                }
                3 => {
                    cfg.rate = Some(RateConfig {
                        rate: Rate(1_000_000),
                        packet_overhead: 0,
                        cell_size: (x * 131_072.0) as u32,
                        cell_overhead: 0,
                    })
                }
                4 => {
                    cfg.rate = Some(RateConfig {
                        rate: Rate((x * 2.0) as u64),
                        packet_overhead: (x * 262_144.0) as i32 - 131_072,
                        cell_size: 53,
                        cell_overhead: (x * 262_144.0) as i32 - 131_072,
                    })
                }
                5 => cfg.delay_correlation = Percent(x.sqrt()),
                6 => {
                    cfg.loss = Some(LossConfig::State {
                        p13: Percent(x),
                        p31: Percent(0.5),
                        p32: Percent(0.6),
                        p23: Percent(1.0),
                        p14: Percent(1.0 - x * x),
                    })
                }
                7 => cfg.distribution = DistName::Table(name),
                8 => cfg.delay = Time((x * 2.0 * (1u64 << 53) as f64) as u64),
                9 => {
                    cfg.duplicate = Some(ChanceConfig {
                        probability: Percent(0.1),
                        correlation: Percent(x.sqrt()),
                    })
                }
                10 => cfg.limit_bytes = Some(Size((x * 2.0 * (1u64 << 50) as f64) as u64)),
                _ => {}
            }
            cfg
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any valid configuration: no panic, every copy accounted for exactly once, nothing
    /// delivered before it arrived.
    #[test]
    fn every_copy_has_exactly_one_fate_and_none_arrives_early(cfg in arb_config(), seed in any::<u64>(), lens in proptest::collection::vec(0u32..9000, 1..300)) {
        let mut m = LinkModel::new(&cfg, &NoTables, seed, 1).unwrap();
        let mut t = 0u64;
        for (i, len) in lens.iter().enumerate() {
            t += (*len as u64 * 37) % 1_000_000;
            let p = packet(i as u64, t, *len);
            let f = m.decide(&p);
            let copies = f.delivered.len() + f.drops().count();
            prop_assert!(copies == 1 || (copies == 2 && cfg.duplicate.is_some()));
            for d in f.delivered.as_slice() {
                prop_assert!(d.at_ns >= p.arrival_ns);
                prop_assert!(d.corruption.bits().all(|b| b < len * 8));
            }
        }
    }

    /// The netem syntax writes any valid configuration so that it reads back to the very
    /// same configuration, bit for bit.
    #[test]
    fn netem_syntax_round_trips(cfg in arb_printable()) {
        prop_assert_eq!(cfg.validate(), Ok(()));
        let text = cfg.to_string();
        let back = netem::parse(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
        prop_assert_eq!(back, cfg);
    }

    /// The netem line and the structured form (what `--model-file` reads) accept and refuse
    /// the same configurations, valid or not.
    #[test]
    fn both_parsers_accept_and_refuse_the_same(cfg in arb_maybe_invalid()) {
        let text = cfg.to_string();
        let by_netem = netem::parse(&text);
        let toml_text = toml::to_string(&cfg).unwrap();
        let by_toml = toml::from_str::<LinkConfig>(&toml_text)
            .map_err(|e| e.to_string())
            .and_then(|c| c.validate().map_err(|e| e.to_string()));
        prop_assert_eq!(
            by_netem.is_ok(),
            by_toml.is_ok(),
            "netem {:?}: {:?}; toml: {:?}", text, by_netem, by_toml
        );
    }

    /// The structured form (TOML and JSON) round-trips exactly.
    #[test]
    fn structured_form_round_trips(cfg in arb_config()) {
        let json = serde_json::to_string(&cfg).unwrap();
        prop_assert_eq!(&serde_json::from_str::<LinkConfig>(&json).unwrap(), &cfg);
        let toml_text = toml::to_string(&cfg).unwrap();
        prop_assert_eq!(&toml::from_str::<LinkConfig>(&toml_text).unwrap(), &cfg);
    }

    /// The parser never panics, whatever it is given.
    #[test]
    fn netem_parser_never_panics(words in proptest::collection::vec(prop_oneof![
        Just("delay".to_string()), Just("loss".to_string()), Just("state".to_string()), Just("gemodel".to_string()),
        Just("rate".to_string()), Just("reorder".to_string()), Just("gap".to_string()), Just("limit".to_string()),
        Just("distribution".to_string()), Just("ber".to_string()), "[0-9]{1,4}(\\.[0-9])?(ms|us|s|%|mbit|kb)?", "\\PC{0,6}",
    ], 0..12)) {
        let _ = netem::parse(&words.join(" "));
    }
}

#[test]
fn a_structured_config_reads_like_the_netem_line() {
    let from_toml: LinkConfig = toml::from_str(
        r#"
        delay = "20ms"
        jitter = "5ms"
        distribution = "normal"
        loss = { model = "random", probability = "1%", correlation = "25%" }
        rate = { rate = "10mbit" }
        "#,
    )
    .unwrap();
    assert_eq!(
        from_toml,
        netem::parse("delay 20ms 5ms distribution normal loss 1% 25% rate 10mbit").unwrap()
    );
    // The disciplines' tables: left-out fields take tc's defaults.
    for (toml_text, line) in [
        (
            "rate = { rate = \"10mbit\" }\npie = { docsis = true, target = \"20ms\", ecn = true }",
            "rate 10mbit pie docsis target 20ms ecn",
        ),
        (
            "rate = { rate = \"10mbit\" }\ndualpi2 = { alpha = 0.1, coupling_factor = 3, c_protection = \"30%\" }",
            "rate 10mbit dualpi2 alpha 0.1 coupling_factor 3 c_protection 30",
        ),
    ] {
        let from_toml: LinkConfig = toml::from_str(toml_text).unwrap();
        assert_eq!(from_toml, netem::parse(line).unwrap(), "{line}");
    }
    let err = toml::from_str::<LinkConfig>("delay = \"20 parsecs\"").unwrap_err();
    assert!(err.to_string().contains("expected a time"), "{err}");
}

/// What `--model-file` used to accept and `--model` refused: each is refused by
/// [`LinkConfig::validate`] with the valid range and its unit, and by the netem parser at the
/// offending word.
#[test]
fn the_structured_form_is_held_to_the_netem_rules() {
    let cases = [
        (
            "ber = 2",
            "ber 2e0: must be between 0 (exclusive) and 1 (exclusive)",
            "ber 2",
        ),
        (
            "limit = 0",
            "limit 0: must be a whole number of packets from 1 to 4294967295",
            "limit 0",
        ),
        (
            "reorder = { probability = 0.1 }",
            "reorder: reordering needs a delay to reorder against",
            "reorder 10%",
        ),
        (
            "rate = { rate = \"1mbit\", cell_size = 70000 }",
            "rate 70000: cell size must be a whole number of bytes from 0 to 65535",
            "rate 1mbit 0 70000",
        ),
    ];
    for (toml_text, want, netem_text) in cases {
        let cfg: LinkConfig = toml::from_str(toml_text).unwrap();
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.starts_with(want), "{toml_text}: {e}");
        assert!(netem::parse(netem_text).is_err(), "{netem_text}");
        assert!(
            LinkModel::new(&cfg, &NoTables, 1, 0).is_err(),
            "{toml_text}"
        );
    }
    let e = netem::parse("delay 10ms loss state 10% 50% 60%").unwrap_err();
    assert_eq!(
        e.to_string(),
        "loss (column 12): p31 and p32 add up to 110%, more than 100%"
    );
    let e = netem::parse("delay 10ms rate 1mbit limit 1 duplicate 5% 100%").unwrap_err();
    assert_eq!(
        e.to_string(),
        "duplicate 100% (column 44): correlation must be at least 0% and below 100%"
    );
    let e = LinkConfig {
        distribution: DistName::Table(String::new()),
        ..LinkConfig::default()
    }
    .validate()
    .unwrap_err();
    assert!(
        e.to_string()
            .starts_with("distribution \"\": a table is named by one word"),
        "{e}"
    );
}

// netem's `slot` (`rtemu_model::slot`): known answers worked out by hand from the module's rule,
// the gap distributions, budgets and order for any arrivals, and its own stream.

const MS: u64 = 1_000_000;

/// Drives `m` as the engines do (departures due by an arrival first) and returns each
/// packet's fate: its delivery time (decided at once, or when it left a slot), or the drop
/// reason.
fn drive(m: &mut LinkModel, packets: &[PacketMeta]) -> Vec<Result<u64, DropReason>> {
    let mut out = vec![Err(DropReason::Trace); packets.len()];
    let mut record = |seq: u64, o: Outcome| {
        out[seq as usize] = match o {
            Outcome::Delivered(d) => Ok(d.at_ns),
            Outcome::Dropped(r) => Err(r),
        }
    };
    for p in packets {
        while let Some(d) = m.depart_by(p.arrival_ns) {
            record(d.seq, d.outcome);
        }
        let fate = m.decide(p);
        if let Some(d) = fate.delivered.as_slice().first() {
            record(p.seq, Outcome::Delivered(*d));
        } else if let Some(r) = fate.drop_reason() {
            record(p.seq, Outcome::Dropped(r));
        }
    }
    while let Some(d) = m.depart() {
        record(d.seq, d.outcome);
    }
    out
}

/// Worked out by hand from the module's rule, gaps fixed at 2 ms: a slot of two packets.
#[test]
fn a_packet_budget_closes_the_slot_and_a_late_copy_opens_its_own() {
    let mut m = model("slot 2ms packets 2", 1);
    let ps = [
        packet(0, MS / 2, 100),
        packet(1, 6 * MS / 10, 100),
        packet(2, 7 * MS / 10, 100),
        packet(3, 5 * MS, 100),
    ];
    // 0 opens a slot at 0.5 + 2; 1 fills it, so the next is 2 ms after it, where 2 goes;
    // that slot had passed when 3 was ready at 5 ms: 3 opens one at 7 ms.
    let want = [5 * MS / 2, 5 * MS / 2, 9 * MS / 2, 7 * MS];
    assert_eq!(drive(&mut m, &ps), want.map(Ok));
}

/// The copy that crosses the byte budget still goes, and closes the slot.
#[test]
fn a_byte_budget_lets_the_crossing_copy_go_and_closes_the_slot() {
    let mut m = model("slot 2ms bytes 250", 1);
    let ps = [
        packet(0, MS / 2, 100),
        packet(1, 6 * MS / 10, 100),
        packet(2, 7 * MS / 10, 100),
        packet(3, 8 * MS / 10, 100),
    ];
    let want = [5 * MS / 2, 5 * MS / 2, 5 * MS / 2, 9 * MS / 2];
    assert_eq!(drive(&mut m, &ps), want.map(Ok));
}

/// Slots come after the delay: a copy is ready at arrival + delay and waits a gap from
/// then; copies that become ready while a slot waits share it.
#[test]
fn the_delay_comes_first_and_copies_ready_by_a_slot_share_it() {
    let mut m = model("delay 10ms slot 3ms", 1);
    let ps = [
        packet(0, 0, 100),
        packet(1, MS, 100),
        packet(2, 4 * MS, 100),
    ];
    assert_eq!(drive(&mut m, &ps), [13 * MS, 13 * MS, 17 * MS].map(Ok));
}

/// `limit` bounds the copies waiting to be ready, as netem's limit counts every packet it
/// holds: with two in their delay a third is dropped; once the first is ready there is room.
#[test]
fn a_slot_stage_holds_at_most_limit_copies() {
    let mut m = model("delay 10ms slot 3ms limit 2", 1);
    let ps = [
        packet(0, 0, 100),
        packet(1, MS, 100),
        packet(2, 2 * MS, 100),
        packet(3, 10 * MS, 100),
    ];
    // 0 is ready at 10 ms and opens a slot at 13; 1 (ready at 11) shares it; 3, taken in
    // once 0 had left the stage, is ready at 20 ms, after that slot: its own at 23.
    let want = [
        Ok(13 * MS),
        Ok(13 * MS),
        Err(DropReason::QueueFull),
        Ok(23 * MS),
    ];
    assert_eq!(drive(&mut m, &ps), want);
    let cfg = netem::parse("slot 800us 1ms").unwrap();
    assert_eq!(cfg.slot_wait_ns(), MS);
    let cfg = netem::parse("slot distribution normal 2ms 500us").unwrap();
    assert_eq!(cfg.slot_wait_ns(), 4 * MS);
    assert_eq!(netem::parse("delay 5ms").unwrap().slot_wait_ns(), 0);
}

/// Under a standing backlog slots follow each other, so their spacing is the gap
/// distribution itself: uniform in [1 ms, 3 ms), mean 2 ms, a packet each.
#[test]
fn back_to_back_slots_are_spaced_by_the_gap_distribution() {
    for (line, mean, sd, lo, hi) in [
        ("slot 1ms 3ms packets 1", 2e6, 2e6 / 12f64.sqrt(), 1e6, 3e6),
        (
            "slot distribution normal 2ms 500us packets 1",
            2e6,
            0.5e6,
            0.0,
            f64::MAX,
        ),
    ] {
        let mut m = model(line, 3);
        // 20 000 packets at once: the backlog never empties.
        let ps: Vec<_> = (0..20_000).map(|i| packet(i, 0, 100)).collect();
        let at: Vec<u64> = drive(&mut m, &ps).into_iter().map(Result::unwrap).collect();
        let gaps: Vec<f64> = at.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let n = gaps.len() as f64;
        let m1 = gaps.iter().sum::<f64>() / n;
        let var = gaps.iter().map(|g| (g - m1).powi(2)).sum::<f64>() / n;
        assert!((m1 - mean).abs() < 0.02 * mean, "{line}: mean gap {m1}");
        assert!(
            (var.sqrt() - sd).abs() < 0.03 * sd,
            "{line}: sd {}",
            var.sqrt()
        );
        assert!(gaps.iter().all(|g| (lo..hi).contains(g)), "{line}");
    }
}

/// The TOML form (docs/models.md's example) reads to what the netem line does, and
/// prints back as that line.
#[test]
fn the_toml_form_is_the_netem_line() {
    for (toml, line) in [
        (
            r#"slot = { min_delay = "800us", max_delay = "1ms", packets = 4 }"#,
            "slot 800us 1ms packets 4",
        ),
        (
            r#"slot = { distribution = "normal", delay = "2ms", jitter = "500us", bytes = "16kb" }"#,
            "slot distribution normal 2ms 500us bytes 16kb",
        ),
    ] {
        let from_toml: LinkConfig = toml::from_str(toml).unwrap();
        assert_eq!(from_toml, netem::parse(line).unwrap());
        assert_eq!(from_toml.to_string(), line);
    }
}

proptest! {
    /// For any arrivals and seed: every copy leaves, never before it is ready;
    /// copies leave in the order they became ready; a slot carries at most its packet
    /// budget, and its bytes before the last copy stay under the byte budget; distinct
    /// slot starts are at least the shortest gap apart.
    #[test]
    fn slots_keep_their_budgets_and_order(
        seed in 0u64..1000,
        gaps in proptest::collection::vec(0u64..3_000_000, 1..300),
        lens in proptest::collection::vec(60u32..1514, 300),
    ) {
        let mut m = model("slot 1ms 2ms packets 5 bytes 4000", seed);
        let mut t = 0;
        let ps: Vec<_> = gaps.iter().enumerate().map(|(i, g)| {
            t += g;
            packet(i as u64, t, lens[i])
        }).collect();
        let at: Vec<u64> = drive(&mut m, &ps).into_iter().map(Result::unwrap).collect();
        let mut slot_start = None;
        let (mut count, mut bytes) = (0, 0);
        for (p, &a) in ps.iter().zip(&at) {
            prop_assert!(a >= p.arrival_ns);
            if slot_start == Some(a) {
                prop_assert!(count < 5 && bytes < 4000);
            } else {
                if let Some(s) = slot_start {
                    prop_assert!(a >= s + MS, "slots {s} and {a}");
                }
                slot_start = Some(a);
                (count, bytes) = (0, 0);
            }
            count += 1;
            bytes += p.len;
        }
    }
}

/// The slots draw from a stream of their own: the loss model decides the same packets
/// with and without `slot`, and the same seed gives the same slots.
#[test]
fn slots_move_no_other_draw_and_repeat_with_the_seed() {
    let ps: Vec<_> = (0..2000).map(|i| packet(i, i * 100_000, 500)).collect();
    let lost = |line: &str| -> Vec<bool> {
        drive(&mut model(line, 9), &ps)
            .iter()
            .map(Result::is_err)
            .collect()
    };
    assert_eq!(lost("loss 10%"), lost("loss 10% slot 1ms 5ms packets 3"));
    let once = drive(&mut model("loss 10% slot 1ms 5ms packets 3", 9), &ps);
    let again = drive(&mut model("loss 10% slot 1ms 5ms packets 3", 9), &ps);
    assert_eq!(once, again);
    let other = drive(&mut model("loss 10% slot 1ms 5ms packets 3", 10), &ps);
    assert_ne!(once, other);
}
