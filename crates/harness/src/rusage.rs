//! This process's resource usage (`getrusage(RUSAGE_SELF)`): CPU time and peak RSS.
//! Unknown (`None`) off Unix.

use std::time::Duration;

/// One reading of the process's resource usage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// User CPU time of all threads so far.
    pub user: Duration,
    /// System CPU time of all threads so far.
    pub system: Duration,
    /// Peak resident set size so far, KiB.
    pub max_rss_kib: u64,
}

impl Usage {
    /// User + system CPU time.
    pub fn cpu(&self) -> Duration {
        self.user + self.system
    }

    /// CPU time spent since `earlier` (user + system, saturating).
    pub fn cpu_since(&self, earlier: &Usage) -> Duration {
        self.cpu().saturating_sub(earlier.cpu())
    }
}

/// The process's usage now (`None` where getrusage is unavailable or failed).
#[cfg(unix)]
pub fn now() -> Option<Usage> {
    use nix::sys::resource::{UsageWho, getrusage};
    use nix::sys::time::TimeValLike as _;
    let u = getrusage(UsageWho::RUSAGE_SELF).ok()?;
    let dur = |t: nix::sys::time::TimeVal| {
        Duration::from_micros(u64::try_from(t.num_microseconds()).unwrap_or(0))
    };
    let rss = u64::try_from(u.max_rss()).unwrap_or(0);
    // ru_maxrss is in bytes on Apple platforms, KiB elsewhere.
    let max_rss_kib = if cfg!(target_vendor = "apple") {
        rss / 1024
    } else {
        rss
    };
    Some(Usage {
        user: dur(u.user_time()),
        system: dur(u.system_time()),
        max_rss_kib,
    })
}

/// The process's usage now (`None` where getrusage is unavailable or failed).
#[cfg(not(unix))]
pub fn now() -> Option<Usage> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(unix)]
    #[test]
    fn usage_moves_forward() {
        let a = now().unwrap();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = now().unwrap();
        assert!(b.cpu() >= a.cpu());
        assert_eq!(b.cpu_since(&a), b.cpu() - a.cpu());
        assert!(b.max_rss_kib > 0 && b.max_rss_kib >= a.max_rss_kib);
    }
}
