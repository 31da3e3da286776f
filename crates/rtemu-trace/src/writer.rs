//! Writing action traces in any of the three forms, streamed.

use std::io::{BufWriter, Write};

use crate::action::{encode_word, Action, TimeUnit};
use crate::error::{ErrorKind, TraceError};
use crate::format::{Format, Header};
use crate::text;

/// A streaming writer of action records.
///
/// The raw form always uses µs; the framed form uses the header's unit; the text form is exact
/// to the ns. A delay the chosen form cannot hold exactly is an error naming the record (see
/// [`crate::action::encode_word`]), never silently rounded.
#[derive(Debug)]
pub struct RecordWriter<W: Write> {
    out: BufWriter<W>,
    format: Format,
    unit: TimeUnit,
    index: u64,
}

impl<W: Write> RecordWriter<W> {
    /// A writer of `format` to `out`. The framed form writes `header` first; the text form
    /// writes its provenance and flow as `#` comments; the raw form has no room for either.
    pub fn new(out: W, format: Format, header: &Header) -> Result<Self, TraceError> {
        let mut out = BufWriter::with_capacity(1 << 20, out);
        let unit = match format {
            Format::Raw => TimeUnit::Us,
            Format::Framed => {
                out.write_all(&header.to_bytes()?)?;
                header.unit
            }
            Format::Text => {
                for line in header.provenance.lines() {
                    writeln!(out, "# {line}")?;
                }
                if let Some(flow) = &header.flow {
                    writeln!(out, "# flow: {flow}")?;
                }
                TimeUnit::Ns
            }
        };
        Ok(RecordWriter {
            out,
            format,
            unit,
            index: 0,
        })
    }

    /// Writes one record.
    #[inline]
    pub fn write(&mut self, action: Action) -> Result<(), TraceError> {
        match self.format {
            Format::Raw | Format::Framed => {
                let word = encode_word(action, self.unit).map_err(|source| {
                    TraceError::new(ErrorKind::Encode {
                        index: self.index,
                        source,
                    })
                })?;
                self.out.write_all(&word.to_be_bytes())?;
            }
            Format::Text => text::write_action(&mut self.out, action)?,
        }
        self.index += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records_written(&self) -> u64 {
        self.index
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(self) -> Result<W, TraceError> {
        self.out
            .into_inner()
            .map_err(|e| TraceError::from(e.into_error()))
    }
}
