//! The simulator end to end: golden outputs, determinism, accounting and ordering.

use std::io::Cursor;
use std::path::PathBuf;

use rtemu_model::link::NoTables;
use rtemu_model::{netem, LinkModel};
use rtemu_sim::capture::{CaptureReader, PcapWriter};
use rtemu_sim::engine::{self, FrameSink};
use rtemu_sim::fatelog::{FateLog, LogFormat};
use rtemu_sim::summary::Summary;

/// A small, fixed input: 400 UDP-like Ethernet frames of varying length, 100 µs apart, each
/// holding its index so that output frames can be traced back.
fn input_pcap() -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new(), 1).unwrap();
    for i in 0u32..400 {
        let len = 60 + (i * 37) % 1400;
        let mut frame = vec![0u8; len as usize];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        frame[14] = 0x45;
        frame[20..24].copy_from_slice(&i.to_be_bytes());
        w.write_packet(1_700_000_000_000_000_000 + i as u64 * 100_000, &frame, len)
            .unwrap();
    }
    w.finish().unwrap()
}

struct Collect(Vec<(u64, Vec<u8>)>);

impl FrameSink for Collect {
    fn deliver(&mut self, ts_ns: u64, data: &[u8], _: u32) -> std::io::Result<()> {
        self.0.push((ts_ns, data.to_vec()));
        Ok(())
    }
}

struct Pcap(PcapWriter<Vec<u8>>);

impl FrameSink for Pcap {
    fn deliver(&mut self, ts_ns: u64, data: &[u8], orig_len: u32) -> std::io::Result<()> {
        self.0
            .write_packet(ts_ns, data, orig_len)
            .map_err(std::io::Error::other)
    }
}

const MODEL: &str = "delay 2ms 1ms 20% distribution normal loss 5% duplicate 5% corrupt 5% ber 1e-5 reorder 5% rate 70mbit limit 8";

/// Runs the simulator on the fixed input: output pcap bytes, fate log, summary.
fn simulate(model: &str, seed: u64) -> (Vec<u8>, String, Summary) {
    let input = input_pcap();
    let mut source = CaptureReader::new(Cursor::new(input)).unwrap();
    let mut m = LinkModel::new(&netem::parse(model).unwrap(), &NoTables, seed, 0).unwrap();
    let mut sink = Pcap(PcapWriter::new(Vec::new(), 1).unwrap());
    let mut log = FateLog::new(Vec::new(), LogFormat::Csv).unwrap();
    let summary = engine::run(&mut source, &mut m, &mut sink, Some(&mut log), &mut |_| {}).unwrap();
    (
        sink.0.finish().unwrap(),
        String::from_utf8(log.finish().unwrap()).unwrap(),
        summary,
    )
}

fn golden(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name)
}

/// Compares with a golden file; `RTEMU_BLESS=1` rewrites it (review the diff before committing).
fn check_golden(name: &str, actual: &[u8]) {
    let path = golden(name);
    if std::env::var_os("RTEMU_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
    }
    let expected = std::fs::read(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with RTEMU_BLESS=1 to create it)",
            path.display()
        )
    });
    assert!(
        expected == actual,
        "{} differs from the simulator's output (RTEMU_BLESS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn output_and_fate_log_match_the_golden_files() {
    let (pcap, log, _) = simulate(MODEL, 7);
    check_golden("sim_out.pcap", &pcap);
    check_golden("sim_fates.csv", log.as_bytes());
}

#[test]
fn the_same_seed_gives_identical_bytes_and_another_seed_differs() {
    let (a, la, _) = simulate(MODEL, 11);
    let (b, lb, _) = simulate(MODEL, 11);
    let (c, _, _) = simulate(MODEL, 12);
    assert_eq!(a, b);
    assert_eq!(la, lb);
    assert_ne!(a, c);
}

#[test]
fn every_copy_is_accounted_for_and_output_is_in_delivery_order() {
    let (pcap, log, s) = simulate(MODEL, 3);
    assert_eq!(s.packets_in, 400);
    assert_eq!(s.packets_in + s.duplicated, s.delivered + s.dropped_total());
    assert!(
        s.dropped["loss"] > 0 && s.dropped["queue-full"] > 0 && s.duplicated > 0 && s.corrupted > 0
    );
    // One log line per copy, plus the header.
    assert_eq!(
        log.lines().count() as u64,
        1 + s.delivered + s.dropped_total()
    );

    let mut reader = CaptureReader::new(Cursor::new(pcap)).unwrap();
    let mut last = 0;
    let mut n = 0;
    while let Some(f) = reader.next_frame().unwrap() {
        assert!(f.ts_ns >= last, "output not in delivery order");
        last = f.ts_ns;
        n += 1;
    }
    assert_eq!(n, s.delivered);
}

#[test]
fn corrupted_copies_differ_from_their_input_in_exactly_the_logged_bits() {
    let (_, log, _) = simulate("corrupt 30% ber 1e-4", 5);
    let input = input_pcap();
    let mut frames = Vec::new();
    let mut r = CaptureReader::new(Cursor::new(input)).unwrap();
    while let Some(f) = r.next_frame().unwrap() {
        frames.push(f.data.to_vec());
    }
    let mut source = CaptureReader::new(Cursor::new(input_pcap())).unwrap();
    let mut m = LinkModel::new(
        &netem::parse("corrupt 30% ber 1e-4").unwrap(),
        &NoTables,
        5,
        0,
    )
    .unwrap();
    let mut sink = Collect(Vec::new());
    engine::run(
        &mut source,
        &mut m,
        &mut sink,
        None::<&mut FateLog<Vec<u8>>>,
        &mut |_| {},
    )
    .unwrap();
    // No delay: output order is input order, one copy each.
    assert_eq!(sink.0.len(), frames.len());
    let mut corrupted = 0;
    for (line, ((_, out), input)) in log.lines().skip(1).zip(sink.0.iter().zip(&frames)) {
        let logged: Vec<u32> = line
            .split(',')
            .nth(6)
            .unwrap()
            .split(';')
            .filter(|s| !s.is_empty())
            .map(|s| s.parse().unwrap())
            .collect();
        let mut differing: Vec<u32> = Vec::new();
        for (i, (a, b)) in out.iter().zip(input).enumerate() {
            for bit in 0..8 {
                if (a ^ b) & (0x80 >> bit) != 0 {
                    differing.push(i as u32 * 8 + bit);
                }
            }
        }
        // A bit flipped twice (single flip and BER on the same bit) is back to its value.
        let mut expected: Vec<u32> = logged
            .iter()
            .copied()
            .filter(|b| logged.iter().filter(|x| *x == b).count() % 2 == 1)
            .collect();
        expected.sort_unstable();
        expected.dedup();
        assert_eq!(differing, expected, "{line}");
        corrupted += !logged.is_empty() as usize;
    }
    assert!(corrupted > 100, "{corrupted}");
}

/// A sink that counts deliveries and the bytes it was given, using no bytes itself.
struct Count {
    frames: u64,
    bytes: u64,
}

impl FrameSink for Count {
    fn deliver(&mut self, _: u64, data: &[u8], _: u32) -> std::io::Result<()> {
        self.frames += 1;
        self.bytes += data.len() as u64;
        Ok(())
    }

    fn wants_bytes(&self) -> bool {
        false
    }
}

/// The 400 input frames (about 290 kB) through a 100 ms delay: all 400 in flight at once.
fn run_delayed(
    sink: &mut dyn FrameSink,
    limits: engine::Limits,
) -> Result<Summary, engine::SimError> {
    let mut source = CaptureReader::new(Cursor::new(input_pcap())).unwrap();
    let mut m = LinkModel::new(&netem::parse("delay 100ms").unwrap(), &NoTables, 1, 0).unwrap();
    engine::run_with(
        &mut source,
        &mut m,
        sink,
        None::<&mut FateLog<Vec<u8>>>,
        &mut |_| {},
        limits,
    )
}

#[test]
fn copies_in_flight_are_bounded_with_a_clear_error() {
    let limits = engine::Limits {
        copies: 100,
        bytes: u64::MAX,
    };
    let e = run_delayed(
        &mut Count {
            frames: 0,
            bytes: 0,
        },
        limits,
    )
    .unwrap_err();
    assert!(
        matches!(
            e,
            engine::SimError::InFlight {
                seq: 100,
                copies: 101,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("shorten the delay"), "{e}");
    // Enough room: every copy gets through.
    let limits = engine::Limits {
        copies: 400,
        bytes: u64::MAX,
    };
    let s = run_delayed(
        &mut Count {
            frames: 0,
            bytes: 0,
        },
        limits,
    )
    .unwrap();
    assert_eq!(s.max_in_flight, 400);
}

#[test]
fn a_sink_that_writes_nothing_makes_the_run_keep_no_frame_bytes() {
    // No byte may be held: a sink that wants none still runs to the end...
    let no_bytes = engine::Limits {
        copies: 1_000,
        bytes: 0,
    };
    let mut count = Count {
        frames: 0,
        bytes: 0,
    };
    run_delayed(&mut count, no_bytes).unwrap();
    assert_eq!((count.frames, count.bytes), (400, 0));
    // ...while one that writes frames is stopped at its first copy, told it could drop --out.
    let e = run_delayed(&mut Collect(Vec::new()), no_bytes).unwrap_err();
    assert!(
        matches!(e, engine::SimError::InFlight { seq: 0, .. }),
        "{e}"
    );
    assert!(e.to_string().contains("leave out --out"), "{e}");
}
