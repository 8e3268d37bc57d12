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
use crate::{AttemptOutcome, CommitPolicy, DacError, DacParams, Decision, Ema, Slot};

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

    /// The round the schedule uses: `interval` doubled until it is at least
    /// [`round`](Self::round). Producers' estimates of `tau` differ a little; rounded up to a
    /// power of two of `interval`, they agree on the round's length (at the default
    /// `interval` of 1 s and a `tau` below 250 ms, exactly 1 s), so their rounds line up.
    pub fn scheduled_round(&self) -> Duration {
        let want = self.round();
        let mut r = self.params.interval.max(Duration::from_millis(1));
        while r < want && r < MAX_COOP_GAP {
            r = r.saturating_mul(2);
        }
        r.min(MAX_COOP_GAP)
    }
}

/// The wait from `slot.now_ms` to this producer's next turn: rounds of length `round`
/// on the wall-clock time line are dealt out in turn to the `producers` active producers
/// (round `r` to index `r mod producers`), the next one of ours at least half a round
/// away; `offset` (a fraction of a round, below 1/2) is added so that two producers
/// whose views disagree about the indices rarely attempt at the same instant.
fn slotted_gap(round: Duration, producers: usize, slot: Slot, offset: f64) -> Duration {
    let r_ms = u64::try_from(round.as_millis()).unwrap_or(u64::MAX).max(1);
    let n = u64::try_from(producers.max(1)).unwrap_or(u64::MAX);
    let index = u64::try_from(slot.index).unwrap_or(0) % n;
    let earliest = slot.now_ms.saturating_add(r_ms / 2);
    let first = earliest.div_ceil(r_ms);
    let ahead = (index + n - first % n) % n;
    let start = first.saturating_add(ahead).saturating_mul(r_ms);
    let offset_ms = (r_ms as f64 * offset.clamp(0.0, 0.5)) as u64;
    let gap_ms = start.saturating_add(offset_ms).saturating_sub(slot.now_ms);
    Duration::from_millis(gap_ms).min(MAX_COOP_GAP)
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
        let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
        let rho = if self.params.rho.is_finite() {
            self.params.rho.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let own = self.round().saturating_mul(n).min(MAX_COOP_GAP);
        // Never wait longer than DAC would (its T* below its 60 s cap is exact): with few
        // producers on a fast store, DAC's jittered gap, not a schedule.
        let tau = self.ema.value().unwrap_or(0.0);
        let t_star = optimal_gap(self.producers, tau, &DacParams::default());
        let dac_shorter = t_star < MAX_GAP_SECS && secs_to_duration(t_star) < own;
        self.gap = match outcome.slot {
            Some(slot) if !dac_shorter && slot.index < self.producers => {
                slotted_gap(self.scheduled_round(), self.producers, slot, rho * u / 2.0)
            }
            _ => {
                let own = if dac_shorter {
                    secs_to_duration(t_star)
                } else {
                    own
                };
                // As DAC: a uniform first phase spreads producers launched together over
                // the gap.
                let factor = if self.attempts == 0 { u } else { 1.0 + rho * u };
                own.mul_f64(factor).min(MAX_COOP_GAP)
            }
        };
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

    fn round(&self) -> Option<Duration> {
        Some(self.scheduled_round())
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
            slot: None,
        }
    }

    fn slotted(tau_ms: u64, producers: usize, index: usize, now_ms: u64) -> AttemptOutcome {
        AttemptOutcome {
            slot: Some(Slot { index, now_ms }),
            ..outcome(tau_ms, producers)
        }
    }

    fn no_jitter() -> Coop {
        Coop::new(CoopParams {
            rho: 0.0,
            ..Default::default()
        })
    }

    #[test]
    fn the_schedule_deals_each_round_to_one_producer() {
        // 1,024 producers that all read the same version: from any instant, their next turns
        // are 1,024 consecutive rounds of 1 s, one each, the first at least half a round away.
        for now_ms in [
            1_700_000_000_000u64,
            1_700_000_000_499,
            1_700_000_000_501,
            7,
        ] {
            let n = 1024;
            let mut turns: Vec<u64> = (0..n)
                .map(|i| {
                    let mut c = no_jitter();
                    c.on_attempt(&slotted(120, n, i, now_ms), 0.7);
                    let at = now_ms + c.gap().as_millis() as u64;
                    assert_eq!(at % 1000, 0, "turns start on a round");
                    assert_eq!(
                        (at / 1000) % n as u64,
                        i as u64,
                        "round r goes to index r mod n"
                    );
                    assert!(c.gap() >= Duration::from_millis(500), "{:?}", c.gap());
                    at
                })
                .collect();
            turns.sort_unstable();
            for w in turns.windows(2) {
                assert_eq!(w[1] - w[0], 1000, "one attempt a round, no round skipped");
            }
            assert!(turns[0] - now_ms <= 1500);
        }
    }

    #[test]
    fn the_jitter_stays_inside_the_first_half_of_the_round() {
        let mut c = Coop::default();
        for u in [0.0, 0.3, 0.999, 1.0, f64::NAN] {
            c.on_attempt(&slotted(120, 8, 3, 1_000_000), u);
            let at = 1_000_000 + c.gap().as_millis() as u64;
            assert_eq!((at / 1000) % 8, 3);
            assert!(at % 1000 < 500, "{at}");
        }
    }

    #[test]
    fn the_scheduled_round_is_a_power_of_two_of_the_interval() {
        let mut c = Coop::default();
        c.on_attempt(&outcome(120, 8), 0.0); // 4 tau = 480 ms
        assert_eq!(c.scheduled_round(), Duration::from_secs(1));
        let mut c = Coop::default();
        c.on_attempt(&outcome(300, 8), 0.0); // 4 tau = 1.2 s
        assert_eq!(c.round(), Duration::from_millis(1200));
        assert_eq!(c.scheduled_round(), Duration::from_secs(2));
        c.on_attempt(&slotted(300, 8, 5, 0), 0.0);
        let at = c.gap().as_millis() as u64;
        assert_eq!(at % 2000, 0);
        assert_eq!((at / 2000) % 8, 5);
    }

    #[test]
    fn a_slot_that_does_not_fit_the_count_or_a_faster_dac_falls_back_to_the_gap() {
        // An index outside the count (a stale view): the jittered own gap, N rounds.
        let mut c = no_jitter();
        c.on_attempt(&slotted(120, 8, 8, 0), 0.0);
        c.on_attempt(&slotted(120, 8, 8, 0), 0.0);
        assert_eq!(c.gap(), Duration::from_secs(8));
        // A single producer on a fast store: DAC's 4 tau, not a round's schedule.
        let mut c = no_jitter();
        c.on_attempt(&slotted(2, 1, 0, 123_456), 0.0);
        c.on_attempt(&slotted(2, 1, 0, 123_456), 0.0);
        assert_eq!(c.gap(), Duration::from_millis(8));
    }

    /// Runs `n` cooperative producers that all see the same active set for `rounds` rounds
    /// of 1 s (tau = 120 ms), each re-scheduling from the instant its attempt ends (its
    /// clock off the true time by `skew_ms(i)`), and returns how many attempts fell into
    /// each round after the first two (the opening).
    fn attempts_per_round(n: usize, rounds: u64, skew_ms: impl Fn(usize) -> i64) -> Vec<u32> {
        let tau_ms = 120u64;
        let start = 1_700_000_000_000u64;
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut u = move || {
            seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut policies: Vec<Coop> = (0..n).map(|_| Coop::default()).collect();
        // Opening: every producer's first attempt somewhere in the first second.
        let mut next: Vec<u64> = (0..n).map(|_| start + (u() * 1000.0) as u64).collect();
        let end = start + rounds * 1000;
        let mut hits = vec![0u32; rounds as usize];
        loop {
            let (i, &at) = next
                .iter()
                .enumerate()
                .min_by_key(|(_, t)| **t)
                .expect("n > 0");
            if at >= end {
                break;
            }
            hits[((at - start) / 1000) as usize] += 1;
            let done = at + tau_ms;
            let seen = done.saturating_add_signed(skew_ms(i));
            policies[i].on_attempt(&slotted(tau_ms, n, i, seen), u());
            next[i] = done + policies[i].gap().as_millis() as u64;
        }
        hits.split_off(2)
    }

    #[test]
    fn the_stream_attempts_once_a_round_in_steady_state() {
        for n in [2usize, 8, 128, 1024] {
            let hits = attempts_per_round(n, n as u64 * 3 + 64, |_| 0);
            assert!(!hits.is_empty());
            assert!(hits.iter().all(|&h| h == 1), "n={n}: {hits:?}");
        }
    }

    #[test]
    fn clock_skew_below_half_a_round_keeps_one_attempt_a_round() {
        // Clocks off by up to +-200 ms: each producer's turn moves by its skew, still
        // inside its own round (the jitter uses under half of it, the skew under the rest).
        let skew = |i: usize| (i as i64 * 37) % 401 - 200;
        for n in [8usize, 128] {
            let hits = attempts_per_round(n, n as u64 * 3 + 64, skew);
            let total: u32 = hits.iter().sum();
            let rounds = hits.len() as i64;
            assert!(
                (i64::from(total) - rounds).abs() <= 2,
                "n={n}: {total} in {rounds}"
            );
            assert!(hits.iter().all(|&h| h <= 2), "n={n}: {hits:?}");
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
