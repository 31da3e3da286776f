//! The per-packet fate log: one line per decided copy, CSV or JSON lines.
//!
//! Columns: `seq` (input position), `arrival_ns`, `copy` (0 original, 1 duplicate), `fate`
//! (`delivered` or `dropped`), `delivery_ns` (empty/null when dropped), `reason` (the drop
//! reason, or `reordered` for a delivered copy the reorder stage sent ahead), `flipped_bits`
//! (bit positions, `;`-separated in CSV) and `marked` (whether a queue or netem's `ecn` marked
//! the copy CE instead of dropping it: `1` or empty in CSV). Lines are written in decision
//! order: input order, except that a copy a queue discipline holds is logged when it leaves
//! the queue.

use std::io::{self, Write};

use rtemu_model::{Delivery, DropReason, PacketMeta};

/// The log's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogFormat {
    /// Comma-separated values with a header line.
    Csv,
    /// One JSON object per line.
    JsonLines,
}

impl LogFormat {
    /// The format a file name suggests: `.jsonl`/`.ndjson`/`.json` are JSON lines, anything
    /// else CSV.
    pub fn from_path(path: &std::path::Path) -> LogFormat {
        match path.extension().and_then(|e| e.to_str()) {
            Some("jsonl" | "ndjson" | "json") => LogFormat::JsonLines,
            _ => LogFormat::Csv,
        }
    }
}

/// Writes the fate log.
#[derive(Debug)]
pub struct FateLog<W: Write> {
    out: W,
    format: LogFormat,
}

impl<W: Write> FateLog<W> {
    /// Starts a log (writes the CSV header).
    pub fn new(mut out: W, format: LogFormat) -> io::Result<Self> {
        if format == LogFormat::Csv {
            writeln!(
                out,
                "seq,arrival_ns,copy,fate,delivery_ns,reason,flipped_bits,marked"
            )?;
        }
        Ok(FateLog { out, format })
    }

    /// Logs a delivered copy.
    pub fn delivered(&mut self, pkt: &PacketMeta, d: &Delivery) -> io::Result<()> {
        let reason = if d.reordered { "reordered" } else { "" };
        match self.format {
            LogFormat::Csv => {
                write!(
                    self.out,
                    "{},{},{},delivered,{},{},",
                    pkt.seq, pkt.arrival_ns, d.copy, d.at_ns, reason
                )?;
                for (i, bit) in d.corruption.bits().enumerate() {
                    write!(self.out, "{}{bit}", if i == 0 { "" } else { ";" })?;
                }
                writeln!(self.out, ",{}", if d.marked { "1" } else { "" })
            }
            LogFormat::JsonLines => {
                write!(
                    self.out,
                    r#"{{"seq":{},"arrival_ns":{},"copy":{},"fate":"delivered","delivery_ns":{},"reason":{},"flipped_bits":["#,
                    pkt.seq,
                    pkt.arrival_ns,
                    d.copy,
                    d.at_ns,
                    if d.reordered { "\"reordered\"" } else { "null" }
                )?;
                for (i, bit) in d.corruption.bits().enumerate() {
                    write!(self.out, "{}{bit}", if i == 0 { "" } else { "," })?;
                }
                writeln!(self.out, r#"],"marked":{}}}"#, d.marked)
            }
        }
    }

    /// Logs a dropped copy.
    pub fn dropped(&mut self, pkt: &PacketMeta, copy: u8, reason: DropReason) -> io::Result<()> {
        match self.format {
            LogFormat::Csv => writeln!(
                self.out,
                "{},{},{copy},dropped,,{reason},,",
                pkt.seq, pkt.arrival_ns
            ),
            LogFormat::JsonLines => writeln!(
                self.out,
                r#"{{"seq":{},"arrival_ns":{},"copy":{copy},"fate":"dropped","delivery_ns":null,"reason":"{reason}","flipped_bits":[],"marked":false}}"#,
                pkt.seq, pkt.arrival_ns
            ),
        }
    }

    /// Flushes and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}
