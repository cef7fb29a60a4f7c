//! How far a pass has got, and how that is shown: a progress bar in a terminal, a summary log
//! line every few seconds elsewhere.

use crate::platform::logging::{self, Destination};
use indicatif::{HumanBytes, HumanDuration, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::{Duration, Instant};

/// What a pass has done so far. Totals are known once the pass has planned its files.
#[derive(Clone, Copy, Debug, Default)]
pub struct Progress {
    /// Files the pass will look at.
    pub files_total: u64,
    /// Files it is done with.
    pub files_done: u64,
    /// Bytes between the cursors and the sizes seen when the pass planned.
    pub bytes_total: u64,
    /// Bytes read so far.
    pub bytes_done: u64,
    /// Records archived so far.
    pub records: u64,
    /// True once the pass has ended.
    pub finished: bool,
}

impl Progress {
    /// Bytes still to read, as far as the plan knew.
    pub fn bytes_left(&self) -> u64 {
        self.bytes_total.saturating_sub(self.bytes_done)
    }
}

/// How a backfill's progress is shown.
#[derive(Clone, Copy, Debug)]
pub(crate) enum ProgressShow {
    /// A bar on stderr (a person is watching a terminal).
    Bar,
    /// An info line at most this often.
    Log(Duration),
}

impl ProgressShow {
    /// A bar when stderr is a terminal, else a log line every `every`.
    pub(crate) fn for_stderr(every: Duration) -> ProgressShow {
        match Destination::of_stderr() {
            Destination::Terminal => ProgressShow::Bar,
            Destination::Journal | Destination::Plain => ProgressShow::Log(every),
        }
    }

    /// Starts showing a pass that begins now.
    pub(crate) fn start(self) -> ProgressDisplay {
        let started = Instant::now();
        match self {
            ProgressShow::Bar => ProgressDisplay::Bar { bar: None },
            ProgressShow::Log(every) => ProgressDisplay::Log {
                every,
                last: started,
                started,
            },
        }
    }
}

/// A progress display for one pass.
pub(crate) enum ProgressDisplay {
    /// The bar, made once the totals are known (a pass with nothing to read shows none).
    Bar {
        /// The bar, once there is something to show.
        bar: Option<ProgressBar>,
    },
    /// Log lines.
    Log {
        /// At most one line this often.
        every: Duration,
        /// When the last line was written.
        last: Instant,
        /// When the pass began.
        started: Instant,
    },
}

impl ProgressDisplay {
    /// Shows `p`.
    pub(crate) fn update(&mut self, p: &Progress) {
        match self {
            ProgressDisplay::Bar { bar } => update_bar(bar, p),
            ProgressDisplay::Log {
                every,
                last,
                started,
            } => {
                if !p.finished && p.bytes_total > 0 && last.elapsed() >= *every {
                    *last = Instant::now();
                    log::info!("backfill progress {}", summary(p, started.elapsed()));
                }
            }
        }
    }
}

fn update_bar(bar: &mut Option<ProgressBar>, p: &Progress) {
    if bar.is_none() && p.bytes_total > 0 && !p.finished {
        *bar = Some(new_bar(p.bytes_total));
    }
    let Some(b) = bar else { return };
    if p.finished {
        b.finish_and_clear();
        logging::bars().remove(b);
        *bar = None;
        return;
    }
    b.set_length(p.bytes_total.max(p.bytes_done));
    b.set_position(p.bytes_done);
    b.set_message(format!(
        "files {}/{} · {} records",
        p.files_done, p.files_total, p.records
    ));
}

fn new_bar(total: u64) -> ProgressBar {
    let style = ProgressStyle::with_template(
        "backfill [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta} · {msg}",
    )
    .expect("the template is valid")
    .progress_chars("=> ");
    let bar =
        ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr()).with_style(style);
    logging::bars().add(bar)
}

/// `files=3/10 bytes=1.2 MiB/4 MiB rate=50 MiB/s eta=2s records=123`.
fn summary(p: &Progress, elapsed: Duration) -> String {
    let secs = elapsed.as_secs_f64().max(1e-3);
    let rate = (p.bytes_done as f64 / secs) as u64;
    let eta = match rate {
        0 => "unknown".to_owned(),
        r => HumanDuration(Duration::from_secs(p.bytes_left() / r)).to_string(),
    };
    format!(
        "files={}/{} bytes={}/{} rate={}/s eta={} records={}",
        p.files_done,
        p.files_total,
        HumanBytes(p.bytes_done),
        HumanBytes(p.bytes_total),
        HumanBytes(rate),
        eta,
        p.records
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_names_files_bytes_rate_and_eta() {
        let p = Progress {
            files_total: 10,
            files_done: 3,
            bytes_total: 4 << 20,
            bytes_done: 1 << 20,
            records: 7,
            finished: false,
        };
        let s = summary(&p, Duration::from_secs(1));
        assert_eq!(
            s,
            "files=3/10 bytes=1.00 MiB/4.00 MiB rate=1.00 MiB/s eta=3 seconds records=7"
        );
    }
}
