//! Text from outside (a file, a node's command line, a trace's provenance, an agent's reply)
//! on its way to a terminal: shown, never obeyed.
//!
//! A terminal acts on control characters (`ESC [` sequences recolour, move the cursor, rewrite
//! the title or the clipboard; a carriage return overwrites the line), and bidirectional
//! overrides reorder what is shown. Every such character is written as a `\u{…}` escape;
//! newlines and tabs stay, since they only lay text out.

use std::borrow::Cow;

/// Whether `c` would steer a terminal or reorder text rather than show itself.
fn steers(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `text` with every character that would steer a terminal written as `\u{…}` (see the
/// module's documentation); borrowed when there is none.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(steers) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if steers(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// The most characters of an input [`quoted`] shows.
const QUOTED: usize = 60;

/// `text` quoted as Rust quotes a string (control characters escaped) and, when long, cut to
/// its first characters and its length: an error names what it refused without echoing a
/// huge input whole.
pub fn quoted(text: &str) -> String {
    if text.chars().count() <= QUOTED {
        return format!("{text:?}");
    }
    let start: String = text.chars().take(QUOTED).collect();
    format!("{start:?}… ({} bytes)", text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_and_bidi_characters_are_escaped_and_layout_stays() {
        assert!(matches!(printable("plain text\n\tok é"), Cow::Borrowed(_)));
        assert_eq!(
            printable("a\u{1b}[2Jb\rc\u{7}\u{9b}d\u{202e}e"),
            "a\\u{1b}[2Jb\\u{d}c\\u{7}\\u{9b}d\\u{202e}e"
        );
        assert_eq!(printable("x\u{7f}"), "x\\u{7f}");
    }

    #[test]
    fn a_long_input_is_quoted_by_its_start_and_its_length() {
        assert_eq!(quoted("delay 1ms\u{1b}"), "\"delay 1ms\\u{1b}\"");
        let long = format!("delay {}", "x".repeat(1 << 20));
        let q = quoted(&long);
        assert!(q.len() < 100, "{q}");
        assert!(
            q.starts_with("\"delay xxx") && q.ends_with("…\" (1048582 bytes)")
                || q.ends_with("\"… (1048582 bytes)"),
            "{q}"
        );
    }
}
