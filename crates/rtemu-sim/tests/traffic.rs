//! The traffic generator: spec grammar, timing, statistics and frame validity.

use proptest::prelude::*;
use rtemu_model::units::parse_duration_ns;
use rtemu_model::wire::{fold, internet_checksum, sum_words};
use rtemu_sim::capture::PcapWriter;
use rtemu_sim::source::{FrameSource, ProgressUnit, LINKTYPE_ETHERNET};
use rtemu_sim::traffic::{Pattern, TrafficGen, TrafficRate, TrafficSpec, TrafficSpecError};

fn spec(s: &str) -> TrafficSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Every frame as (arrival, bytes).
fn frames(s: &str, seed: u64) -> Vec<(u64, Vec<u8>)> {
    let mut gen = TrafficGen::new(&spec(s), seed);
    let mut out = Vec::new();
    while let Some(f) = gen.next_frame().unwrap() {
        assert_eq!(f.orig_len as usize, f.data.len());
        out.push((f.ts_ns, f.data.to_vec()));
    }
    out
}

fn times(s: &str, seed: u64) -> Vec<u64> {
    frames(s, seed).into_iter().map(|(t, _)| t).collect()
}

#[test]
fn parses_each_form() {
    let s = spec("cbr 10000pps 1000B 10s");
    assert_eq!(
        s,
        TrafficSpec {
            pattern: Pattern::Cbr,
            rate: TrafficRate::Packets(10000.0),
            sizes: vec![(1000, 1)],
            duration_ns: 10_000_000_000
        }
    );
    let s = spec("poisson 10mbit 64B,576b:4,1500B 500ms");
    assert_eq!(s.pattern, Pattern::Poisson);
    assert_eq!(s.rate, TrafficRate::Bits(10_000_000));
    assert_eq!(s.sizes, vec![(64, 1), (576, 4), (1500, 1)]);
    assert_eq!(s.duration_ns, 500_000_000);
    let s = spec("onoff 1.5kpps 42B 1s on 100ms off 400ms exp");
    assert_eq!(
        s.pattern,
        Pattern::OnOff {
            on_ns: 100_000_000,
            off_ns: 400_000_000,
            exponential: true
        }
    );
    assert_eq!(s.rate, TrafficRate::Packets(1500.0));
}

#[test]
fn display_reads_back_as_the_same_spec() {
    for text in [
        "cbr 10000pps 1000B 10s",
        "poisson 10mbit 64B:7,576B:4,1500B 30s",
        "onoff 1500pps 42B,65535B 1500ms on 100ms off 400ms exp",
        "onoff 1gbit 100B 1s on 1ms off 2ms",
    ] {
        let s = spec(text);
        assert_eq!(s.to_string(), text);
        assert_eq!(spec(&s.to_string()), s);
    }
}

#[test]
fn bad_specs_name_the_word_and_the_valid_range() {
    let cases: [(&str, &str); 12] = [
        ("", "missing a pattern"),
        (
            "burst 10pps 100B 1s",
            "unknown pattern \"burst\": expected cbr, poisson or onoff",
        ),
        (
            "cbr 10xps 100B 1s",
            "rate \"10xps\": expected a packet rate from 1pps to 1000000000pps",
        ),
        ("cbr 0pps 100B 1s", "rate \"0pps\""),
        ("cbr 10000 100B 1s", "rate \"10000\""),
        (
            "cbr 10pps 41B 1s",
            "frame sizes \"41B\": expected frame sizes from 42B to 65535B",
        ),
        ("cbr 10pps 65536B 1s", "frame sizes \"65536B\""),
        ("cbr 10pps 64B:0 1s", "frame sizes \"64B:0\""),
        (
            "cbr 10pps 100B 10",
            "duration \"10\": expected a time above 0 with its unit",
        ),
        ("cbr 10pps 100B 1s extra", "unexpected \"extra\""),
        ("onoff 10pps 100B 1s on 1ms", "missing off"),
        (
            "onoff 10pps 100B 1s on 1ms off 0ms",
            "off \"0ms\": expected a time above 0",
        ),
    ];
    for (text, message) in cases {
        let err: TrafficSpecError = text.parse::<TrafficSpec>().unwrap_err();
        assert!(err.to_string().starts_with(message), "{text:?} gave {err}");
    }
}

#[test]
fn cbr_sends_exactly_rate_times_duration_evenly_spaced() {
    let t = times("cbr 10000pps 1000B 10s", 1);
    assert_eq!(t.len(), 100_000);
    assert_eq!(t[0], 0);
    assert!(
        t.windows(2).all(|w| w[1] - w[0] == 100_000),
        "every gap is 100 µs"
    );
}

#[test]
fn cbr_at_a_fractional_interval_does_not_drift() {
    // 3 pps: 333 333 333.3… ns apart; arrival k is k/3 s rounded to the ns.
    let t = times("cbr 3pps 100B 100s", 1);
    assert_eq!(t.len(), 300);
    for (k, &ts) in t.iter().enumerate() {
        assert_eq!(ts, (k as u64 * 1_000_000_000 + 1) / 3, "arrival {k}");
    }
}

#[test]
fn cbr_at_a_bit_rate_spaces_frames_by_their_own_length() {
    // At 8 Mbit/s a byte takes 1 µs: 100B then 200B then 100B …
    let t = times("cbr 8mbit 100B,200B 1ms", 1);
    let expected: Vec<u64> = (0..)
        .map(|k: u64| (k / 2) * 300_000 + (k % 2) * 100_000)
        .take_while(|&t| t < 1_000_000)
        .collect();
    assert_eq!(t, expected);
}

#[test]
fn sizes_cycle_with_their_weights() {
    let sizes: Vec<usize> = frames("cbr 1000pps 64B:2,1500B 10ms", 1)
        .iter()
        .map(|(_, d)| d.len())
        .collect();
    assert_eq!(sizes, [64, 64, 1500, 64, 64, 1500, 64, 64, 1500, 64]);
}

#[test]
fn poisson_count_and_gaps_match_an_exponential_process() {
    let t = times("poisson 10000pps 100B 10s", 7);
    let n = t.len() as f64;
    // The count of a Poisson process with mean λT = 100 000 has σ = √100 000 ≈ 316; allow 5σ.
    assert!((n - 100_000.0).abs() < 5.0 * 316.3, "count {n}");
    let gaps: Vec<f64> = t.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let m = gaps.len() as f64;
    let mean = gaps.iter().sum::<f64>() / m;
    // Exponential gaps, mean 100 µs: the sample mean has σ = 100 µs/√m ≈ 0.32 %; allow 5σ.
    assert!(
        (mean / 100_000.0 - 1.0).abs() < 5.0 / m.sqrt(),
        "mean gap {mean}"
    );
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / (m - 1.0);
    // Var = mean² for an exponential; the sample variance's relative σ is √(8/m) (its fourth
    // moment is 9σ⁴) ≈ 0.9 %; allow 5σ.
    assert!(
        (var / (mean * mean) - 1.0).abs() < 5.0 * (8.0 / m).sqrt(),
        "variance ratio {}",
        var / (mean * mean)
    );
    // P(gap > mean) = 1/e; the fraction's σ is √(p(1−p)/m) ≈ 0.15 %; allow 5σ.
    let p = 1.0 / std::f64::consts::E;
    let above = gaps.iter().filter(|&&g| g > 100_000.0).count() as f64 / m;
    assert!(
        (above - p).abs() < 5.0 * (p * (1.0 - p) / m).sqrt(),
        "fraction above the mean {above}"
    );
}

#[test]
fn poisson_at_a_bit_rate_uses_the_mean_frame_size() {
    // 8 Mbit/s over frames of mean (500 + 1500) / 2 = 1000 B: 1000 frames/s, 10 000 in 10 s.
    let n = times("poisson 8mbit 500B,1500B 10s", 3).len() as f64;
    // σ = √10 000 = 100; allow 5σ.
    assert!((n - 10_000.0).abs() < 500.0, "count {n}");
}

#[test]
fn the_seed_decides_poisson_arrivals() {
    let a = times("poisson 1000pps 100B 1s", 1);
    assert_eq!(a, times("poisson 1000pps 100B 1s", 1));
    assert_ne!(a, times("poisson 1000pps 100B 1s", 2));
}

#[test]
fn fixed_onoff_sends_bursts_in_on_periods_only() {
    // 10 000 pps during 100 ms on, then 400 ms off: 1000 frames per 500 ms cycle, 20 cycles.
    let t = times("onoff 10000pps 1000B 10s on 100ms off 400ms", 1);
    assert_eq!(t.len(), 20_000);
    for (k, &ts) in t.iter().enumerate() {
        let (cycle, i) = (k as u64 / 1000, k as u64 % 1000);
        assert_eq!(ts, cycle * 500_000_000 + i * 100_000, "frame {k}");
    }
}

#[test]
fn exponential_onoff_keeps_the_duty_cycle() {
    // Mean on 10 ms, off 40 ms: the duty cycle p is 1/5, so 10 000 pps × 100 s × p = 200 000
    // frames on average. By the renewal-reward CLT the on time in T has variance
    // T·Var(X_on(1−p) − X_off·p)/E[cycle] = 100 s × (0.64·(10 ms)² + 0.04·(40 ms)²)/50 ms
    // = 0.256 s², σ ≈ 0.506 s, i.e. ≈ 5060 frames; allow 5σ.
    let t = times("onoff 10000pps 100B 100s on 10ms off 40ms exp", 11);
    let n = t.len() as f64;
    assert!((n - 200_000.0).abs() < 5.0 * 5_060.0, "count {n}");
    // Within a burst frames are 100 µs apart; a longer gap ends a burst (an off period).
    let gaps: Vec<u64> = t.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().filter(|&&g| g < 100_000).count() < 2000,
        "only burst ends come closer"
    );
    let bursts = gaps.iter().filter(|&&g| g > 100_000).count();
    // About T/E[cycle] = 2000 cycles, σ = √(T·Var(cycle)/E[cycle]³) = √1360 ≈ 37; the wide band
    // also allows for the rare off period too short to separate two bursts.
    assert!(
        (1800..2200).contains(&bursts),
        "about 2000 on periods, got {bursts}"
    );
}

#[test]
fn onoff_with_periods_shorter_than_the_frame_gap_keeps_the_average_rate() {
    // 10 pps, 1 µs on, 1 µs off: the old generator sent a frame at the start of every on
    // period, 500 000 pps; the load must be 10 pps × 1/2.
    let t = times("onoff 10pps 100B 10s on 1us off 1us", 1);
    assert_eq!(t.len(), 50);
    // Frame k is due after k × 100 ms of on time, i.e. 2k × 100 ms of time.
    for (k, &ts) in t.iter().enumerate() {
        assert_eq!(ts, k as u64 * 200_000_000, "frame {k}");
    }
    let t = times("onoff 10pps 100B 10s on 1us off 1us exp", 3);
    assert!((40..=60).contains(&t.len()), "{} frames", t.len());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever the periods' lengths, fixed periods offer rate × on/(on + off) on average:
    /// within the frames of one on period, and of the on period cut by the run's end.
    #[test]
    fn onoff_offers_rate_times_the_on_share(
        pps in 1u64..=10_000,
        on_us in 1u64..=1_000_000,
        off_us in 1u64..=1_000_000,
    ) {
        let duration_ns: u64 = 2_000_000_000;
        let text = format!("onoff {pps}pps 100B 2s on {on_us}us off {off_us}us");
        let n = times(&text, 1).len() as f64;
        let (on, off) = ((on_us * 1_000) as f64, (off_us * 1_000) as f64);
        // On time within the run: whole cycles, then the last one's on part, cut by the end.
        let cycle = on + off;
        let whole = (duration_ns as f64 / cycle).floor();
        let on_time = whole * on + (duration_ns as f64 - whole * cycle).min(on);
        let expected = pps as f64 * on_time / 1e9;
        prop_assert!(
            (n - expected).abs() <= 1.0 + 1e-9 * expected,
            "{text}: {n} frames, expected {expected}"
        );
    }
}

/// Checks a frame as a receiver would, from the bytes alone.
fn check_frame(data: &[u8], seq: u64) {
    assert_eq!(&data[12..14], &[0x08, 0x00], "IPv4 ethertype");
    let ip = &data[14..34];
    assert_eq!(ip[0], 0x45);
    assert_eq!(
        u16::from_be_bytes([ip[2], ip[3]]) as usize,
        data.len() - 14,
        "IP total length"
    );
    assert_eq!(
        u16::from_be_bytes([ip[4], ip[5]]),
        seq as u16,
        "IP identification"
    );
    assert_eq!(ip[9], 17);
    assert_eq!(internet_checksum(ip), 0, "IP header checksum");
    let udp = &data[34..];
    assert_eq!(
        u16::from_be_bytes([udp[4], udp[5]]) as usize,
        udp.len(),
        "UDP length"
    );
    assert_ne!(&udp[6..8], &[0, 0], "UDP checksum present");
    let pseudo = [&ip[12..20], &[0, 17], &udp[4..6]].concat();
    assert_eq!(
        fold(sum_words(&pseudo) + sum_words(udp)),
        0xffff,
        "UDP checksum"
    );
    let payload = &udp[8..];
    if payload.len() >= 8 {
        assert_eq!(
            u64::from_be_bytes(payload[..8].try_into().unwrap()),
            seq,
            "sequence number"
        );
    }
}

#[test]
fn frames_are_valid_udp_with_sequence_numbers() {
    let all = frames("cbr 100000pps 42B,43B,49B,50B,51B,1500B,9001B,65535B 1s", 1);
    assert_eq!(all.len(), 100_000);
    for (seq, (_, data)) in all.iter().enumerate() {
        check_frame(data, seq as u64);
    }
}

/// `rtemu-capture/tests/data/traffic-cbr.pcap` is built by its `make_captures.py` from the frame
/// layout documented in `src/traffic.rs`, with its own checksum code.
#[test]
fn generated_frames_match_the_golden_capture() {
    let mut gen = TrafficGen::new(&spec("cbr 1000pps 42B,49B,50B,64B:2,1500B 10ms"), 1);
    let mut writer = PcapWriter::new(Vec::new(), gen.link_type()).unwrap();
    while let Some(frame) = gen.next_frame().unwrap() {
        writer.write_frame(&frame).unwrap();
    }
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../rtemu-capture/tests/data/traffic-cbr.pcap"
    );
    assert_eq!(writer.finish().unwrap(), std::fs::read(path).unwrap());
}

#[test]
fn the_generator_reports_its_link_type_and_progress() {
    let mut gen = TrafficGen::new(&spec("cbr 10pps 100B 1s"), 1);
    assert_eq!(gen.link_type(), LINKTYPE_ETHERNET);
    let p = gen.progress();
    assert_eq!(
        (p.done, p.total, p.unit),
        (0, Some(1_000_000_000), ProgressUnit::VirtualNanos)
    );
    for _ in 0..6 {
        gen.next_frame().unwrap();
    }
    assert_eq!(gen.progress().done, 500_000_000);
    while gen.next_frame().unwrap().is_some() {}
    assert_eq!(gen.progress().done, 1_000_000_000);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    /// Any size list and seed: frames valid, arrivals ordered and inside the duration.
    #[test]
    fn any_spec_gives_valid_ordered_frames(
        sizes in prop::collection::vec((42u16..=2000, 1u32..4), 1..5),
        pattern in 0..3usize,
        seed in any::<u64>(),
    ) {
        let list: Vec<String> = sizes.iter().map(|(s, w)| format!("{s}B:{w}")).collect();
        let kind = ["cbr 2000pps", "poisson 2mbit", "onoff 5000pps"][pattern];
        let tail = if pattern == 2 { " on 3ms off 7ms exp" } else { "" };
        let text = format!("{kind} {} 200ms{tail}", list.join(","));
        let all = frames(&text, seed);
        prop_assert!(!all.is_empty());
        prop_assert!(all.windows(2).all(|w| w[0].0 <= w[1].0));
        prop_assert!(all.iter().all(|(t, _)| *t < 200_000_000));
        for (seq, (_, data)) in all.iter().enumerate() {
            check_frame(data, seq as u64);
        }
    }

    /// No word, however odd, makes the parser panic; errors always name something.
    #[test]
    fn random_specs_never_panic(words in prop::collection::vec("[a-z0-9.,:]{0,8}", 0..9)) {
        if let Err(e) = words.join(" ").parse::<TrafficSpec>() {
            prop_assert!(!e.to_string().is_empty());
        }
    }
}

proptest! {
    /// A traffic spec's duration reads as rtemu's one duration parser reads it (a unit
    /// required, above 0, at most half of u64's range so that time arithmetic has room):
    /// `1.5ms` means the same here as in a netem line or a trace.
    #[test]
    fn durations_read_as_the_one_parser_reads_them(
        text in "[0-9]{0,3}(\\.[0-9]{0,4})?(e-?[0-9])?(ns|us|µs|ms|s|m|sec|min|)",
    ) {
        let one = parse_duration_ns(&text, None)
            .ok()
            .filter(|&ns| ns > 0 && ns <= u64::MAX / 2);
        let ours = format!("cbr 10pps 100B {text}")
            .parse::<TrafficSpec>()
            .ok()
            .map(|s| s.duration_ns);
        prop_assert_eq!(ours, one, "{}", text);
    }
}

#[test]
fn a_duration_past_half_of_u64_is_refused_and_one_below_it_read() {
    // 9.3e18 ns fits a u64 but not the room time arithmetic needs (found by the property
    // test above with "93e8sec").
    assert!("cbr 10pps 100B 93e8sec".parse::<TrafficSpec>().is_err());
    let below = "cbr 10pps 100B 92e8sec".parse::<TrafficSpec>().unwrap();
    assert_eq!(below.duration_ns, 9_200_000_000_000_000_000);
}
