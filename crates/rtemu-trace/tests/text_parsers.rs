//! Fuzz and property tests for the text readers other than the action trace's: the delay/loss
//! time series, Mahimahi delivery-opportunity traces and flow patterns.
//!
//! For each: arbitrary bytes or text never panic; an error names a line (and column) inside the
//! input; and generated valid inputs load with the values written.

use proptest::prelude::*;
use rtemu_trace::duration::format_duration;
use rtemu_trace::flow::{IpNet, PortRange};
use rtemu_trace::mahimahi::{self, OpportunityReader, OpportunityStream};
use rtemu_trace::series::{self, Interpolation, Sample, SeriesReader, SeriesStream};
use rtemu_trace::{ErrorKind, FlowPattern, TraceError, UnderrunPolicy};
use std::io::Cursor;
use std::net::{Ipv4Addr, Ipv6Addr};

const CASES: u32 = 256;

/// The lines of `bytes` as `BufRead::lines` numbers them (from 1), lossily decoded.
fn lines_of(bytes: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = bytes
        .split(|&b| b == b'\n')
        .map(|l| String::from_utf8_lossy(l).into_owned())
        .collect();
    if bytes.ends_with(b"\n") {
        v.pop();
    }
    v
}

/// Checks that a reader's error is "empty" or a syntax error whose line exists and whose column
/// lies within that line (or just past its end, where something is missing).
fn check_error_place(bytes: &[u8], e: &TraceError) -> Result<(), TestCaseError> {
    match e.kind() {
        ErrorKind::Empty => Ok(()),
        ErrorKind::Syntax { line, column, .. } => {
            let lines = lines_of(bytes);
            prop_assert!(
                *line >= 1 && *line as usize <= lines.len(),
                "line {} of {}: {}",
                line,
                lines.len(),
                e
            );
            let l = &lines[*line as usize - 1];
            prop_assert!(
                *column >= 1 && *column <= l.chars().count() as u64 + 1,
                "column {} of {:?}: {}",
                column,
                l,
                e
            );
            Ok(())
        }
        k => Err(TestCaseError::fail(format!("not a syntax error: {k}"))),
    }
}

// ---------------------------------------------------------------------------------------------
// Delay/loss time series

/// `text` streamed as a series, waiting for its reader.
fn series_stream(text: &[u8], interp: Interpolation) -> SeriesStream {
    let r = SeriesReader::new(Cursor::new(text.to_vec()));
    SeriesStream::spawn(r, interp, UnderrunPolicy::Wait, |e| e).unwrap()
}

/// Writes a time in ns in one of several equivalent ways (bare numbers are seconds).
fn write_time(ns: u64, style: u8) -> String {
    match style % 4 {
        0 => format!("{ns}ns"),
        1 => format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000),
        2 => format_duration(ns),
        _ if ns % 1_000 == 0 => format!("{}µs", ns / 1_000),
        _ => format!("{}.{:03}us", ns / 1_000, ns % 1_000),
    }
}

/// Writes a delay in ns in one of several equivalent ways (bare numbers are ms).
fn write_delay(ns: u64, style: u8) -> String {
    match style % 4 {
        0 => format!("{ns}ns"),
        1 => format!("{}.{:06}", ns / 1_000_000, ns % 1_000_000),
        2 => format_duration(ns),
        _ if ns % 1_000_000 == 0 => format!("{}", ns / 1_000_000),
        _ => format!("{}.{:09}s", ns / 1_000_000_000, ns % 1_000_000_000),
    }
}

fn write_loss(lost: bool, style: u8) -> &'static str {
    match (lost, style % 3) {
        (false, 0) => "",
        (false, 1) => "0",
        (false, _) => "ok",
        (true, 0 | 1) => "1",
        (true, _) => "lost",
    }
}

/// How one sample is written: the styles of its time, delay and loss, and its line's layout.
type Style = (u8, u8, u8, u8);

/// Samples with strictly increasing times, and a writing style for each.
fn series_samples() -> impl Strategy<Value = (Vec<Sample>, Vec<Style>)> {
    proptest::collection::vec(
        (
            1u64..3_000_000_000,
            prop_oneof![
                0u64..2_000_000_000,
                (0u64..2_000).prop_map(|ms| ms * 1_000_000)
            ],
            any::<bool>(),
            any::<Style>(),
        ),
        1..40,
    )
    .prop_map(|v| {
        let mut t = 0u64;
        let mut first = true;
        v.into_iter()
            .map(|(dt, delay_ns, lost, style)| {
                // The first sample may be at time 0.
                t += if std::mem::take(&mut first) {
                    dt - 1
                } else {
                    dt
                };
                (
                    Sample {
                        time_ns: t,
                        delay_ns,
                        lost,
                    },
                    style,
                )
            })
            .unzip()
    })
}

fn write_series(samples: &[Sample], styles: &[Style]) -> String {
    let mut text = String::from("# time delay lost\n");
    for (s, &(ts, ds, ls, layout)) in samples.iter().zip(styles) {
        let sep = if layout & 1 == 0 { " " } else { "\t  " };
        if layout & 2 != 0 {
            text.push_str("   \n");
        }
        if layout & 4 != 0 {
            text.push_str("  ");
        }
        text.push_str(&write_time(s.time_ns, ts));
        text.push_str(sep);
        text.push_str(&write_delay(s.delay_ns, ds));
        let loss = write_loss(s.lost, ls);
        if !loss.is_empty() {
            text.push_str(sep);
            text.push_str(loss);
        }
        if layout & 8 != 0 {
            text.push_str(" # a comment, 1 2 3");
        }
        text.push_str(if layout & 16 != 0 { "\r\n" } else { "\n" });
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn series_from_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        match series::read_all(&bytes[..]) {
            Ok(samples) => {
                prop_assert!(samples.len() <= lines_of(&bytes).len());
                for interp in [Interpolation::Step, Interpolation::Linear] {
                    let mut s = series_stream(&bytes, interp);
                    let first = s.at(0).unwrap();
                    prop_assert_eq!((first.delay_ns, first.lost), (samples[0].delay_ns, samples[0].lost));
                    let last = s.at(u64::MAX).unwrap();
                    let want = samples[samples.len() - 1];
                    prop_assert_eq!((last.delay_ns, last.lost), (want.delay_ns, want.lost));
                }
            }
            Err(e) => check_error_place(&bytes, &e)?,
        }
    }

    #[test]
    fn series_errors_point_inside_the_input(
        text in "([ \t\u{3000}é]{0,2}(([0-9]{1,3}|\\.|ns|us|µs|ms|s|ok|lost|0|1|#|x|é)[ \t\u{3000}]{0,2}){0,4}\r?\n){0,8}([0-9 .a-z#µ\u{3000}]){0,10}"
    ) {
        let bytes = text.as_bytes();
        match series::read_all(bytes) {
            Ok(samples) => {
                prop_assert!(samples.windows(2).all(|w| w[0].time_ns < w[1].time_ns));
                let mut s = series_stream(bytes, Interpolation::Linear);
                for x in &samples {
                    let l = s.at(x.time_ns).unwrap();
                    prop_assert_eq!((l.delay_ns, l.lost), (x.delay_ns, x.lost));
                }
            }
            Err(e) => check_error_place(bytes, &e)?,
        }
    }

    #[test]
    fn generated_series_load_with_the_values_written((samples, styles) in series_samples()) {
        let text = write_series(&samples, &styles);
        let read = series::read_all(text.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&read, &samples);
        let mut step = series_stream(text.as_bytes(), Interpolation::Step);
        let mut linear = series_stream(text.as_bytes(), Interpolation::Linear);
        // Before the first sample the first applies.
        let (first, last) = (samples[0], samples[samples.len() - 1]);
        prop_assert_eq!(step.at(0).unwrap().delay_ns, first.delay_ns);
        prop_assert_eq!(linear.at(0).unwrap().delay_ns, first.delay_ns);
        for (i, s) in samples.iter().enumerate() {
            // At a sample's time both interpolations give the sample.
            for stream in [&mut step, &mut linear] {
                let l = stream.at(s.time_ns).unwrap();
                prop_assert_eq!((l.delay_ns, l.lost), (s.delay_ns, s.lost), "sample {}", i);
            }
            // Just before the next sample, step still holds this one; linear lies between them.
            if let Some(n) = samples.get(i + 1) {
                let before = n.time_ns - 1;
                let l = step.at(before).unwrap();
                prop_assert_eq!((l.delay_ns, l.lost), (s.delay_ns, s.lost));
                let l = linear.at(before).unwrap();
                prop_assert!(l.delay_ns >= s.delay_ns.min(n.delay_ns));
                prop_assert!(l.delay_ns <= s.delay_ns.max(n.delay_ns));
                prop_assert_eq!(l.lost, s.lost);
            }
        }
        // After the last, the last holds.
        prop_assert_eq!(linear.at(last.time_ns + 12_345).unwrap().delay_ns, last.delay_ns);
        prop_assert!(linear.past_end(last.time_ns + 12_345));
        prop_assert_eq!(linear.samples_read(), samples.len() as u64);
    }

    #[test]
    fn a_series_going_backwards_names_the_line(
        (samples, styles) in series_samples().prop_filter("two samples", |(s, _)| s.len() >= 2),
        pick in any::<proptest::sample::Index>(),
    ) {
        // Swap the times of two neighbours so that the later line goes backwards.
        let mut samples = samples;
        let i = pick.index(samples.len() - 1);
        let (a, b) = (samples[i].time_ns, samples[i + 1].time_ns);
        samples[i].time_ns = b;
        samples[i + 1].time_ns = a;
        let text = write_series(&samples, &styles);
        let e = series::read_all(text.as_bytes()).unwrap_err();
        // The bad line is the one holding sample i + 1 (with sample i's new time, it repeats or
        // goes back).
        let bad_line = text
            .split('\n')
            .enumerate()
            .filter(|(_, l)| {
                let body = l.split('#').next().unwrap();
                !body.trim().is_empty()
            })
            .nth(i + 1)
            .map(|(n, _)| n as u64 + 1)
            .unwrap();
        match e.kind() {
            ErrorKind::Syntax { line, .. } => prop_assert_eq!(*line, bad_line, "{}", e),
            k => prop_assert!(false, "not a syntax error: {}", k),
        }
        prop_assert!(e.to_string().contains("goes backwards"), "{}", e);
        check_error_place(text.as_bytes(), &e)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Mahimahi delivery-opportunity traces

/// `text` streamed as a delivery-opportunity trace, waiting for its reader.
fn mahimahi_stream(text: &[u8]) -> OpportunityStream {
    let r = OpportunityReader::new(Cursor::new(text.to_vec()));
    OpportunityStream::spawn(r, true, |e| e).unwrap()
}

/// Non-decreasing opportunity times in ms whose last is positive, with a layout for each line.
fn mahimahi_times() -> impl Strategy<Value = (Vec<u64>, Vec<u8>)> {
    proptest::collection::vec(
        (prop_oneof![Just(0u64), 0u64..5, 0u64..200], any::<u8>()),
        1..80,
    )
    .prop_map(|v| {
        let mut t = 0;
        let (mut times, layouts): (Vec<u64>, Vec<u8>) = v
            .into_iter()
            .map(|(dt, layout)| {
                t += dt;
                (t, layout)
            })
            .unzip();
        if t == 0 {
            *times.last_mut().unwrap() = 1;
        }
        (times, layouts)
    })
}

fn write_mahimahi(times: &[u64], layouts: &[u8], extensions: bool) -> String {
    let mut text = String::new();
    for (&t, &layout) in times.iter().zip(layouts) {
        if extensions && layout & 1 != 0 {
            text.push_str("# a comment 12\n\n");
        }
        if extensions && layout & 2 != 0 {
            text.push_str(" \t");
        }
        text.push_str(&t.to_string());
        if extensions && layout & 4 != 0 {
            text.push_str("  # 99");
        }
        text.push('\n');
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn mahimahi_from_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        match mahimahi::read_all(&bytes[..]) {
            Ok(times) => {
                prop_assert!(times.len() <= lines_of(&bytes).len());
                prop_assert!(times[times.len() - 1] > 0);
                let mut s = mahimahi_stream(&bytes);
                prop_assert_eq!(s.time_ns(), times[0] * 1_000_000);
                prop_assert!(s.advance().unwrap());
            }
            Err(e) => check_error_place(&bytes, &e)?,
        }
    }

    #[test]
    fn mahimahi_errors_point_inside_the_input(
        text in "([ \t\u{3000}é]{0,2}([0-9]{1,4}|99999999999999999999|18446744073709551|9223372036854|-1|\\+5|x|é|)[ \t\u{3000}]{0,2}(#[0-9 ]{0,3})?\r?\n){0,8}([0-9 x#\u{3000}]){0,6}"
    ) {
        let bytes = text.as_bytes();
        match mahimahi::read_all(bytes) {
            Ok(times) => {
                prop_assert!(times[times.len() - 1] > 0);
                prop_assert!(times.len() <= lines_of(bytes).len());
            }
            Err(e) => check_error_place(bytes, &e)?,
        }
    }

    #[test]
    fn generated_mahimahi_traces_give_their_opportunities_and_period(
        (times, layouts) in mahimahi_times(),
        extensions in any::<bool>(),
    ) {
        let text = write_mahimahi(&times, &layouts, extensions);
        let read = mahimahi::read_all(text.as_bytes())
            .map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        prop_assert_eq!(&read, &times);
        let period_ms = *times.last().unwrap();
        // Walking from 0 gives every line's time, then again shifted by the period.
        let mut s = mahimahi_stream(text.as_bytes());
        for cycle in 0..3 {
            for &ms in &times {
                prop_assert_eq!(s.time_ns(), (cycle * period_ms + ms) * 1_000_000);
                prop_assert!(s.advance().unwrap());
            }
        }
        // Skipping to an opportunity's time, in any later cycle, lands on the first
        // opportunity then.
        for (i, &ms) in times.iter().enumerate() {
            let first = times.iter().position(|&x| x == ms).unwrap();
            if first == i && ms < period_ms {
                let mut s = mahimahi_stream(text.as_bytes());
                for cycle in [0, 1, 5, 1_000] {
                    let t = (cycle * period_ms + ms) * 1_000_000;
                    prop_assert!(s.skip_to(t).unwrap());
                    prop_assert_eq!(s.time_ns(), t);
                }
            }
        }
        let bps = mahimahi::mean_rate_bps(times.len() as u64, period_ms, 1500);
        let want = times.len() as f64 * 1500.0 * 8.0 / (period_ms as f64 * 1e-3);
        prop_assert!((bps - want).abs() <= want * 1e-9);
    }

    #[test]
    fn a_decreasing_mahimahi_time_names_the_line(
        (times, layouts) in mahimahi_times().prop_filter("a positive step", |(t, _)| t.windows(2).any(|w| w[1] > w[0])),
        extensions in any::<bool>(),
    ) {
        // Swap the two sides of the first increase, so that line i goes back below line i − 1.
        let mut times = times;
        let i = times.windows(2).position(|w| w[1] > w[0]).unwrap() + 1;
        times.swap(i - 1, i);
        let text = write_mahimahi(&times, &layouts, extensions);
        let e = mahimahi::read_all(text.as_bytes()).unwrap_err();
        let bad_line = text
            .split('\n')
            .enumerate()
            .filter(|(_, l)| !l.split('#').next().unwrap().trim().is_empty())
            .nth(i)
            .map(|(n, _)| n as u64 + 1)
            .unwrap();
        match e.kind() {
            ErrorKind::Syntax { line, column, .. } => {
                prop_assert_eq!(*line, bad_line, "{}", e);
                let l = text.split('\n').nth(bad_line as usize - 1).unwrap();
                let at = l.chars().skip(*column as usize - 1).collect::<String>();
                prop_assert!(at.starts_with(&times[i].to_string()), "column {} of {:?}", column, l);
            }
            k => prop_assert!(false, "not a syntax error: {}", k),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Flow patterns

/// Checks an error's column: it must be where a field (a run of non-whitespace) starts.
fn check_flow_error(s: &str, column: usize) -> Result<(), TestCaseError> {
    let chars: Vec<char> = s.chars().collect();
    prop_assert!(
        column >= 1 && column <= chars.len(),
        "column {} of {:?}",
        column,
        s
    );
    prop_assert!(
        !chars[column - 1].is_whitespace(),
        "column {} of {:?}",
        column,
        s
    );
    prop_assert!(
        column == 1 || chars[column - 2].is_whitespace(),
        "column {} of {:?}",
        column,
        s
    );
    Ok(())
}

fn check_flow_text(s: &str) -> Result<(), TestCaseError> {
    match s.parse::<FlowPattern>() {
        // What parses is printed in a form that parses back to the same pattern.
        Ok(p) => prop_assert_eq!(p.to_string().parse::<FlowPattern>(), Ok(p)),
        Err(e) => check_flow_error(s, e.column)?,
    }
    Ok(())
}

/// Writes an address in a non-canonical but equivalent way: host bits set below the prefix.
fn write_net(n: &IpNet, noise: u128) -> String {
    let host = match n.addr() {
        std::net::IpAddr::V4(a) => {
            let mask = u32::MAX.checked_shr(u32::from(n.prefix())).unwrap_or(0);
            Ipv4Addr::from(u32::from(a) | (noise as u32 & mask)).to_string()
        }
        std::net::IpAddr::V6(a) => {
            let mask = u128::MAX.checked_shr(u32::from(n.prefix())).unwrap_or(0);
            Ipv6Addr::from(u128::from(a) | (noise & mask)).to_string()
        }
    };
    format!("{host}/{}", n.prefix())
}

fn net() -> impl Strategy<Value = IpNet> {
    prop_oneof![
        (any::<u32>(), 0u8..=32)
            .prop_map(|(a, p)| IpNet::new(Ipv4Addr::from(a).into(), p).unwrap()),
        (any::<u128>(), 0u8..=128)
            .prop_map(|(a, p)| IpNet::new(Ipv6Addr::from(a).into(), p).unwrap()),
    ]
}

fn ports() -> impl Strategy<Value = (u16, u16)> {
    (any::<u16>(), any::<u16>()).prop_map(|(a, b)| (a.min(b), a.max(b)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    #[test]
    fn flow_patterns_from_arbitrary_text_never_panic(s in "\\PC{0,40}") {
        check_flow_text(&s)?;
    }

    #[test]
    fn flow_errors_point_at_the_bad_field(
        s in "((src|dst|sport|dport|proto|=|\\*|/|-|:|\\.|[0-9]{1,3}|[a-f]|tcp|UDP|icmpv6|::|10\\.0\\.0\\.1| |\t|\u{3000}|é)){0,16}"
    ) {
        check_flow_text(&s)?;
    }

    #[test]
    fn generated_patterns_parse_to_what_was_written(
        src in proptest::option::of((net(), any::<u128>())),
        dst in proptest::option::of((net(), any::<u128>())),
        sport in proptest::option::of(ports()),
        dport in proptest::option::of(ports()),
        proto in proptest::option::of((any::<u8>(), any::<bool>())),
        stars in any::<u8>(),
        order in Just([0usize, 1, 2, 3, 4]).prop_shuffle(),
        seps in proptest::collection::vec(prop_oneof![Just(" "), Just("  "), Just("\t"), Just(" \n ")], 6),
    ) {
        let want = FlowPattern {
            src: src.map(|(n, _)| n),
            dst: dst.map(|(n, _)| n),
            sport: sport.map(|(lo, hi)| PortRange::new(lo, hi).unwrap()),
            dport: dport.map(|(lo, hi)| PortRange::new(lo, hi).unwrap()),
            proto: proto.map(|(p, _)| p),
        };
        let port_text = |(lo, hi): (u16, u16)| {
            if lo == hi && hi % 2 == 0 { lo.to_string() } else { format!("{lo}-{hi}") }
        };
        let proto_text = |(p, upper): (u8, bool)| {
            let name = match p { 1 => "icmp", 6 => "tcp", 17 => "udp", 58 => "icmpv6", 132 => "sctp", _ => "" };
            match (name, upper) {
                ("", _) => p.to_string(),
                (n, true) => n.to_uppercase(),
                (n, false) => n.to_owned(),
            }
        };
        let fields: [(&str, Option<String>); 5] = [
            ("src", src.map(|(n, noise)| write_net(&n, noise))),
            ("dst", dst.map(|(n, noise)| write_net(&n, noise))),
            ("sport", sport.map(port_text)),
            ("dport", dport.map(port_text)),
            ("proto", proto.map(proto_text)),
        ];
        let mut text = seps[5].to_owned();
        for (k, &i) in order.iter().enumerate() {
            let (key, value) = &fields[i];
            match value {
                Some(v) => text.push_str(&format!("{key}={v}")),
                // A wildcard is written `key=*` or left out.
                None if stars & (1 << i) != 0 => text.push_str(&format!("{key}=*")),
                None => continue,
            }
            text.push_str(seps[k]);
        }
        prop_assert_eq!(text.parse::<FlowPattern>(), Ok(want), "{:?}", text);
        prop_assert_eq!(want.to_string().parse::<FlowPattern>(), Ok(want));
    }
}

/// The series example of docs/formats.md reads as the page says it does.
#[test]
fn the_documented_series_example_is_read_as_documented() {
    let page = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/formats.md"),
    )
    .unwrap();
    let section = &page[page.find("## Delay/loss time series").unwrap()..];
    let start = section.find("```\n").unwrap() + 4;
    let example = &section[start..start + section[start..].find("```").unwrap()];
    let samples = series::read_all(Cursor::new(example.as_bytes())).unwrap();
    let got: Vec<(u64, u64, bool)> = samples
        .iter()
        .map(|s| (s.time_ns, s.delay_ns, s.lost))
        .collect();
    assert_eq!(
        got,
        [
            (0, 12_500_000, false),
            (100_000_000, 13_100_000, false),
            (200_000_000, 40_000_000, true),
            (300_000_000, 12_900_000, false),
        ]
    );
}
