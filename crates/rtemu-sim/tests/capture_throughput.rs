//! Throughput of the frame sources: a benchmark, not a test (ignored by default; it asserts
//! only the frame counts). Run with
//!
//! ```text
//! cargo test --release -p rtemu-sim --test capture_throughput -- --ignored --nocapture --test-threads 1
//! ```
//!
//! Captures are synthesised in memory while they are read, so the figures measure parsing,
//! not the disk, and a 10 GB capture needs no 10 GB file; the reader's memory stays at its
//! 256 KiB buffer however long the input.

use std::io::Read;
use std::time::Instant;

use rtemu_sim::capture::CaptureReader;
use rtemu_sim::source::FrameSource;
use rtemu_sim::traffic::{TrafficGen, TrafficSpec};

/// A capture made on the fly: a header, then `left` copies of one record.
struct Synthetic {
    head: Vec<u8>,
    record: Vec<u8>,
    pos: usize,
    left: u64,
}

impl Read for Synthetic {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if !self.head.is_empty() {
            let n = buf.len().min(self.head.len());
            buf[..n].copy_from_slice(&self.head[..n]);
            self.head.drain(..n);
            return Ok(n);
        }
        let mut n = 0;
        while n < buf.len() && self.left > 0 {
            let k = (buf.len() - n).min(self.record.len() - self.pos);
            buf[n..n + k].copy_from_slice(&self.record[self.pos..self.pos + k]);
            n += k;
            self.pos += k;
            if self.pos == self.record.len() {
                self.pos = 0;
                self.left -= 1;
            }
        }
        Ok(n)
    }
}

fn pcap(records: u64, len: u32) -> Synthetic {
    let mut head = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    head.extend(65535u32.to_le_bytes());
    head.extend(1u32.to_le_bytes());
    let mut record = vec![0u8; 8];
    record.extend(len.to_le_bytes());
    record.extend(len.to_le_bytes());
    record.extend(vec![0x55; len as usize]);
    Synthetic {
        head,
        record,
        pos: 0,
        left: records,
    }
}

fn block(kind: u32, body: &[u8]) -> Vec<u8> {
    let len = (body.len() + 12) as u32;
    [
        &kind.to_le_bytes()[..],
        &len.to_le_bytes(),
        body,
        &len.to_le_bytes(),
    ]
    .concat()
}

fn pcapng(records: u64, len: u32) -> Synthetic {
    let shb = [
        &0x1a2b_3c4du32.to_le_bytes()[..],
        &[1, 0, 0, 0],
        &(-1i64).to_le_bytes(),
    ]
    .concat();
    let mut head = block(0x0a0d_0d0a, &shb);
    head.extend(block(1, &[1, 0, 0, 0, 0, 0, 0, 0]));
    let mut epb = vec![0u8; 12];
    epb.extend(len.to_le_bytes());
    epb.extend(len.to_le_bytes());
    epb.extend(vec![0x55; len.next_multiple_of(4) as usize]);
    Synthetic {
        head,
        record: block(6, &epb),
        pos: 0,
        left: records,
    }
}

/// Pulls every frame and prints the rate; returns the frame count.
fn drain(name: &str, mut source: impl FrameSource) -> u64 {
    let start = Instant::now();
    let (mut frames, mut bytes) = (0u64, 0u64);
    while let Some(frame) = source.next_frame().unwrap() {
        frames += 1;
        bytes += frame.data.len() as u64;
    }
    let s = start.elapsed().as_secs_f64();
    println!(
        "{name:<44} {frames:>10} frames {:>7.2} GB {s:>6.2} s {:>7.1} Mframes/s {:>6.2} GB/s",
        bytes as f64 / 1e9,
        frames as f64 / s / 1e6,
        bytes as f64 / s / 1e9
    );
    frames
}

#[test]
#[ignore = "benchmark"]
fn capture_reading() {
    let n = 20_000_000;
    assert_eq!(
        drain(
            "pcap, 64 B frames",
            CaptureReader::new(pcap(n, 64)).unwrap()
        ),
        n
    );
    assert_eq!(
        drain(
            "pcapng, 64 B frames",
            CaptureReader::new(pcapng(n, 64)).unwrap()
        ),
        n
    );
    let n = 10_000_000;
    assert_eq!(
        drain(
            "pcap, 1000 B frames (10 GB)",
            CaptureReader::new(pcap(n, 1000)).unwrap()
        ),
        n
    );
    let reader = CaptureReader::new(pcapng(n, 1001)).unwrap();
    assert_eq!(drain("pcapng, 1001 B frames (10 GB)", reader), n);
}

#[test]
#[ignore = "benchmark"]
fn traffic_generation() {
    for (text, n) in [
        ("cbr 10000000pps 64B 2s", 20_000_000),
        ("cbr 10000000pps 1500B 2s", 20_000_000),
        ("poisson 10000000pps 64B:7,576B:4,1500B 2s", 0),
        ("onoff 10000000pps 64B 4s on 1ms off 1ms exp", 0),
    ] {
        let spec: TrafficSpec = text.parse().unwrap();
        let frames = drain(text, TrafficGen::new(&spec, 1));
        assert!(n == 0 || frames == n, "{text}: {frames} frames");
    }
}
