//! Randomness: sizes, choices and ids as agents' transcripts have them, and a session's clock.

use fastrand::Rng;
use std::time::{Duration, UNIX_EPOCH};

pub(super) fn normal(rng: &mut Rng) -> f64 {
    let u = rng.f64().max(f64::MIN_POSITIVE);
    (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * rng.f64()).cos()
}

/// Log-uniform in [lo, hi): as many values in 1–2 K as in 10–20 K.
pub(super) fn log_uniform(rng: &mut Rng, lo: f64, hi: f64) -> usize {
    (lo * (hi / lo).powf(rng.f64())) as usize
}

/// An index into `weights`, each chosen in proportion to its weight.
pub(super) fn weighted(rng: &mut Rng, weights: &[u32]) -> usize {
    let mut pick = rng.u32(0..weights.iter().sum::<u32>());
    for (i, w) in weights.iter().enumerate() {
        if pick < *w {
            return i;
        }
        pick -= w;
    }
    unreachable!("pick is below the sum of the weights")
}

pub(super) fn pick<'a, T: ?Sized>(rng: &mut Rng, items: &[&'a T]) -> &'a T {
    items[rng.usize(0..items.len())]
}

fn from_alphabet(rng: &mut Rng, alphabet: &[u8], len: usize) -> String {
    (0..len)
        .map(|_| char::from(alphabet[rng.usize(0..alphabet.len())]))
        .collect()
}

pub(super) fn hex(rng: &mut Rng, len: usize) -> String {
    from_alphabet(rng, b"0123456789abcdef", len)
}

pub(super) fn alnum(rng: &mut Rng, len: usize) -> String {
    from_alphabet(
        rng,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
        len,
    )
}

/// What a signature, `encrypted_content` or image looks like: random bytes, base64-encoded.
pub(super) fn base64(rng: &mut Rng, len: usize) -> String {
    from_alphabet(
        rng,
        b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
        len,
    )
}

pub(super) fn uuid(rng: &mut Rng) -> String {
    let variant = char::from(b"89ab"[rng.usize(0..4)]);
    let (a, b, c) = (hex(rng, 8), hex(rng, 4), hex(rng, 3));
    format!("{a}-{b}-4{c}-{variant}{}-{}", hex(rng, 3), hex(rng, 12))
}

/// A time-ordered UUID (version 7), as Codex names its sessions.
pub(super) fn uuid_v7(rng: &mut Rng, ms: u64) -> String {
    let t = format!("{:012x}", ms & 0xffff_ffff_ffff);
    let (c, d) = (hex(rng, 3), hex(rng, 3));
    format!("{}-{}-7{c}-a{d}-{}", &t[..8], &t[8..], hex(rng, 12))
}

/// A session's clock, in milliseconds since the epoch.
#[derive(Clone, Copy)]
pub(super) struct Clock(pub(super) u64);

impl Clock {
    pub(super) fn tick(&mut self, rng: &mut Rng, lo_ms: u64, hi_ms: u64) {
        self.0 += rng.u64(lo_ms..hi_ms);
    }

    /// `2025-09-03T10:12:01.123Z`.
    pub(super) fn stamp(self) -> String {
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(self.0)).to_string()
    }

    /// `2025-09-03T10-12-01`, as in a Codex rollout's name.
    pub(super) fn file_stamp(self) -> String {
        let at = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_millis(self.0));
        at.to_string()[..19].replace(':', "-")
    }
}
