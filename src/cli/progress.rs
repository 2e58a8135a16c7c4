//! Progress of a long apply or `up` on a terminal: an indicatif bar on standard error (steps
//! done of total, the current step and its space, the time so far). Without a terminal on
//! standard error there is no bar at all: only the lines cotal prints anyway, and the time.

use crate::apply::Progress;
use crate::plan::Step;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The bar, drawn from the first step on (nothing before, so lines printed around an apply
/// never land on it), or nothing at all when standard error is not a terminal.
pub struct Bar {
    terminal: bool,
    bar: std::cell::RefCell<Option<ProgressBar>>,
    started: Instant,
}

impl Bar {
    pub fn new() -> Self {
        Bar {
            terminal: std::io::stderr().is_terminal(),
            bar: std::cell::RefCell::new(None),
            started: Instant::now(),
        }
    }

    /// How long since the bar was made: the time the summary line gives.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }
}

impl Default for Bar {
    fn default() -> Self {
        Bar::new()
    }
}

impl Progress for Bar {
    fn step(&self, index: usize, total: usize, step: &Step) {
        if !self.terminal {
            return;
        }
        let mut slot = self.bar.borrow_mut();
        let bar = slot.get_or_insert_with(|| {
            let bar =
                ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed}] {bar:24} {pos}/{len} {wide_msg}",
                )
                .expect("the template is valid"),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        bar.set_length(total as u64);
        bar.set_position(index as u64);
        bar.set_message(step.title());
    }

    fn finished(&self) {
        if let Some(bar) = self.bar.borrow_mut().take() {
            bar.finish_and_clear();
        }
    }
}

/// `1.2 s`, `340 ms`.
pub fn took(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.1} s", d.as_secs_f64())
    } else {
        format!("{} ms", d.as_millis())
    }
}
