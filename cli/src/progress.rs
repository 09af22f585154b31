//! The import progress bar: drawn on stderr only when stdout is a terminal and `--quiet`
//! is off, so pipes and CI logs stay clean; and only once the input is open and its size
//! known, so an input that cannot be opened fails without an empty bar before its error.

use std::io::IsTerminal;

use gapscope_analyzer::import::ImportProgress;
use indicatif::{ProgressBar, ProgressStyle};

pub struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    pub fn new(quiet: bool, label: &str) -> Self {
        let show = !quiet && std::io::stdout().is_terminal() && std::io::stderr().is_terminal();
        // Hidden until `start` gives it a size.
        let bar = show.then(|| {
            let b = ProgressBar::hidden();
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
            );
            b.set_prefix(label.to_owned());
            b
        });
        Self { bar }
    }
}

impl ImportProgress for Bar {
    fn start(&self, total: Option<u64>) {
        if let (Some(b), Some(t)) = (&self.bar, total.filter(|t| *t > 0)) {
            b.set_length(t);
            if b.is_hidden() {
                b.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            }
        }
    }
    fn advance(&self, n: u64) {
        if let Some(b) = &self.bar {
            b.inc(n);
        }
    }
    fn finish(&self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
    }
}

impl Drop for Bar {
    /// An import that failed half-way leaves no bar above its error line.
    fn drop(&mut self) {
        if let Some(b) = &self.bar
            && !b.is_finished()
        {
            b.finish_and_clear();
        }
    }
}
