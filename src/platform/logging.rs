//! Log lines shaped for where they land: under systemd's journal, a syslog priority prefix and no
//! timestamp (journald adds its own); elsewhere a timestamp and the level, coloured only in a
//! terminal. A progress bar on stderr is cleared while a line is written, then drawn again.

use indicatif::MultiProgress;
use log::{LevelFilter, Log, Metadata, Record};
use std::io::Write;
use std::sync::OnceLock;

/// Every progress bar on stderr belongs to this set, so that log lines can suspend them.
pub(crate) fn bars() -> &'static MultiProgress {
    static BARS: OnceLock<MultiProgress> = OnceLock::new();
    BARS.get_or_init(MultiProgress::new)
}

/// Where stderr goes, as far as log formatting cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Destination {
    /// systemd's journal: `JOURNAL_STREAM` names the stderr we have.
    Journal,
    /// A terminal: a person is watching.
    Terminal,
    /// A file or a pipe.
    Plain,
}

impl Destination {
    /// Finds out where stderr goes now.
    pub(crate) fn of_stderr() -> Destination {
        use std::io::IsTerminal;
        if journal_is_stderr(std::env::var("JOURNAL_STREAM").ok().as_deref()) {
            Destination::Journal
        } else if std::io::stderr().is_terminal() {
            Destination::Terminal
        } else {
            Destination::Plain
        }
    }
}

/// True when `JOURNAL_STREAM` (`DEVICE:INODE`) names the file stderr is: systemd sets it for a
/// service whose output goes to the journal, and a child whose stderr was redirected elsewhere
/// inherits the variable with another file behind it.
fn journal_is_stderr(journal_stream: Option<&str>) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Some((dev, ino)) = journal_stream.and_then(|v| v.split_once(':')) else {
        return false;
    };
    let (Ok(dev), Ok(ino)) = (dev.parse::<u64>(), ino.parse::<u64>()) else {
        return false;
    };
    let stderr = std::io::stderr();
    let fd = std::os::fd::AsFd::as_fd(&stderr);
    let Ok(owned) = fd.try_clone_to_owned() else {
        return false;
    };
    std::fs::File::from(owned)
        .metadata()
        .is_ok_and(|m| m.dev() == dev && m.ino() == ino)
}

/// The syslog priority journald reads from a `<N>` prefix.
fn priority(level: log::Level) -> u8 {
    match level {
        log::Level::Error => 3,
        log::Level::Warn => 4,
        log::Level::Info => 6,
        log::Level::Debug | log::Level::Trace => 7,
    }
}

struct Logger {
    inner: env_logger::Logger,
}

impl Log for Logger {
    fn enabled(&self, metadata: &Metadata) -> bool {
        self.inner.enabled(metadata)
    }

    fn log(&self, record: &Record) {
        if self.inner.matches(record) {
            bars().suspend(|| self.inner.log(record));
        }
    }

    fn flush(&self) {
        self.inner.flush();
    }
}

/// Installs the logger. `RUST_LOG`, when set, decides what is logged (module filters
/// included) and `level` is ignored; otherwise `level` does, and [`set_level`] can change it
/// later. Call once, before anything logs.
pub(crate) fn init(level: LevelFilter) {
    let destination = Destination::of_stderr();
    let mut builder = env_logger::Builder::new();
    match std::env::var("RUST_LOG") {
        Ok(spec) => builder.parse_filters(&spec),
        // Everything passes the logger's own filter; the global maximum decides.
        Err(_) => builder.filter_level(LevelFilter::Trace),
    };
    if destination == Destination::Journal {
        builder.write_style(env_logger::WriteStyle::Never);
        builder
            .format(|buf, record| writeln!(buf, "<{}>{}", priority(record.level()), record.args()));
    } else {
        builder.format(|buf, record| {
            let ts = buf.timestamp_millis();
            let style = buf.default_level_style(record.level());
            let level = record.level();
            writeln!(buf, "{ts} {style}{level:<5}{style:#} {}", record.args())
        });
    }
    let inner = builder.build();
    let max = if rust_log_set() {
        inner.filter()
    } else {
        level
    };
    if log::set_boxed_logger(Box::new(Logger { inner })).is_ok() {
        log::set_max_level(max);
    }
}

fn rust_log_set() -> bool {
    std::env::var_os("RUST_LOG").is_some()
}

/// Changes the log level, unless `RUST_LOG` decides it. `Ok(())` when changed; `Err` says why
/// not.
pub(crate) fn set_level(level: LevelFilter) -> Result<(), &'static str> {
    if rust_log_set() {
        return Err("RUST_LOG is set and wins over log_level");
    }
    log::set_max_level(level);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn journal_priorities_follow_syslog() {
        assert_eq!(priority(log::Level::Error), 3);
        assert_eq!(priority(log::Level::Warn), 4);
        assert_eq!(priority(log::Level::Info), 6);
        assert_eq!(priority(log::Level::Debug), 7);
    }

    #[test]
    fn a_journal_stream_that_is_not_stderr_is_ignored() {
        assert!(!journal_is_stderr(None));
        assert!(!journal_is_stderr(Some("garbage")));
        assert!(!journal_is_stderr(Some("1:1")));
    }
}
