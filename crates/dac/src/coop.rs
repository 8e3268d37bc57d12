//! The cooperative cadence (`coop`): commits that publish every producer's uploads, so the
//! stream needs about one successful create per round whatever the producer count.
//!
//! Under DAC each producer commits only its own TGBs, and equation 7 spaces its attempts
//! `T* ~ (N - 1) tau / -ln(1 - epsilon)` apart: the stream commits about
//! `-ln(1 - epsilon) / tau` times a second, and a TGB waits `T*/2` on average, which grows
//! linearly with `N`. A cooperative committer also publishes the TGBs other producers
//! uploaded and have not committed yet (`batchweave_manifest::rebase_cooperative`), so the
//! stream needs only one successful attempt per round, by anyone. This policy keeps the
//! stream-wide attempt rate near one per round of length
//!
//! ```text
//! R = max(interval, windows * tau_hat)
//! ```
//!
//! by having each of the `N` active producers attempt every `N R (1 + rho u)`, or every DAC
//! gap `T*(N, tau_hat)` (with the default budgets) when that is shorter, so that coop never
//! waits longer than DAC would (on a fast store with few producers, `T*` is the shorter: a
//! single producer waits `4 tau`, not a round). Attempts from
//! `N` desynchronised producers then arrive at about `1 / R` per second, a conflict needs
//! another attempt inside the fragile window (probability about `1 - exp(-tau / R)`, at most
//! `1 - exp(-1 / windows)`), and an upload waits about one round until some attempt lists and
//! publishes it. Neither depends on `N`. `N` is the number of producers that are active
//! (whose entries advanced recently, see the producer), not every id the stream has seen.
//!
//! The gap is capped at [`MAX_COOP_GAP`] (one hour) instead of DAC's one minute: with 1,024
//! producers and a one-second round a producer's own gap is 17 minutes, and a 60 s cap would
//! multiply the stream's attempt rate by 17.

use std::time::Duration;

use crate::model::{MAX_GAP_SECS, optimal_gap, secs_to_duration};
use crate::params::DEFAULT_ALPHA;
use crate::policy::gap_decision;
use crate::{AttemptOutcome, CommitPolicy, DacError, DacParams, Decision, Ema};

/// The longest gap [`Coop`] ever waits between two of one producer's attempts.
pub const MAX_COOP_GAP: Duration = Duration::from_secs(3600);

/// Tuning of [`Coop`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoopParams {
    /// The target time between two attempts of the whole stream (the round), when the
    /// fragile window is short; a TGB becomes visible in about one round. Default 1 s.
    pub interval: Duration,
    /// The round is at least this many fragile windows (`tau_hat`), which bounds the
    /// conflict probability by about `1 - exp(-1 / windows)`. Default 4 (about 22%).
    pub windows: f64,
    /// Jitter of each producer's gap, as in DAC's equation 10. Default 0.5.
    pub rho: f64,
    /// EMA coefficient of the fragile-window estimate. Default as DAC's.
    pub alpha: f64,
}

impl Default for CoopParams {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            windows: 4.0,
            rho: 0.5,
            alpha: DEFAULT_ALPHA,
        }
    }
}

impl CoopParams {
    /// Checks the parameters; the error names the field.
    pub fn validate(&self) -> Result<(), DacError> {
        let bad = |name, value: f64, range| Err(DacError::InvalidParam { name, value, range });
        let interval = self.interval.as_secs_f64();
        if !(interval > 0.0 && self.interval <= MAX_COOP_GAP) {
            return bad("interval", interval, "(0, 3600] seconds");
        }
        if !(self.windows.is_finite() && self.windows >= 1.0 && self.windows <= 1000.0) {
            return bad("windows", self.windows, "[1, 1000]");
        }
        if !(self.rho.is_finite() && (0.0..=1.0).contains(&self.rho)) {
            return bad("rho", self.rho, "[0, 1]");
        }
        if !(self.alpha.is_finite() && self.alpha > 0.0 && self.alpha <= 1.0) {
            return bad("alpha", self.alpha, "(0, 1]");
        }
        Ok(())
    }
}

/// The cooperative cadence (the crate docs, section "Cooperative commits", explain it).
#[derive(Debug, Clone)]
pub struct Coop {
    params: CoopParams,
    ema: Ema,
    producers: usize,
    gap: Duration,
    attempts: u64,
}

impl Coop {
    /// A cooperative cadence with these parameters (call [`CoopParams::validate`] first if
    /// they come from a user; out-of-range values are clamped here).
    pub fn new(params: CoopParams) -> Self {
        Self {
            params,
            ema: Ema::new(params.alpha),
            producers: 1,
            gap: Duration::ZERO,
            attempts: 0,
        }
    }

    /// The stream-wide round `R = max(interval, windows * tau_hat)`, in seconds.
    pub fn round(&self) -> Duration {
        let tau = self.ema.value().unwrap_or(0.0);
        let windows = if self.params.windows.is_finite() {
            self.params.windows.clamp(1.0, 1000.0)
        } else {
            1.0
        };
        let r = self.params.interval.as_secs_f64().max(windows * tau);
        secs_to_duration(r).min(MAX_COOP_GAP)
    }
}

impl Default for Coop {
    fn default() -> Self {
        Self::new(CoopParams::default())
    }
}

impl CommitPolicy for Coop {
    fn name(&self) -> &str {
        "coop"
    }

    fn decide(&self, since_last_attempt: Duration, pending: usize) -> Decision {
        gap_decision(self.gap, since_last_attempt, pending)
    }

    fn on_attempt(&mut self, outcome: &AttemptOutcome, u: f64) {
        self.ema.observe(outcome.fragile_window.as_secs_f64());
        self.producers = outcome.producers.max(1);
        let n = u32::try_from(self.producers).unwrap_or(u32::MAX);
        let mut own = self.round().saturating_mul(n).min(MAX_COOP_GAP);
        // Never wait longer than DAC would (its T* below its 60 s cap is exact).
        let tau = self.ema.value().unwrap_or(0.0);
        let t_star = optimal_gap(self.producers, tau, &DacParams::default());
        if t_star < MAX_GAP_SECS {
            own = own.min(secs_to_duration(t_star));
        }
        let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
        let rho = if self.params.rho.is_finite() {
            self.params.rho.clamp(0.0, 1.0)
        } else {
            0.0
        };
        // As DAC: a uniform first phase spreads producers launched together over the gap.
        let factor = if self.attempts == 0 { u } else { 1.0 + rho * u };
        self.gap = own.mul_f64(factor).min(MAX_COOP_GAP);
        self.attempts = self.attempts.saturating_add(1);
    }

    fn gap(&self) -> Duration {
        self.gap
    }

    fn tau_estimate(&self) -> Option<Duration> {
        self.ema.value().map(secs_to_duration)
    }

    fn cooperative(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(tau_ms: u64, producers: usize) -> AttemptOutcome {
        AttemptOutcome {
            success: true,
            fragile_window: Duration::from_millis(tau_ms),
            producers,
        }
    }

    #[test]
    fn the_stream_wide_rate_stays_one_per_round_whatever_n() {
        // tau = 120 ms (the simulator's S3 model): DAC's T* is longer than N rounds from
        // N = 2 on (at N = 1 it is 4 tau = 480 ms).
        for n in [2usize, 8, 32, 128, 1024] {
            let mut c = Coop::default();
            c.on_attempt(&outcome(120, n), 0.5);
            c.on_attempt(&outcome(120, n), 0.0);
            // N producers each every N * R: the stream attempts once per R = 1 s.
            let per_stream = c.gap().as_secs_f64() / n as f64;
            assert!((per_stream - 1.0).abs() < 1e-9, "n={n}: {per_stream}");
        }
    }

    #[test]
    fn a_long_fragile_window_stretches_the_round() {
        let mut c = Coop::default();
        c.on_attempt(&outcome(900, 4), 0.0);
        assert_eq!(c.round(), Duration::from_millis(3600));
        c.on_attempt(&outcome(900, 4), 0.0);
        assert_eq!(c.gap(), Duration::from_millis(14_400));
    }

    #[test]
    fn it_never_waits_longer_than_dac_would() {
        for (tau_ms, n) in [(2u64, 1usize), (2, 2), (2, 16), (120, 1), (30, 4)] {
            let mut c = Coop::default();
            let mut d = crate::Dac::default();
            for _ in 0..2 {
                c.on_attempt(&outcome(tau_ms, n), 0.0);
                d.on_attempt(&outcome(tau_ms, n), 0.0);
            }
            assert!(
                c.gap() <= d.gap(),
                "tau {tau_ms} ms, n {n}: {:?} > {:?}",
                c.gap(),
                d.gap()
            );
        }
        // A single producer on a fast store: DAC's duty gap, 4 tau, not a round.
        let mut c = Coop::default();
        c.on_attempt(&outcome(2, 1), 0.0);
        c.on_attempt(&outcome(2, 1), 0.0);
        assert_eq!(c.gap(), Duration::from_millis(8));
    }

    #[test]
    fn waits_out_the_gap_and_needs_data() {
        let mut c = Coop::default();
        assert_eq!(c.decide(Duration::ZERO, 0), Decision::NeedMoreData);
        assert_eq!(c.decide(Duration::ZERO, 1), Decision::CommitNow);
        c.on_attempt(&outcome(100, 8), 1.0);
        c.on_attempt(&outcome(100, 8), 0.0);
        assert_eq!(c.gap(), Duration::from_secs(8));
        assert_eq!(
            c.decide(Duration::from_millis(500), 3),
            Decision::WaitFor(Duration::from_millis(7500))
        );
        assert_eq!(c.decide(Duration::from_secs(8), 3), Decision::CommitNow);
        assert!(c.cooperative());
    }

    #[test]
    fn gaps_are_capped_and_hostile_inputs_are_survived() {
        let mut c = Coop::new(CoopParams {
            windows: f64::NAN,
            rho: f64::INFINITY,
            ..Default::default()
        });
        c.on_attempt(&outcome(u64::MAX / 2, usize::MAX), f64::NAN);
        c.on_attempt(&outcome(u64::MAX / 2, usize::MAX), 7.0);
        assert!(c.gap() <= MAX_COOP_GAP);
        assert!(CoopParams::default().validate().is_ok());
        for bad in [
            CoopParams {
                interval: Duration::ZERO,
                ..Default::default()
            },
            CoopParams {
                windows: 0.5,
                ..Default::default()
            },
            CoopParams {
                rho: -1.0,
                ..Default::default()
            },
            CoopParams {
                alpha: 0.0,
                ..Default::default()
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }
}
