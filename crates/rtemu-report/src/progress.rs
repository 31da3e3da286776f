//! Progress on standard error while a command measures or runs: a bar of steps naming the one
//! that runs ([`Steps`]), a spinner for one long step, and a simulation's bar in frames or
//! virtual time ([`RunBar`]). Each is cleared when finished; one dropped unfinished (the run
//! failed) is left as it stood, above the error.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressStyle};
use rtemu_sim::source::{Progress, ProgressUnit};

/// A bar of a known number of steps, with what runs named beside it.
#[derive(Debug)]
pub struct Steps(ProgressBar);

impl Steps {
    /// A bar of `len` steps.
    pub fn new(len: usize) -> Steps {
        let bar = ProgressBar::new(len as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:30} {pos}/{len} {msg}")
                .expect("the template is valid"),
        );
        Steps(bar)
    }

    /// A spinner for one long step, saying what runs.
    pub fn spinner(what: String) -> Steps {
        let bar = ProgressBar::new_spinner();
        bar.set_message(what);
        Steps(bar)
    }

    /// Says `what` runs now, counting one more step.
    pub fn next(&self, what: String) {
        self.0.set_message(what);
        self.0.inc(1);
    }

    /// Says `what` runs now, after `done` steps.
    pub fn at(&self, done: usize, what: String) {
        self.0.set_position(done as u64);
        self.0.set_message(what);
    }

    /// Clears the bar: the steps are done.
    pub fn finish(self) {
        self.0.finish_and_clear();
    }
}

/// A simulation's bar: the share of its frames (or of its virtual time) done, shown only
/// when asked for and standard error is a terminal.
#[derive(Debug)]
pub struct RunBar(Option<ProgressBar>);

impl RunBar {
    /// A bar, when `wanted` and standard error is a terminal; else nothing is shown.
    pub fn new(wanted: bool) -> RunBar {
        if !wanted || !std::io::stderr().is_terminal() {
            return RunBar(None);
        }
        let bar = ProgressBar::new(0);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {percent:>3}% {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        RunBar(Some(bar))
    }

    /// Shows `p`: how far the run is, and in virtual seconds when it counts time.
    pub fn show(&self, p: Progress) {
        if let Some(bar) = &self.0 {
            if let Some(total) = p.total {
                bar.set_length(total);
            }
            bar.set_position(p.done);
            if p.unit == ProgressUnit::VirtualNanos {
                bar.set_message(format!("{:.1} s virtual", p.done as f64 / 1e9));
            }
        }
    }

    /// Clears the bar: the run is done.
    pub fn finish(self) {
        if let Some(bar) = self.0 {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_count_and_name_what_runs() {
        let steps = Steps::new(3);
        steps.next("a".into());
        steps.next("b".into());
        assert_eq!((steps.0.position(), steps.0.message()), (2, "b".to_owned()));
        steps.at(0, "again".into());
        assert_eq!(
            (steps.0.position(), steps.0.message()),
            (0, "again".to_owned())
        );
        assert_eq!(steps.0.length(), Some(3));
        steps.finish();
    }

    #[test]
    fn a_run_bar_is_shown_only_when_wanted() {
        let none = RunBar::new(false);
        assert!(none.0.is_none());
        // Nothing to show, and nothing happens.
        none.show(Progress {
            done: 5,
            total: Some(10),
            unit: ProgressUnit::Bytes,
        });
        none.finish();
    }
}
