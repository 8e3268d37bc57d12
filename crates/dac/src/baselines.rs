//! The paper's baseline commit policies (section 7, "Commit policy baselines").

use std::time::Duration;

use crate::model::{MAX_GAP_SECS, secs_to_duration};
use crate::policy::gap_decision;
use crate::{AttemptOutcome, CommitPolicy, Decision};

/// Decision of the count-based policies: commit once `threshold` TGBs are pending.
fn count_decision(threshold: usize, pending: usize) -> Decision {
    if pending >= threshold.max(1) {
        Decision::CommitNow
    } else {
        Decision::NeedMoreData
    }
}

/// NAIVE: commit every TGB as soon as it is pending; never waits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Naive;

impl CommitPolicy for Naive {
    fn name(&self) -> &str {
        "naive"
    }

    fn decide(&self, _since_last_attempt: Duration, pending: usize) -> Decision {
        count_decision(1, pending)
    }

    fn on_attempt(&mut self, _outcome: &AttemptOutcome, _u: f64) {}

    fn gap(&self) -> Duration {
        Duration::ZERO
    }

    fn tau_estimate(&self) -> Option<Duration> {
        None
    }
}

/// FIXED-k: commit whenever at least `k` TGBs are pending (the paper's FIXED10 and FIXED100).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fixed {
    k: usize,
    name: String,
}

impl Fixed {
    /// Commit every `k` TGBs; `k = 0` is treated as `1`.
    pub fn new(k: usize) -> Self {
        let k = k.max(1);
        Self {
            k,
            name: format!("fixed:{k}"),
        }
    }

    /// The batch size `k`.
    pub fn k(&self) -> usize {
        self.k
    }
}

impl CommitPolicy for Fixed {
    fn name(&self) -> &str {
        &self.name
    }

    fn decide(&self, _since_last_attempt: Duration, pending: usize) -> Decision {
        count_decision(self.k, pending)
    }

    fn on_attempt(&mut self, _outcome: &AttemptOutcome, _u: f64) {}

    fn gap(&self) -> Duration {
        Duration::ZERO
    }

    fn tau_estimate(&self) -> Option<Duration> {
        None
    }
}

/// Starting threshold of [`Incr`], in TGBs.
pub const INCR_START: usize = 10;

/// INCR: commit when `threshold` TGBs are pending; the threshold starts at [`INCR_START`]
/// (10) and grows by one on each conflict (successes leave it unchanged).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incr {
    threshold: usize,
}

impl Incr {
    /// A fresh INCR policy with threshold [`INCR_START`].
    pub fn new() -> Self {
        Self {
            threshold: INCR_START,
        }
    }

    /// The current threshold, in TGBs.
    pub fn threshold(&self) -> usize {
        self.threshold
    }
}

impl Default for Incr {
    fn default() -> Self {
        Self::new()
    }
}

impl CommitPolicy for Incr {
    fn name(&self) -> &str {
        "incr"
    }

    fn decide(&self, _since_last_attempt: Duration, pending: usize) -> Decision {
        count_decision(self.threshold, pending)
    }

    fn on_attempt(&mut self, outcome: &AttemptOutcome, _u: f64) {
        if !outcome.success {
            self.threshold = self.threshold.saturating_add(1);
        }
    }

    fn gap(&self) -> Duration {
        Duration::ZERO
    }

    fn tau_estimate(&self) -> Option<Duration> {
        None
    }
}

/// Initial AIMD attempt rate, in attempts per second (gap 100 ms); our choice.
pub const AIMD_INITIAL_RATE: f64 = 10.0;
/// AIMD additive increase per successful attempt, in attempts per second; our choice.
pub const AIMD_INCREASE: f64 = 1.0;
/// Largest AIMD rate, in attempts per second (gap >= 1 ms).
pub const AIMD_MAX_RATE: f64 = 1000.0;
/// Smallest AIMD rate, in attempts per second (gap <= [`MAX_GAP_SECS`]).
pub const AIMD_MIN_RATE: f64 = 1.0 / MAX_GAP_SECS;

/// AIMD: TCP-style rate control. The attempt rate `r` (attempts/s) starts at `r0`, grows by
/// `a` on each success and halves on each conflict, clamped to
/// `[AIMD_MIN_RATE, AIMD_MAX_RATE]`; the gap is `1 / r`. Commits when something is pending and
/// the gap has elapsed since the last attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aimd {
    rate: f64,
    increase: f64,
}

impl Aimd {
    /// AIMD starting at `initial_rate` attempts/s and adding `increase` per success.
    ///
    /// Sanitising: a NaN `initial_rate` falls back to [`AIMD_INITIAL_RATE`], otherwise it is
    /// clamped into `[AIMD_MIN_RATE, AIMD_MAX_RATE]`; a NaN or negative `increase` counts as
    /// `0`, and `increase` is clamped to at most [`AIMD_MAX_RATE`].
    pub fn new(initial_rate: f64, increase: f64) -> Self {
        let rate = if initial_rate.is_nan() {
            AIMD_INITIAL_RATE
        } else {
            initial_rate.clamp(AIMD_MIN_RATE, AIMD_MAX_RATE)
        };
        let increase = if increase.is_nan() {
            0.0
        } else {
            increase.clamp(0.0, AIMD_MAX_RATE)
        };
        Self { rate, increase }
    }

    /// The current attempt rate, in attempts per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }
}

impl Default for Aimd {
    fn default() -> Self {
        Self::new(AIMD_INITIAL_RATE, AIMD_INCREASE)
    }
}

impl CommitPolicy for Aimd {
    fn name(&self) -> &str {
        "aimd"
    }

    fn decide(&self, since_last_attempt: Duration, pending: usize) -> Decision {
        gap_decision(self.gap(), since_last_attempt, pending)
    }

    fn on_attempt(&mut self, outcome: &AttemptOutcome, _u: f64) {
        let next = if outcome.success {
            self.rate + self.increase
        } else {
            self.rate / 2.0
        };
        self.rate = next.clamp(AIMD_MIN_RATE, AIMD_MAX_RATE);
    }

    fn gap(&self) -> Duration {
        secs_to_duration((1.0 / self.rate).min(MAX_GAP_SECS))
    }

    fn tau_estimate(&self) -> Option<Duration> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFLICT: AttemptOutcome = AttemptOutcome {
        success: false,
        fragile_window: Duration::from_millis(50),
        producers: 8,
        slot: None,
    };
    const SUCCESS: AttemptOutcome = AttemptOutcome {
        success: true,
        ..CONFLICT
    };
    const LONG: Duration = Duration::from_secs(3600);

    #[test]
    fn naive_commits_every_pending_tgb_and_ignores_outcomes() {
        let mut p = Naive;
        assert_eq!(p.decide(Duration::ZERO, 0), Decision::NeedMoreData);
        assert_eq!(p.decide(Duration::ZERO, 1), Decision::CommitNow);
        p.on_attempt(&CONFLICT, 0.3);
        assert_eq!(p.decide(Duration::ZERO, 1), Decision::CommitNow);
        assert_eq!(
            (p.gap(), p.tau_estimate(), p.name()),
            (Duration::ZERO, None, "naive")
        );
    }

    #[test]
    fn fixed_waits_for_k_tgbs() {
        let mut p = Fixed::new(10);
        assert_eq!(p.name(), "fixed:10");
        assert_eq!(p.decide(LONG, 9), Decision::NeedMoreData);
        assert_eq!(p.decide(Duration::ZERO, 10), Decision::CommitNow);
        assert_eq!(p.decide(Duration::ZERO, 250), Decision::CommitNow);
        p.on_attempt(&CONFLICT, 0.0);
        assert_eq!(p.decide(LONG, 9), Decision::NeedMoreData);
        let zero = Fixed::new(0);
        assert_eq!(zero.k(), 1);
        assert_eq!(zero.decide(Duration::ZERO, 0), Decision::NeedMoreData);
        assert_eq!(zero.decide(Duration::ZERO, 1), Decision::CommitNow);
    }

    #[test]
    fn incr_grows_by_one_per_conflict_only() {
        let mut p = Incr::new();
        assert_eq!(p.decide(LONG, 9), Decision::NeedMoreData);
        assert_eq!(p.decide(LONG, 10), Decision::CommitNow);
        for _ in 0..3 {
            p.on_attempt(&CONFLICT, 0.0);
        }
        assert_eq!(p.threshold(), 13);
        p.on_attempt(&SUCCESS, 0.0);
        assert_eq!(p.threshold(), 13);
        assert_eq!(p.decide(LONG, 12), Decision::NeedMoreData);
        assert_eq!(p.decide(Duration::ZERO, 13), Decision::CommitNow);
        assert_eq!(p.decide(Duration::ZERO, 0), Decision::NeedMoreData);
    }

    #[test]
    fn aimd_adds_on_success_and_halves_on_conflict() {
        let mut p = Aimd::default();
        assert_eq!(p.rate(), AIMD_INITIAL_RATE);
        assert_eq!(p.gap(), Duration::from_millis(100));
        p.on_attempt(&SUCCESS, 0.0);
        assert_eq!(p.rate(), AIMD_INITIAL_RATE + AIMD_INCREASE);
        p.on_attempt(&CONFLICT, 0.0);
        assert_eq!(p.rate(), (AIMD_INITIAL_RATE + AIMD_INCREASE) / 2.0);
        p.on_attempt(&CONFLICT, 0.0);
        assert_eq!(p.rate(), (AIMD_INITIAL_RATE + AIMD_INCREASE) / 4.0);
        // rate 2.75/s: gap ~ 363.6 ms.
        let gap = p.gap();
        assert!(
            gap > Duration::from_millis(363) && gap < Duration::from_millis(364),
            "{gap:?}"
        );
        assert_eq!(
            p.decide(Duration::from_millis(300), 0),
            Decision::NeedMoreData
        );
        assert!(
            matches!(p.decide(Duration::from_millis(300), 2), Decision::WaitFor(w)
            if w > Duration::from_millis(63) && w < Duration::from_millis(64))
        );
        assert_eq!(p.decide(Duration::from_millis(364), 2), Decision::CommitNow);
    }

    #[test]
    fn aimd_rate_stays_bounded() {
        let mut p = Aimd::default();
        for _ in 0..100 {
            p.on_attempt(&CONFLICT, 0.0);
        }
        assert_eq!(p.rate(), AIMD_MIN_RATE);
        assert_eq!(p.gap(), Duration::from_secs(60));
        let mut p = Aimd::new(f64::NAN, f64::INFINITY);
        assert_eq!(p.rate(), AIMD_INITIAL_RATE);
        for _ in 0..5 {
            p.on_attempt(&SUCCESS, 0.0);
        }
        assert_eq!(p.rate(), AIMD_MAX_RATE);
        assert_eq!(p.gap(), Duration::from_millis(1));
    }
}
