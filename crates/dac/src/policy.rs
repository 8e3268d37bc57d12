//! The commit-policy contract and the DAC policy (paper Algorithm 1).

use std::fmt::Debug;
use std::time::Duration;

use crate::model::{jittered_gap_within, optimal_gap, secs_to_duration};
use crate::{DacParams, Ema};

/// What a producer's commit loop should do now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Attempt a commit now.
    CommitNow,
    /// Data is pending but the policy wants the producer to wait this long first (measured
    /// from the call to [`CommitPolicy::decide`]); ask again afterwards.
    WaitFor(Duration),
    /// Not enough buffered TGBs yet; ask again after materialising more.
    NeedMoreData,
}

/// What happened in one commit attempt, reported to [`CommitPolicy::on_attempt`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttemptOutcome {
    /// `true` if the conditional create succeeded, `false` on a conflict.
    pub success: bool,
    /// The fragile window `tau_v`: from reading the base manifest version to the end of the
    /// write attempt.
    pub fragile_window: Duration,
    /// Producers in the per-producer state map of the manifest seen after the attempt (the
    /// committed one on success, the rebase base on conflict), including this producer.
    pub producers: usize,
    /// This producer's place in a cooperative schedule, when the caller knows it; the
    /// policies that do not schedule by it ([`CommitPolicy::cooperative`] `false`) ignore it.
    pub slot: Option<Slot>,
}

/// A producer's place in the stream's cooperative schedule ([`Coop`](crate::Coop)): its
/// index among the active producers of the manifest seen after the attempt (sorted by id, so
/// every producer that read the same version computes the same indices), and the wall-clock
/// time the attempt ended, which places rounds on one time line for all producers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot {
    /// Index among the `producers` active producers, `< producers`.
    pub index: usize,
    /// Wall-clock Unix milliseconds at the end of the attempt (the store's clock).
    pub now_ms: u64,
}

/// Decides when a producer attempts a manifest commit.
///
/// Contract:
/// * [`decide`](Self::decide) is pure (takes `&self`), cheap and never blocks; it returns
///   [`Decision::NeedMoreData`] whenever `pending == 0`.
/// * The caller reports **every** attempt, success or conflict, through
///   [`on_attempt`](Self::on_attempt), passing a uniform draw `u` in `[0, 1)` from its own
///   seeded RNG, so policies stay deterministic.
/// * A producer's final drain bypasses the policy; policies have no flush mode.
/// * No method panics, whatever the inputs.
///
/// The trait is object safe: the producer holds a `Box<dyn CommitPolicy>` built by
/// [`PolicyKind::build`](crate::PolicyKind::build).
pub trait CommitPolicy: Send + Debug {
    /// Short name for logs and metrics, in the CLI spelling (`dac`, `fixed:10`, ...).
    fn name(&self) -> &str;

    /// Whether to commit now.
    ///
    /// `since_last_attempt`: time since the previous attempt ended (or since start);
    /// `pending`: TGBs buffered, not yet committed.
    fn decide(&self, since_last_attempt: Duration, pending: usize) -> Decision;

    /// After every attempt, success or conflict; `u` is a uniform draw in `[0, 1)` from the
    /// caller's seeded RNG.
    fn on_attempt(&mut self, outcome: &AttemptOutcome, u: f64);

    /// The current wait gap between attempts (zero for count-based policies).
    fn gap(&self) -> Duration;

    /// DAC's EMA of the fragile window; `None` for other policies (and for DAC before its
    /// first attempt).
    fn tau_estimate(&self) -> Option<Duration>;

    /// Whether the producer's commits also publish other producers' uploads (a cooperative
    /// commit, [`Coop`](crate::Coop)); then `producers` in [`AttemptOutcome`] counts the
    /// active producers. `false` unless a policy says otherwise.
    fn cooperative(&self) -> bool {
        false
    }

    /// A cooperative policy's stream-wide round: about how long an upload waits until some
    /// producer's attempt publishes it. A producer whose buffer is full (its appenders wait
    /// for room) reads the chain for up to two rounds, to find its uploads published by
    /// others, before it attempts out of turn. `None` (the default) for policies whose
    /// commits publish only their own producer's TGBs: those attempt at once.
    fn round(&self) -> Option<Duration> {
        None
    }
}

/// Decision shared by the gap-based policies (DAC, AIMD): commit once `gap` has elapsed since
/// the last attempt and something is pending.
pub(crate) fn gap_decision(
    gap: Duration,
    since_last_attempt: Duration,
    pending: usize,
) -> Decision {
    if pending == 0 {
        Decision::NeedMoreData
    } else if since_last_attempt >= gap {
        Decision::CommitNow
    } else {
        Decision::WaitFor(gap.saturating_sub(since_last_attempt))
    }
}

/// Decentralized Adaptive Commit (paper Algorithm 1).
///
/// Starts with gap `0` (the first attempt happens as soon as a TGB is pending). After every
/// attempt it folds the fragile window into the EMA (equation 6), takes `N` from the
/// outcome, and sets `gap = T*(N, tau_hat) (1 + rho u)` (equations 7-10).
///
/// The one exception is the gap after the first attempt, drawn uniformly from `[0, T*)`:
/// producers started together (a job launch) would otherwise all attempt again at about
/// `T*`, `2 T*`, ..., phase-locked within the `rho` jitter, while equation 2 assumes
/// independent attempt processes. A random first phase spreads them over the whole gap.
#[derive(Debug, Clone)]
pub struct Dac {
    params: DacParams,
    ema: Ema,
    producers: usize,
    gap: Duration,
    attempts: u64,
}

impl Dac {
    /// A DAC policy with the given parameters, used as given: out-of-range values are
    /// sanitised by the math (see the crate docs), so call [`DacParams::validate`] first if
    /// they come from a user.
    pub fn new(params: DacParams) -> Self {
        Self {
            params,
            ema: Ema::new(params.alpha),
            producers: 1,
            gap: Duration::ZERO,
            attempts: 0,
        }
    }

    /// The parameters in use.
    pub fn params(&self) -> &DacParams {
        &self.params
    }

    /// The producer count `N` from the last reported attempt (`1` before any).
    pub fn producers(&self) -> usize {
        self.producers
    }

    /// The unjittered optimum `T*` (equation 9) for the current estimates.
    pub fn optimal_gap(&self) -> Duration {
        let tau = self.ema.value().unwrap_or(0.0);
        secs_to_duration(optimal_gap(self.producers, tau, &self.params))
    }
}

impl Default for Dac {
    fn default() -> Self {
        Self::new(DacParams::default())
    }
}

impl CommitPolicy for Dac {
    fn name(&self) -> &str {
        "dac"
    }

    fn decide(&self, since_last_attempt: Duration, pending: usize) -> Decision {
        gap_decision(self.gap, since_last_attempt, pending)
    }

    fn on_attempt(&mut self, outcome: &AttemptOutcome, u: f64) {
        self.ema.observe(outcome.fragile_window.as_secs_f64());
        self.producers = outcome.producers;
        let tau = self.ema.value().unwrap_or(0.0);
        let t_star = optimal_gap(self.producers, tau, &self.params);
        let cap = self.params.max_gap_secs;
        self.gap = if self.attempts == 0 {
            // Random first phase: jittered_gap_within with rho = 0 sanitises T*;
            // u is clamped to [0, 1] (NaN -> 0).
            let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
            secs_to_duration(jittered_gap_within(t_star, 0.0, 0.0, cap) * u)
        } else {
            secs_to_duration(jittered_gap_within(t_star, self.params.rho, u, cap))
        };
        self.attempts = self.attempts.saturating_add(1);
    }

    fn gap(&self) -> Duration {
        self.gap
    }

    fn tau_estimate(&self) -> Option<Duration> {
        self.ema.value().map(secs_to_duration)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_GAP_SECS;

    fn outcome(success: bool, tau_ms: u64, producers: usize) -> AttemptOutcome {
        AttemptOutcome {
            success,
            fragile_window: Duration::from_millis(tau_ms),
            producers,
            slot: None,
        }
    }

    #[test]
    fn dac_starts_with_zero_gap_and_needs_data() {
        let dac = Dac::default();
        assert_eq!(dac.gap(), Duration::ZERO);
        assert_eq!(dac.tau_estimate(), None);
        assert_eq!(dac.decide(Duration::ZERO, 0), Decision::NeedMoreData);
        assert_eq!(dac.decide(Duration::ZERO, 1), Decision::CommitNow);
    }

    #[test]
    fn dac_waits_out_the_gap() {
        let params = DacParams {
            rho: 0.0,
            ..Default::default()
        };
        let mut dac = Dac::new(params);
        // N = 1: only the duty bound, T = 4 tau = 400 ms; the first gap is a
        // random phase in [0, T*): u = 0.5 gives half of it.
        dac.on_attempt(&outcome(true, 100, 1), 0.5);
        assert_eq!(dac.gap(), Duration::from_millis(200));
        dac.on_attempt(&outcome(true, 100, 1), 0.5);
        assert_eq!(dac.gap(), Duration::from_millis(400));
        assert_eq!(dac.tau_estimate(), Some(Duration::from_millis(100)));
        assert_eq!(
            dac.decide(Duration::from_millis(150), 3),
            Decision::WaitFor(Duration::from_millis(250))
        );
        assert_eq!(
            dac.decide(Duration::from_millis(400), 3),
            Decision::CommitNow
        );
        assert_eq!(
            dac.decide(Duration::from_secs(9), 0),
            Decision::NeedMoreData
        );
    }

    #[test]
    fn dac_gap_widens_as_tau_estimate_rises() {
        let params = DacParams {
            rho: 0.0,
            ..Default::default()
        };
        let mut dac = Dac::new(params);
        dac.on_attempt(&outcome(false, 1, 4), 0.0); // the random first phase
        let mut last = Duration::ZERO;
        let mut last_tau = Duration::ZERO;
        for tau_ms in [10, 20, 40, 80, 160] {
            dac.on_attempt(&outcome(false, tau_ms, 4), 0.0);
            let tau = dac.tau_estimate().unwrap();
            assert!(
                tau > last_tau,
                "EMA should rise: {tau:?} after {last_tau:?}"
            );
            assert!(
                dac.gap() > last,
                "gap {:?} should exceed {last:?}",
                dac.gap()
            );
            (last, last_tau) = (dac.gap(), tau);
        }
    }

    #[test]
    fn dac_gap_widens_as_producers_rise() {
        let params = DacParams {
            rho: 0.0,
            ..Default::default()
        };
        let mut dac = Dac::new(params);
        // With tau fixed at 10 ms the conflict bound dominates from N = 2 on
        // (T_conf = 10 ms * (1/0.0513 - 1) = 185 ms > T_cost = 40 ms) and grows with N.
        dac.on_attempt(&outcome(true, 10, 1), 0.0); // the random first phase
        let mut last = Duration::ZERO;
        for n in [1, 2, 4, 8, 16, 32] {
            dac.on_attempt(&outcome(true, 10, n), 0.0);
            assert!(dac.gap() > last, "N = {n}: gap {:?} <= {last:?}", dac.gap());
            last = dac.gap();
        }
        assert_eq!(dac.producers(), 32);
    }

    #[test]
    fn dac_waits_past_the_default_cap_only_when_it_is_lifted() {
        // N = 32, tau = 2 s: equation 7 asks for 2 s * (31 / 0.0513 - 1) = 1,207 s.
        let want = 2.0 * (31.0 / -(0.95f64.ln()) - 1.0);
        for (cap, gap) in [(None, 60.0), (Some(1e4), want), (Some(600.0), 600.0)] {
            let params = DacParams {
                rho: 0.0,
                max_gap_secs: cap.unwrap_or(MAX_GAP_SECS),
                ..Default::default()
            };
            let mut dac = Dac::new(params);
            dac.on_attempt(&outcome(true, 2_000, 32), 0.0); // the random first phase
            dac.on_attempt(&outcome(true, 2_000, 32), 0.0);
            let got = dac.gap().as_secs_f64();
            assert!(
                (got - gap).abs() < 1e-6,
                "cap {cap:?}: gap {got} s, want {gap} s"
            );
            assert_eq!(dac.gap(), dac.optimal_gap());
        }
    }

    #[test]
    fn dac_jitter_stretches_within_rho() {
        let mut dac = Dac::default();
        dac.on_attempt(&outcome(true, 100, 1), 0.3); // the first phase
        dac.on_attempt(&outcome(true, 100, 1), 0.0);
        let base = dac.gap();
        assert_eq!(base, dac.optimal_gap());
        dac.on_attempt(&outcome(true, 100, 1), 0.999);
        assert!(
            dac.gap() > base && dac.gap() <= base.mul_f64(1.1),
            "{:?}",
            dac.gap()
        );
    }

    #[test]
    fn dac_first_gap_is_a_uniform_phase_of_the_optimum() {
        for u in [0.0, 0.25, 0.999] {
            let mut dac = Dac::default();
            dac.on_attempt(&outcome(true, 50, 32), u);
            let t_star = dac.optimal_gap();
            assert!(t_star > Duration::from_secs(20), "{t_star:?}");
            let want = t_star.mul_f64(u);
            let got = dac.gap();
            assert!(
                got.abs_diff(want) <= Duration::from_micros(1),
                "u = {u}: first gap {got:?}, want {want:?}"
            );
            // From the second attempt on: T* (1 + rho u).
            dac.on_attempt(&outcome(true, 50, 32), 0.0);
            assert_eq!(dac.gap(), dac.optimal_gap());
        }
    }

    #[test]
    fn dac_survives_hostile_inputs() {
        let mut dac = Dac::new(DacParams {
            epsilon: f64::NAN,
            delta: -1.0,
            alpha: f64::INFINITY,
            rho: f64::NAN,
            max_gap_secs: f64::NAN,
        });
        dac.on_attempt(&outcome(false, u64::MAX, usize::MAX), f64::NAN);
        assert_eq!(dac.gap(), Duration::ZERO, "a NaN first phase is zero");
        dac.on_attempt(&outcome(false, u64::MAX, usize::MAX), f64::NAN);
        assert_eq!(dac.gap(), crate::MAX_GAP);
        dac.on_attempt(&outcome(true, 0, 0), -5.0);
        assert_eq!(dac.gap(), Duration::ZERO);
    }
}
