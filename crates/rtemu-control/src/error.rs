//! How an error reads to a person: the one rule the command line prints errors by and the HTTP
//! API answers with, so both say the same thing; and the one error not worth reading.

/// The error and its causes on one line, leaving out a cause whose text the message before it
/// already contains (library errors often print their source themselves).
pub fn message(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    let mut cause = Some(err);
    while let Some(e) = cause {
        let text = e.to_string();
        if !out.contains(&text) {
            if !out.is_empty() {
                out.push_str(": ");
            }
            out.push_str(&text);
        }
        cause = e.source();
    }
    out
}

/// Whether `err` is a closed pipe (`rtemu … | head` stopped reading): no error worth a word.
pub fn is_closed_pipe(err: &anyhow::Error) -> bool {
    err.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_do_not_repeat_a_cause() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = anyhow::Error::new(io)
            .context("cannot open x: no such file")
            .context("reading x");
        assert_eq!(
            message(err.as_ref()),
            "reading x: cannot open x: no such file"
        );
    }

    #[test]
    fn every_new_cause_is_joined_in_order() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let err = anyhow::Error::new(io)
            .context("opening x")
            .context("--trace");
        assert_eq!(message(err.as_ref()), "--trace: opening x: no such file");
    }

    #[test]
    fn a_closed_pipe_is_told_apart_even_under_context() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(is_closed_pipe(
            &anyhow::Error::new(pipe).context("writing the table")
        ));
        let other = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert!(!is_closed_pipe(&anyhow::Error::new(other)));
        assert!(!is_closed_pipe(&anyhow::anyhow!("broken pipe")));
    }
}
