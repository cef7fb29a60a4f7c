//! Telling the service manager how the daemon is doing, over the `sd_notify` protocol: ready,
//! status lines, watchdog keep-alives, stopping. Without `NOTIFY_SOCKET` every call does
//! nothing.

use sd_notify::NotifyState;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Status lines are sent at most this often, except the ones that mark a change of phase.
const STATUS_EVERY: Duration = Duration::from_secs(1);

/// The daemon's link to systemd (or any manager speaking the protocol).
pub(crate) struct ServiceManager {
    enabled: bool,
    /// Half the watchdog timeout, as systemd recommends; `None` when no watchdog is set.
    ping_every: Option<Duration>,
    last: Mutex<Sent>,
    /// Set after the first failure to send, so that a broken socket warns once.
    failed: AtomicBool,
}

struct Sent {
    ping: Instant,
    status: Option<Instant>,
    /// The newest status line the throttle held back, sent once it is due.
    pending: Option<String>,
}

impl ServiceManager {
    /// Reads `NOTIFY_SOCKET`, `WATCHDOG_USEC` and `WATCHDOG_PID`.
    pub(crate) fn from_env() -> ServiceManager {
        let enabled = std::env::var_os("NOTIFY_SOCKET").is_some();
        let ping_every = sd_notify::watchdog_enabled()
            .filter(|_| enabled)
            .map(|timeout| timeout / 2);
        ServiceManager {
            enabled,
            ping_every,
            last: Mutex::new(Sent {
                ping: Instant::now(),
                status: None,
                pending: None,
            }),
            failed: AtomicBool::new(false),
        }
    }

    /// True when a service manager listens (`NOTIFY_SOCKET` is set): status lines reach it.
    pub(crate) fn listening(&self) -> bool {
        self.enabled
    }

    /// How often the work loop must call [`ServiceManager::watchdog`], if at all.
    pub(crate) fn ping_every(&self) -> Option<Duration> {
        self.ping_every
    }

    /// The daemon is ready: its watches are in place.
    pub(crate) fn ready(&self, status: &str) {
        self.send(&[NotifyState::Ready, NotifyState::Status(status)]);
        let mut sent = self.sent();
        sent.status = Some(Instant::now());
        sent.pending = None;
    }

    /// A status line for `systemctl status`. Within a second of the last one (unless `now` is
    /// set) it is held back instead, replacing any line held back before, and sent by
    /// [`ServiceManager::send_held_back_status`] once the second is over: the last word is
    /// never lost to the throttle.
    pub(crate) fn status(&self, text: &str, now: bool) {
        if !self.enabled {
            return;
        }
        {
            let mut sent = self.sent();
            if !now && sent.status.is_some_and(|t| t.elapsed() < STATUS_EVERY) {
                sent.pending = Some(text.to_owned());
                return;
            }
            sent.status = Some(Instant::now());
            sent.pending = None;
        }
        self.send(&[NotifyState::Status(text)]);
    }

    /// How long until a held-back status line is due; `None` when none is held back.
    pub(crate) fn held_back_status_due(&self) -> Option<Duration> {
        let sent = self.sent();
        sent.pending.as_ref()?;
        let since = sent.status.map_or(STATUS_EVERY, |t| t.elapsed());
        Some(STATUS_EVERY.saturating_sub(since))
    }

    /// Sends the status line held back by the throttle, if there is one.
    pub(crate) fn send_held_back_status(&self) {
        let text = {
            let mut sent = self.sent();
            let Some(text) = sent.pending.take() else {
                return;
            };
            sent.status = Some(Instant::now());
            text
        };
        self.send(&[NotifyState::Status(&text)]);
    }

    /// Keeps the watchdog fed; sends a keep-alive when half the timeout has passed. Called
    /// from the loop that does the work, so that a wedged loop stops feeding it.
    pub(crate) fn watchdog(&self) {
        let Some(every) = self.ping_every else { return };
        {
            let mut sent = self.sent();
            if sent.ping.elapsed() < every {
                return;
            }
            sent.ping = Instant::now();
        }
        self.send(&[NotifyState::Watchdog]);
    }

    /// The daemon is stopping.
    pub(crate) fn stopping(&self) {
        self.send(&[NotifyState::Stopping, NotifyState::Status("stopping")]);
    }

    /// The daemon is reloading its configuration; `reloaded` follows.
    pub(crate) fn reloading(&self) {
        // systemd matches a reload to its request by this timestamp (systemd.service(5)).
        match NotifyState::monotonic_usec_now() {
            Ok(now) => self.send(&[NotifyState::Reloading, now]),
            Err(_) => self.send(&[NotifyState::Reloading]),
        }
    }

    /// The reload is done.
    pub(crate) fn reloaded(&self, status: &str) {
        self.ready(status);
    }

    fn sent(&self) -> std::sync::MutexGuard<'_, Sent> {
        // Two timestamps: still meaningful after a panic elsewhere.
        self.last.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn send(&self, states: &[NotifyState]) {
        if !self.enabled {
            return;
        }
        if let Err(e) = sd_notify::notify(states)
            && !self.failed.swap(true, Ordering::Relaxed)
        {
            log::warn!(
                "cannot notify the service manager at NOTIFY_SOCKET: {e}; it may restart the \
                 service as not ready (check the unit's NotifyAccess=)"
            );
        }
    }
}
