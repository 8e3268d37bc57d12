//! Consumer tunables: how a rank reads, not who it is (that is
//! [`RankConfig`](crate::RankConfig)).

use std::time::Duration;

use batchweave_manifest::DecodeLimits;

use crate::ConsumerError;

/// Largest accepted prefetch depth (steps held in memory ahead of the cursor).
pub const MAX_PREFETCH: usize = 1024;

/// How a consumer reads its slice of a TGB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ReadMode {
    /// Fetch the footer once per TGB (cached), then exactly the rank's slice run with one
    /// ranged GET. The normal mode.
    #[default]
    Range,
    /// Fetch the whole TGB object and cut the slice out locally: the paper's baseline with
    /// `D * C`-fold read amplification. For benchmarks only.
    Dense,
}

/// Tunables of a [`Consumer`](crate::Consumer). Use `..Default::default()`.
///
/// The defaults: prefetch 4, footers 8 steps further ahead, range reads, polling
/// 5 ms .. 500 ms, 1-byte tokens, the default manifest decode limits.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerSettings {
    /// Steps fetched ahead of the cursor in the background (0 = none; at most
    /// [`MAX_PREFETCH`]). Memory is bounded by this many steps of this rank's slices.
    pub prefetch: usize,
    /// With range reads: the footers of this many steps after the last step in flight
    /// are fetched (and checked) in the background as soon as the held manifest lists
    /// them, so a step's fetch is one ranged GET for its slices instead of two round
    /// trips (0 = none; at most [`MAX_PREFETCH`]). A footer is 60 bytes plus 16 per slice;
    /// a footer that fails its checks is not kept, and the step's own fetch reports it.
    pub footer_lookahead: usize,
    /// Range reads (default) or dense whole-object reads (benchmarks only).
    pub read_mode: ReadMode,
    /// First wait when caught up with the stream.
    pub poll_min: Duration,
    /// Longest wait between two polls; the wait doubles from `poll_min` up to this.
    pub poll_max: Duration,
    /// Token size in bytes when a slice is cut into CP parts (1 = plain bytes).
    pub token_bytes: u32,
    /// Bounds applied to every manifest read.
    pub limits: DecodeLimits,
}

impl Default for ConsumerSettings {
    fn default() -> Self {
        Self {
            prefetch: 4,
            footer_lookahead: 8,
            read_mode: ReadMode::Range,
            poll_min: Duration::from_millis(5),
            poll_max: Duration::from_millis(500),
            token_bytes: 1,
            limits: DecodeLimits::default(),
        }
    }
}

impl ConsumerSettings {
    /// Checks the prefetch depth, the polling interval and the token size; the error
    /// says what to fix.
    pub fn validate(&self) -> Result<(), ConsumerError> {
        if self.prefetch > MAX_PREFETCH {
            return Err(ConsumerError::config(format!(
                "prefetch {} is above the limit of {MAX_PREFETCH} steps",
                self.prefetch
            )));
        }
        if self.footer_lookahead > MAX_PREFETCH {
            return Err(ConsumerError::config(format!(
                "footer_lookahead {} is above the limit of {MAX_PREFETCH} steps",
                self.footer_lookahead
            )));
        }
        if self.poll_max.is_zero() || self.poll_min > self.poll_max {
            return Err(ConsumerError::config(format!(
                "polling interval {:?}..{:?}: need 0 < poll_max and poll_min <= poll_max",
                self.poll_min, self.poll_max
            )));
        }
        if self.token_bytes == 0 {
            return Err(ConsumerError::config("token_bytes must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunables_are_validated() {
        let ok = ConsumerSettings::default();
        ok.validate().unwrap();
        let bad = [
            ConsumerSettings {
                prefetch: MAX_PREFETCH + 1,
                ..ok.clone()
            },
            ConsumerSettings {
                poll_min: Duration::from_secs(2),
                poll_max: Duration::from_secs(1),
                ..ok.clone()
            },
            ConsumerSettings {
                poll_max: Duration::ZERO,
                poll_min: Duration::ZERO,
                ..ok.clone()
            },
            ConsumerSettings {
                token_bytes: 0,
                ..ok.clone()
            },
            ConsumerSettings {
                footer_lookahead: MAX_PREFETCH + 1,
                ..ok.clone()
            },
        ];
        for s in bad {
            assert!(
                matches!(s.validate(), Err(ConsumerError::Config { .. })),
                "{s:?}"
            );
        }
    }
}
