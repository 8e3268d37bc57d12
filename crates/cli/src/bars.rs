//! Progress bars on stderr (hidden when stderr is not a terminal) for the harness's runs.

use std::sync::Arc;

use batchweave_harness::progress::{Meter, Progress};
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

/// Draws every meter of a run as one bar of a stack.
pub(crate) struct Bars {
    stack: MultiProgress,
    template: &'static str,
    /// Remove a finished bar (benchmarks, load) or leave it standing (the demo).
    clear: bool,
}

impl Bars {
    /// Bars with the indicatif `template`; a finished bar is removed when `clear`
    /// (benchmarks, load) or left standing (the demo).
    pub(crate) fn new(template: &'static str, clear: bool) -> Arc<Self> {
        Arc::new(Self {
            stack: MultiProgress::new(),
            template,
            clear,
        })
    }
}

struct Bar {
    bar: ProgressBar,
    clear: bool,
}

impl Progress for Bars {
    fn meter(&self, label: &str, len: u64) -> Arc<dyn Meter> {
        let bar = self.stack.add(ProgressBar::new(len));
        if let Ok(style) = ProgressStyle::with_template(self.template) {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_prefix(label.to_owned());
        Arc::new(Bar {
            bar,
            clear: self.clear,
        })
    }
}

impl Meter for Bar {
    fn set_message(&self, message: String) {
        self.bar.set_message(message);
    }

    fn set_position(&self, position: u64) {
        self.bar.set_position(position);
    }

    fn inc(&self, delta: u64) {
        self.bar.inc(delta);
    }

    fn finish(&self) {
        if self.clear {
            self.bar.finish_and_clear();
        } else {
            self.bar.finish();
        }
    }
}
