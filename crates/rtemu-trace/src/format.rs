//! The three forms of an action trace and the self-describing header.
//!
//! * [`Format::Raw`]: RplTrc's headerless `.rpl`, one big-endian word per record, delays in µs.
//! * [`Format::Framed`]: the same words after a header that names the time unit, an optional
//!   flow pattern and free-text provenance (extension `.rplx`).
//! * [`Format::Text`]: one record per line for people (`drop`, `pass 1234us`, `dup 100us`,
//!   `#` comments); see [`crate::text`].
//!
//! # Header of the framed form (all integers big-endian)
//!
//! | offset | size | field |
//! | --- | --- | --- |
//! | 0 | 8 | magic `89 52 50 4C 54 52 43 0A` (`\x89RPLTRC\n`) |
//! | 8 | 2 | version, 1 |
//! | 10 | 1 | time unit of the delay field: 0 ns, 1 µs, 2 ms |
//! | 11 | 1 | reserved, 0 |
//! | 12 | 2 | F, length of the flow pattern in bytes (0: none) |
//! | 14 | 4 | P, length of the provenance text in bytes (at most 1 MiB) |
//! | 18 | F | flow pattern, UTF-8, syntax of [`crate::flow`] |
//! | 18+F | P | provenance, UTF-8 free text |
//!
//! The records follow at byte 18+F+P.

use std::io::{self, Read};
use std::path::Path;

use crate::action::TimeUnit;
use crate::error::{ErrorKind, TraceError};
use crate::flow::FlowPattern;

/// The first eight bytes of a framed trace. The first byte is not ASCII, so no text file starts
/// with it, and the final newline catches files mangled by text-mode transfers.
pub const MAGIC: [u8; 8] = *b"\x89RPLTRC\n";

/// The header version this crate writes and reads.
pub const VERSION: u16 = 1;

/// Fixed part of the header, before the flow pattern and provenance.
pub const FIXED_HEADER_LEN: usize = 18;

/// Longest provenance text accepted, so a corrupt length cannot make a reader allocate
/// gigabytes.
pub const MAX_PROVENANCE: usize = 1 << 20;

/// The form of an action trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    /// Headerless RplTrc words (`.rpl`), µs.
    Raw,
    /// Header plus words (`.rplx`).
    Framed,
    /// One record per line.
    Text,
}

impl Format {
    /// The form named by a file's extension: `.rpl` raw, `.rplx` framed, `.txt`/`.rplt` text.
    pub fn from_extension(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "rpl" => Some(Format::Raw),
            "rplx" => Some(Format::Framed),
            "txt" | "rplt" => Some(Format::Text),
            _ => None,
        }
    }

    /// Guesses the form of a file from its first bytes and its name: the magic means framed,
    /// whatever the name; otherwise the extension decides; otherwise data that is printable
    /// text whose first record line starts with `drop`, `pass` or `dup` (or that holds only
    /// comments) is text, and anything else raw.
    pub fn detect(path: &Path, head: &[u8]) -> Format {
        if head.starts_with(&MAGIC) {
            return Format::Framed;
        }
        if let Some(f) = Format::from_extension(path) {
            return f;
        }
        if looks_like_text(head) {
            Format::Text
        } else {
            Format::Raw
        }
    }

    /// The name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Format::Raw => "raw",
            Format::Framed => "framed",
            Format::Text => "text",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "raw" | "rpl" => Ok(Format::Raw),
            "framed" | "rplx" => Ok(Format::Framed),
            "text" | "txt" => Ok(Format::Text),
            _ => Err(format!("unknown trace form {s:?} (raw, framed, text)")),
        }
    }
}

fn looks_like_text(head: &[u8]) -> bool {
    if head.is_empty() {
        return false;
    }
    // A multi-byte character may be cut at the end of the sample.
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).expect("valid prefix")
        }
        Err(_) => return false,
    };
    if text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
    {
        return false;
    }
    match text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find(|l| !l.is_empty())
    {
        Some(first) => ["drop", "pass", "dup"]
            .iter()
            .any(|k| first.to_ascii_lowercase().starts_with(k)),
        None => true,
    }
}

/// The header of a framed trace.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Header {
    /// Unit of the delay field.
    pub unit: TimeUnit,
    /// The flow this trace applies to, if it says.
    pub flow: Option<FlowPattern>,
    /// Where the trace came from: free text.
    pub provenance: String,
}

impl Header {
    /// The header's bytes.
    pub fn to_bytes(&self) -> Result<Vec<u8>, TraceError> {
        let flow = self.flow.map(|f| f.to_string()).unwrap_or_default();
        let flow_len = u16::try_from(flow.len()).map_err(|_| {
            header_err(format!(
                "flow pattern is {} bytes, at most 65535",
                flow.len()
            ))
        })?;
        if self.provenance.len() > MAX_PROVENANCE {
            return Err(header_err(format!(
                "provenance is {} bytes, at most {MAX_PROVENANCE}",
                self.provenance.len()
            )));
        }
        let mut b = Vec::with_capacity(FIXED_HEADER_LEN + flow.len() + self.provenance.len());
        b.extend_from_slice(&MAGIC);
        b.extend_from_slice(&VERSION.to_be_bytes());
        b.push(self.unit.code());
        b.push(0);
        b.extend_from_slice(&flow_len.to_be_bytes());
        b.extend_from_slice(&(self.provenance.len() as u32).to_be_bytes());
        b.extend_from_slice(flow.as_bytes());
        b.extend_from_slice(self.provenance.as_bytes());
        Ok(b)
    }

    /// Reads a header; returns it and its length in bytes.
    pub fn read(r: &mut impl Read) -> Result<(Header, u64), TraceError> {
        let mut fixed = [0u8; FIXED_HEADER_LEN];
        read_exact(r, &mut fixed, "the fixed header")?;
        if fixed[..8] != MAGIC {
            return Err(header_err(format!(
                "bytes 0..8 are {:02x?}, not the magic {MAGIC:02x?}; is this a raw .rpl or a text trace?",
                &fixed[..8]
            )));
        }
        let version = u16::from_be_bytes([fixed[8], fixed[9]]);
        if version != VERSION {
            return Err(header_err(format!(
                "version {version} at byte 8; this build reads version {VERSION}"
            )));
        }
        let unit = TimeUnit::from_code(fixed[10]).ok_or_else(|| {
            header_err(format!(
                "time unit code {} at byte 10 (valid: 0 ns, 1 us, 2 ms)",
                fixed[10]
            ))
        })?;
        if fixed[11] != 0 {
            return Err(header_err(format!(
                "reserved byte 11 is {}, not 0",
                fixed[11]
            )));
        }
        let flow_len = usize::from(u16::from_be_bytes([fixed[12], fixed[13]]));
        let prov_len = u32::from_be_bytes([fixed[14], fixed[15], fixed[16], fixed[17]]) as usize;
        if prov_len > MAX_PROVENANCE {
            return Err(header_err(format!(
                "provenance length {prov_len} at byte 14 exceeds {MAX_PROVENANCE}"
            )));
        }
        let mut flow = vec![0; flow_len];
        read_exact(r, &mut flow, "the flow pattern")?;
        let flow =
            match flow_len {
                0 => None,
                _ => {
                    let text = String::from_utf8(flow)
                        .map_err(|_| header_err("the flow pattern at byte 18 is not UTF-8"))?;
                    Some(text.parse::<FlowPattern>().map_err(|e| {
                        header_err(format!("flow pattern {text:?} at byte 18: {e}"))
                    })?)
                }
            };
        let mut prov = vec![0; prov_len];
        read_exact(r, &mut prov, "the provenance")?;
        let provenance = String::from_utf8(prov).map_err(|_| {
            header_err(format!(
                "the provenance at byte {} is not UTF-8",
                18 + flow_len
            ))
        })?;
        let len = (FIXED_HEADER_LEN + flow_len + prov_len) as u64;
        Ok((
            Header {
                unit,
                flow,
                provenance,
            },
            len,
        ))
    }
}

fn read_exact(r: &mut impl Read, buf: &mut [u8], what: &str) -> Result<(), TraceError> {
    r.read_exact(buf).map_err(|e| match e.kind() {
        io::ErrorKind::UnexpectedEof => header_err(format!("the file ends inside {what}")),
        _ => TraceError::from(e),
    })
}

fn header_err(msg: impl Into<String>) -> TraceError {
    TraceError::new(ErrorKind::Header(msg.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips() {
        let h = Header {
            unit: TimeUnit::Ns,
            flow: Some("dst=10.0.0.0/8 proto=udp".parse().unwrap()),
            provenance: "fgn H=0.8 seed 7 ✓".into(),
        };
        let bytes = h.to_bytes().unwrap();
        let (back, len) = Header::read(&mut &bytes[..]).unwrap();
        assert_eq!(back, h);
        assert_eq!(len as usize, bytes.len());
    }

    #[test]
    fn bad_headers_are_explained() {
        let good = Header::default().to_bytes().unwrap();
        let mut bad = good.clone();
        bad[10] = 7;
        let e = Header::read(&mut &bad[..]).unwrap_err().to_string();
        assert!(e.contains("time unit code 7 at byte 10"), "{e}");
        let e = Header::read(&mut &good[..10]).unwrap_err().to_string();
        assert!(e.contains("ends inside the fixed header"), "{e}");
        let mut bad = good.clone();
        bad[9] = 2;
        let e = Header::read(&mut &bad[..]).unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");
    }

    #[test]
    fn detection_prefers_magic_then_extension_then_content() {
        let p = Path::new;
        assert_eq!(Format::detect(p("a.rpl"), &MAGIC), Format::Framed);
        assert_eq!(Format::detect(p("a.rpl"), b"pass 1us\n"), Format::Raw);
        assert_eq!(Format::detect(p("a"), b"# x\n\npass 1us\n"), Format::Text);
        assert_eq!(Format::detect(p("a"), b"DROP\n"), Format::Text);
        assert_eq!(Format::detect(p("a"), &[0x40, 0, 0, 1]), Format::Raw);
        assert_eq!(Format::detect(p("a"), b"hello\n"), Format::Raw);
    }
}
