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

use std::fmt;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use rtemu_model::units::parse_duration_ns;

use crate::action::TimeUnit;
use crate::error::{syntax, ErrorKind, TraceError};
use crate::flow::FlowPattern;
use crate::text;

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

    /// Guesses the form of an action trace from its first bytes and its name: the magic means
    /// framed, whatever the name; otherwise the extension decides; otherwise valid text (UTF-8
    /// without control characters other than tab and line ends) is the text form, and only
    /// data that is not text is raw. Text that holds no action records is therefore never read
    /// as raw words: the text reader reports its first line that is not a record. To tell an
    /// action trace from the other kinds, see [`Content::sniff`].
    pub fn detect(path: &Path, head: &[u8]) -> Format {
        if head.starts_with(&MAGIC) {
            return Format::Framed;
        }
        if let Some(f) = Format::from_extension(path) {
            return f;
        }
        if as_text(head).is_some() {
            Format::Text
        } else {
            Format::Raw
        }
    }

    /// The finest delay an output of this form holds exactly when its header (framed form)
    /// says `unit`, ns: µs for raw, the unit for framed, 1 ns for text.
    pub fn resolution_ns(self, unit: TimeUnit) -> u64 {
        match self {
            Format::Raw => TimeUnit::Us.ns(),
            Format::Framed => unit.ns(),
            Format::Text => 1,
        }
    }

    /// The form of an output at `path`: `given`, else the one its extension names.
    pub fn for_output(path: &Path, given: Option<Format>) -> Result<Format, OutputError> {
        given
            .or_else(|| Format::from_extension(path))
            .ok_or_else(|| OutputError::UnknownForm(path.to_owned()))
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

/// Why an output cannot be written as asked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutputError {
    /// Neither the form asked for nor the extension names a form.
    #[error(
        "cannot tell the form of {} from its extension: use .rpl, .rplx or .txt, or --format \
         raw|framed|text",
        .0.display()
    )]
    UnknownForm(PathBuf),
    /// A flow or provenance given for a form that has no header to hold them.
    #[error(
        "{given} can only be stored in the header of the framed form, but {} is written in the \
         {} form: name it .rplx or add --format framed",
        .output.display(),
        .format.name()
    )]
    NoHeader {
        /// What was given: `--flow`, `--provenance`, or both.
        given: &'static str,
        /// The output.
        output: PathBuf,
        /// Its form.
        format: Format,
    },
}

/// How many bytes from the start of a file [`Content::sniff_file`] looks at.
pub const SNIFF_LEN: usize = 64 << 10;

/// What a trace file holds: one of the kinds rtemu reads and, for an action trace, its form.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Content {
    /// A per-packet action trace in this form.
    Actions(Format),
    /// A delay/loss time series, `time delay [lost]` per line ([`crate::series`]).
    Series,
    /// A Mahimahi delivery-opportunity trace, one time in ms per line ([`crate::mahimahi`]).
    Mahimahi,
}

/// Why [`Content::sniff`] could not tell what a file holds, with its best guess.
#[derive(Debug)]
pub struct SniffError {
    /// What is wrong: the file and the first line that fits no kind, or why the file could not
    /// be read.
    pub error: TraceError,
    /// The kind the first record line suggests (a number first: a series or a Mahimahi trace;
    /// a word: an action trace), whose reader reports the same problem in its own terms;
    /// `None` if the file could not be read.
    pub guess: Option<Content>,
}

impl fmt::Display for SniffError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for SniffError {}

impl From<SniffError> for TraceError {
    fn from(e: SniffError) -> Self {
        e.error
    }
}

impl Content {
    /// The kind a file's extension names: `.rpl` raw, `.rplx` framed and `.rplt` text action
    /// traces, `.series` a time series, `.up`, `.down` and `.mahimahi` delivery opportunities.
    /// `.txt` names none: every text kind may be in a `.txt` file.
    pub fn from_extension(path: &Path) -> Option<Content> {
        match path.extension()?.to_str()? {
            "rpl" => Some(Content::Actions(Format::Raw)),
            "rplx" => Some(Content::Actions(Format::Framed)),
            "rplt" => Some(Content::Actions(Format::Text)),
            "series" => Some(Content::Series),
            "up" | "down" | "mahimahi" => Some(Content::Mahimahi),
            _ => None,
        }
    }

    /// What the file `path` holds, from its first bytes `head` (all of it if `complete`) and
    /// its name, in this order:
    ///
    /// 1. the magic: a framed action trace, whatever the name;
    /// 2. the extension, as [`Content::from_extension`];
    /// 3. data that is not text (see [`Format::detect`]): a raw action trace;
    /// 4. text, by its record lines (blank lines and `#` comments aside): every line a single
    ///    non-negative integer is a Mahimahi trace; two or three fields, a time and a delay
    ///    (bare numbers, or with the units `ns`, `us`, `µs`, `ms`, `s`) and optionally
    ///    `0`/`1`/`ok`/`lost`, a time series; `drop`, `pass D` and `dup D` records, the text
    ///    form of an action trace. The first record line decides; text with none (empty, or
    ///    only comments) is an action trace, which its reader reports as empty.
    ///
    /// A record line that fits no kind, or not the kind of the first, is an error naming the
    /// file, the line and the column; the last line of an incomplete `head` is not judged, as
    /// it may be cut. Lines after `head` are left to the kind's reader. Never panics, whatever
    /// the bytes.
    pub fn sniff(path: &Path, head: &[u8], complete: bool) -> Result<Content, SniffError> {
        if head.starts_with(&MAGIC) {
            return Ok(Content::Actions(Format::Framed));
        }
        if let Some(c) = Content::from_extension(path) {
            return Ok(c);
        }
        let Some(mut text) = as_text(head) else {
            return Ok(Content::Actions(Format::Raw));
        };
        if !complete {
            if let Some(end) = text.rfind('\n') {
                text = &text[..end];
            }
        }
        let mut first: Option<(u64, Content)> = None;
        for (i, line) in text.lines().enumerate() {
            let line_no = i as u64 + 1;
            let body = line.split('#').next().unwrap_or("");
            let record = body.trim();
            if record.is_empty() {
                continue;
            }
            let column = body[..body.len() - body.trim_start().len()].chars().count() as u64 + 1;
            let kind = line_kind(line);
            let problem = match first {
                None => match kind {
                    Some(k) => {
                        first = Some((line_no, k));
                        continue;
                    }
                    None => (
                        "this line fits no trace kind: expected an action (`drop`, `pass 1234us`, \
                         `dup 100us`), a time series sample (`time delay [lost]`, e.g. `0.5 20ms`) \
                         or a Mahimahi delivery time in ms (e.g. `12`)"
                            .to_owned(),
                        guess_kind(record),
                    ),
                },
                Some((_, k)) if kind == Some(k) => continue,
                Some((at, k)) => (
                    format!(
                        "this line does not fit the {} that line {at} begins ({})",
                        k.name(),
                        k.shape()
                    ),
                    k,
                ),
            };
            return Err(SniffError {
                error: syntax(line_no, column, problem.0).with_path(path),
                guess: Some(problem.1),
            });
        }
        Ok(first.map_or(Content::Actions(Format::Text), |(_, k)| k))
    }

    /// [`Content::sniff`] on the first [`SNIFF_LEN`] bytes of the file `path`. Errors name it.
    pub fn sniff_file(path: &Path) -> Result<Content, SniffError> {
        let unreadable = |e: io::Error| SniffError {
            error: TraceError::from(e).with_path(path),
            guess: None,
        };
        let file = rtemu_sys::input::open(path).map_err(unreadable)?;
        let mut head = Vec::with_capacity(SNIFF_LEN);
        file.take(SNIFF_LEN as u64)
            .read_to_end(&mut head)
            .map_err(unreadable)?;
        let complete = head.len() < SNIFF_LEN;
        Content::sniff(path, &head, complete)
    }

    /// What the kind is called in messages.
    pub fn name(self) -> &'static str {
        match self {
            Content::Actions(Format::Raw) => "raw action trace",
            Content::Actions(Format::Framed) => "framed action trace",
            Content::Actions(Format::Text) => "action trace",
            Content::Series => "time series",
            Content::Mahimahi => "Mahimahi trace",
        }
    }

    /// What a record line of the kind looks like.
    fn shape(self) -> &'static str {
        match self {
            Content::Actions(_) => "`drop`, `pass D` or `dup D` per line",
            Content::Series => "`time delay [lost]` per line",
            Content::Mahimahi => "one delivery time in ms per line",
        }
    }
}

/// The kind one line (with any comment) fits, if any; `None` also for a blank line.
fn line_kind(line: &str) -> Option<Content> {
    let body = line.split('#').next().unwrap_or("");
    let mut fields = body.split_whitespace();
    let (a, b, c, d) = (fields.next()?, fields.next(), fields.next(), fields.next());
    match (b, c, d) {
        (None, _, _) if a.parse::<u64>().is_ok() => return Some(Content::Mahimahi),
        (Some(delay), lost, None)
            if parse_duration_ns(a, Some(1_000_000_000)).is_ok()
                && parse_duration_ns(delay, Some(1_000_000)).is_ok()
                && lost.is_none_or(|l| matches!(l, "0" | "1" | "ok" | "lost")) =>
        {
            return Some(Content::Series)
        }
        _ => {}
    }
    matches!(text::parse_line(line, 1), Ok(Some(_))).then_some(Content::Actions(Format::Text))
}

/// The kind a line that fits none was probably meant to be: numbers are samples or times,
/// words are actions.
fn guess_kind(record: &str) -> Content {
    let numeric = record.starts_with(|c: char| c.is_ascii_digit() || c == '.');
    match (numeric, record.split_whitespace().count()) {
        (true, 1) => Content::Mahimahi,
        (true, _) => Content::Series,
        (false, _) => Content::Actions(Format::Text),
    }
}

/// `head` as text, if it is text: UTF-8 (a character cut at the end of the sample is allowed)
/// with no control characters but tab, carriage return and line feed. Empty data is text.
fn as_text(head: &[u8]) -> Option<&str> {
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => {
            std::str::from_utf8(&head[..e.valid_up_to()]).expect("valid prefix")
        }
        Err(_) => return None,
    };
    let control = text
        .chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'));
    (!control).then_some(text)
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
    /// Puts what the user asked a framed output's header to say into this header of `output`,
    /// written in `format`: `flow`, and `provenance`, put before what rtemu wrote there (the
    /// command line, or the input's provenance). Refused for a form without a header.
    pub fn annotate(
        &mut self,
        flow: Option<FlowPattern>,
        provenance: Option<&str>,
        format: Format,
        output: &Path,
    ) -> Result<(), OutputError> {
        let given = match (flow.is_some(), provenance.is_some()) {
            (true, true) => Some("--flow and --provenance"),
            (true, false) => Some("--flow"),
            (false, true) => Some("--provenance"),
            (false, false) => None,
        };
        if let Some(given) = given.filter(|_| format != Format::Framed) {
            return Err(OutputError::NoHeader {
                given,
                output: output.to_owned(),
                format,
            });
        }
        if flow.is_some() {
            self.flow = flow;
        }
        if let Some(text) = provenance {
            self.provenance = if self.provenance.is_empty() {
                text.to_owned()
            } else {
                format!("{text}; {}", self.provenance)
            };
        }
        Ok(())
    }

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
        let flow = match flow_len {
            0 => None,
            _ => {
                let text = String::from_utf8(flow)
                    .map_err(|_| header_err("the flow pattern at byte 18 is not UTF-8"))?;
                Some(
                    text.parse::<FlowPattern>()
                        .map_err(|e| header_err(format!("the flow pattern at byte 18: {e}")))?,
                )
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
    fn an_outputs_form_follows_the_flag_or_the_extension() {
        assert_eq!(
            Format::for_output(Path::new("a.rpl"), None),
            Ok(Format::Raw)
        );
        let given = Format::for_output(Path::new("a.dat"), Some(Format::Text));
        assert_eq!(given, Ok(Format::Text));
        let e = Format::for_output(Path::new("a.dat"), None).unwrap_err();
        assert!(e.to_string().contains("--format raw|framed|text"), "{e}");
    }

    #[test]
    fn only_a_framed_header_takes_a_flow_and_provenance_put_first() {
        let flow: FlowPattern = "proto=udp".parse().unwrap();
        let mut h = Header {
            provenance: "rtemu trace gen".into(),
            ..Header::default()
        };
        h.annotate(
            Some(flow),
            Some("lab A"),
            Format::Framed,
            Path::new("a.rplx"),
        )
        .unwrap();
        assert_eq!(
            (h.flow, h.provenance.as_str()),
            (Some(flow), "lab A; rtemu trace gen")
        );
        let mut empty = Header::default();
        empty
            .annotate(None, Some("lab A"), Format::Framed, Path::new("a.rplx"))
            .unwrap();
        assert_eq!(empty.provenance, "lab A");
        let e = Header::default()
            .annotate(Some(flow), Some("x"), Format::Raw, Path::new("a.rpl"))
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "--flow and --provenance can only be stored in the header of the framed form, but \
             a.rpl is written in the raw form: name it .rplx or add --format framed"
        );
        let mut plain = Header::default();
        plain
            .annotate(None, None, Format::Text, Path::new("a.txt"))
            .unwrap();
        assert_eq!(plain, Header::default());
    }

    #[test]
    fn each_form_holds_delays_to_its_own_resolution() {
        assert_eq!(Format::Raw.resolution_ns(TimeUnit::Ns), 1_000);
        assert_eq!(Format::Framed.resolution_ns(TimeUnit::Ms), 1_000_000);
        assert_eq!(Format::Framed.resolution_ns(TimeUnit::Ns), 1);
        assert_eq!(Format::Text.resolution_ns(TimeUnit::Ms), 1);
    }

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
        // Text is never read as raw words: the text reader will say what is wrong with it.
        assert_eq!(Format::detect(p("a"), b"hello\n"), Format::Text);
        assert_eq!(Format::detect(p("a"), b"1\n2\n"), Format::Text);
        assert_eq!(Format::detect(p("a"), b""), Format::Text);
    }

    fn sniff(name: &str, head: &str) -> Result<Content, String> {
        Content::sniff(Path::new(name), head.as_bytes(), true).map_err(|e| e.to_string())
    }

    #[test]
    fn each_kind_is_known_by_its_content_without_an_extension() {
        let mahimahi: String = (1..=100).map(|t| format!("{t}\n")).collect();
        assert_eq!(sniff("mm", &mahimahi), Ok(Content::Mahimahi));
        assert_eq!(
            sniff("mm", "# comment\n\n0\n 1 \n1\n3"),
            Ok(Content::Mahimahi)
        );
        assert_eq!(
            sniff(
                "p.txt",
                "# time delay lost\n0 10\n0.5 20 0\n1.0s 5ms lost\n2 8 ok\n"
            ),
            Ok(Content::Series)
        );
        assert_eq!(sniff("p", "0\t12.5\r\n0.1 13.1\r\n"), Ok(Content::Series));
        assert_eq!(
            sniff(
                "t",
                "# x\npass 1000us\nDROP\ndup 100us # copy\npass 0.5ms\n"
            ),
            Ok(Content::Actions(Format::Text))
        );
        assert_eq!(
            sniff("t", "# only comments\n\n"),
            Ok(Content::Actions(Format::Text))
        );
        let binary = [0x40, 0, 0, 1, 0, 0, 0, 0, 0x80, 0, 0, 5];
        assert_eq!(
            Content::sniff(Path::new("words"), &binary, true).unwrap(),
            Content::Actions(Format::Raw)
        );
        let framed = Header::default().to_bytes().unwrap();
        assert_eq!(
            Content::sniff(Path::new("x.series"), &framed, true).unwrap(),
            Content::Actions(Format::Framed)
        );
    }

    #[test]
    fn an_extension_decides_except_txt() {
        assert_eq!(sniff("a.rpl", "1\n2\n"), Ok(Content::Actions(Format::Raw)));
        assert_eq!(
            sniff("a.rplt", "1\n2\n"),
            Ok(Content::Actions(Format::Text))
        );
        assert_eq!(sniff("a.down", "0 1\n"), Ok(Content::Mahimahi));
        assert_eq!(sniff("a.series", "1\n"), Ok(Content::Series));
        assert_eq!(sniff("a.txt", "1\n2\n"), Ok(Content::Mahimahi));
        assert_eq!(
            sniff("a.txt", "pass 1ms\n"),
            Ok(Content::Actions(Format::Text))
        );
    }

    #[test]
    fn text_of_no_kind_is_an_error_naming_the_file_and_line() {
        let e =
            Content::sniff(Path::new("dir/junk"), b"# notes\n\n  hello world\n", true).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("dir/junk: line 3, column 3: this line fits no trace kind"),
            "{msg}"
        );
        assert_eq!(e.guess, Some(Content::Actions(Format::Text)));
        // A line of the wrong kind after the first record line.
        let e = Content::sniff(Path::new("mm"), b"1\n2\n3 4\n", true).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "mm: line 3, column 1: this line does not fit the Mahimahi trace that line 1 begins"
            ),
            "{e}"
        );
        assert_eq!(e.guess, Some(Content::Mahimahi));
        // Records that almost fit: the guess goes to the reader that explains them best.
        let guess = |t: &str| sniff_guess(t);
        assert_eq!(guess("0,5 20\n"), Some(Content::Series));
        assert_eq!(guess("1.5\n"), Some(Content::Mahimahi));
        assert_eq!(guess("pass 10\n"), Some(Content::Actions(Format::Text)));
        assert_eq!(guess("0 1 maybe\n"), Some(Content::Series));
    }

    fn sniff_guess(text: &str) -> Option<Content> {
        Content::sniff(Path::new("f"), text.as_bytes(), true)
            .unwrap_err()
            .guess
    }

    #[test]
    fn a_cut_last_line_is_not_judged() {
        // The sample ends inside "12": complete, it would still be a time; cut inside a
        // series line ("5 1"), it must not be taken for a Mahimahi line.
        assert_eq!(
            Content::sniff(Path::new("m"), b"0\n5\n1", false).unwrap(),
            Content::Mahimahi
        );
        assert_eq!(
            Content::sniff(Path::new("s"), b"0 1\n5", false).unwrap(),
            Content::Series
        );
        assert!(Content::sniff(Path::new("s"), b"0 1\n5", true).is_err());
    }
}
