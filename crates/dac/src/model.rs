//! The DAC model (paper section 5.2, equations 2, 3 and 7-10) as free functions on `f64` seconds.
//!
//! Every function accepts any input; the sanitising rules are in the crate docs.

use std::time::Duration;

use crate::DacParams;

/// Default cap on a gap, in seconds (60 s): what [`t_conf`], [`t_cost`] and [`jittered_gap`]
/// return at most, and the default of [`DacParams::max_gap_secs`].
///
/// The bound keeps a producer from stalling on a bad estimate: even a fragile window of
/// minutes yields at most one attempt a minute. It also bounds the model: once equation 7
/// asks for more (at `n = 32` and `epsilon = 0.05`, whenever `tau > 0.1 s`), producers attempt
/// more often than the conflict budget allows, and commit success falls below `1 - epsilon`.
/// A deployment that wants the model exactly (the paper's untrimmed manifest, whose `tau`
/// grows to seconds) raises [`DacParams::max_gap_secs`].
pub const MAX_GAP_SECS: f64 = 60.0;

/// [`MAX_GAP_SECS`] as a [`Duration`].
pub const MAX_GAP: Duration = Duration::from_secs(60);

/// Largest time, in seconds, accepted as an input (about 31 700 years); larger values and
/// `+inf` are clamped to it so that sums and products stay finite.
pub const MAX_TIME_SECS: f64 = 1e12;

/// Largest jitter magnitude `rho` used; larger values are clamped to it.
pub const MAX_RHO: f64 = 1.0;

/// Sanitises a time in seconds into `[0, MAX_TIME_SECS]` (NaN and negatives become `0`).
fn clean_time(x: f64) -> f64 {
    if x.is_nan() || x <= 0.0 {
        0.0
    } else {
        x.min(MAX_TIME_SECS)
    }
}

/// Sanitises a gap cap: NaN and values `<= 0` fall back to [`MAX_GAP_SECS`], values above
/// [`MAX_TIME_SECS`] (and `+inf`) count as that maximum.
pub(crate) fn clean_cap(cap: f64) -> f64 {
    if cap.is_nan() || cap <= 0.0 {
        MAX_GAP_SECS
    } else {
        cap.min(MAX_TIME_SECS)
    }
}

/// Clamps a computed gap into `[0, cap]` (`cap` already sanitised); a NaN (which the
/// callers never produce) is read as the conservative maximum.
fn cap_gap(x: f64, cap: f64) -> f64 {
    if x.is_nan() { cap } else { x.clamp(0.0, cap) }
}

/// `n - 1` as `f64`, `0` for `n <= 1`.
fn competitors(n: usize) -> f64 {
    n.saturating_sub(1) as f64
}

/// Equation 2: probability that at least one of the other `n - 1` producers enters our
/// fragile window of length `tau` when every producer waits `t` after each attempt:
/// `1 - exp(-(n - 1) tau / (t + tau))`.
///
/// Returns a value in `[0, 1]`; `0` when `n <= 1` or `tau` is `0` (after sanitising).
pub fn p_conflict(t: f64, n: usize, tau: f64) -> f64 {
    let (t, tau) = (clean_time(t), clean_time(tau));
    if n <= 1 || tau == 0.0 {
        return 0.0;
    }
    let x = competitors(n) * tau / (t + tau);
    // 1 - e^(-x), accurate for small x.
    (-(-x).exp_m1()).clamp(0.0, 1.0)
}

/// Equation 3: commit-duty factor, the fraction of an attempt cycle spent on manifest I/O:
/// `tau / (t + tau)`.
///
/// Returns a value in `[0, 1]`; `0` when `tau` is `0` (after sanitising).
pub fn duty(t: f64, tau: f64) -> f64 {
    let (t, tau) = (clean_time(t), clean_time(tau));
    if tau == 0.0 {
        return 0.0;
    }
    (tau / (t + tau)).clamp(0.0, 1.0)
}

/// Equation 7: smallest gap keeping [`p_conflict`] within the conflict budget `epsilon`:
/// `max(0, (n - 1) tau / -ln(1 - epsilon) - tau)`, capped at [`MAX_GAP_SECS`].
///
/// It is computed as `tau * ((n - 1) / -ln(1 - epsilon) - 1)` so that the rounded result is
/// monotone non-decreasing in both `n` and `tau`.
pub fn t_conf(n: usize, tau: f64, epsilon: f64) -> f64 {
    t_conf_within(n, tau, epsilon, MAX_GAP_SECS)
}

/// [`t_conf`] capped at `cap` (sanitised) instead of [`MAX_GAP_SECS`].
fn t_conf_within(n: usize, tau: f64, epsilon: f64, cap: f64) -> f64 {
    let tau = clean_time(tau);
    if n <= 1 || tau == 0.0 || epsilon >= 1.0 {
        return 0.0;
    }
    if epsilon.is_nan() || epsilon <= 0.0 {
        return cap;
    }
    // -ln(1 - epsilon) > 0 for epsilon in (0, 1); ln_1p keeps it accurate for small epsilon.
    let budget = -(-epsilon).ln_1p();
    let factor = competitors(n) / budget - 1.0;
    if factor.is_nan() || factor <= 0.0 {
        return 0.0;
    }
    cap_gap(tau * factor, cap)
}

/// Equation 8: smallest gap keeping [`duty`] within the duty budget `delta`:
/// `(1 - delta) tau / delta`, capped at [`MAX_GAP_SECS`].
pub fn t_cost(tau: f64, delta: f64) -> f64 {
    t_cost_within(tau, delta, MAX_GAP_SECS)
}

/// [`t_cost`] capped at `cap` (sanitised) instead of [`MAX_GAP_SECS`].
fn t_cost_within(tau: f64, delta: f64, cap: f64) -> f64 {
    let tau = clean_time(tau);
    if tau == 0.0 || delta >= 1.0 {
        return 0.0;
    }
    if delta.is_nan() || delta <= 0.0 {
        return cap;
    }
    cap_gap(tau * ((1.0 - delta) / delta), cap)
}

/// Equation 9: the smallest gap satisfying both budgets of `params`,
/// `T* = max(t_conf, t_cost)`, capped at `params.max_gap_secs` (sanitised: NaN or `<= 0`
/// reads as [`MAX_GAP_SECS`], anything above [`MAX_TIME_SECS`] as that maximum).
pub fn optimal_gap(n: usize, tau: f64, params: &DacParams) -> f64 {
    let cap = clean_cap(params.max_gap_secs);
    t_conf_within(n, tau, params.epsilon, cap).max(t_cost_within(tau, params.delta, cap))
}

/// Equation 10: the jittered gap `t_star * (1 + rho * u)` that desynchronises producers.
///
/// `u` is a uniform draw in `[0, 1)` supplied by the caller. The result lies in
/// `[t_star, t_star * (1 + rho)]` (after sanitising) and never exceeds [`MAX_GAP_SECS`].
pub fn jittered_gap(t_star: f64, rho: f64, u: f64) -> f64 {
    jittered_gap_within(t_star, rho, u, MAX_GAP_SECS)
}

/// [`jittered_gap`] capped at `cap` instead of [`MAX_GAP_SECS`] (sanitised as
/// [`DacParams::max_gap_secs`] is by [`optimal_gap`]); DAC draws its gaps with its own cap.
pub fn jittered_gap_within(t_star: f64, rho: f64, u: f64, cap: f64) -> f64 {
    let cap = clean_cap(cap);
    let t_star = cap_gap(clean_time(t_star), cap);
    let rho = if rho.is_nan() {
        0.0
    } else {
        rho.clamp(0.0, MAX_RHO)
    };
    let u = if u.is_nan() { 0.0 } else { u.clamp(0.0, 1.0) };
    cap_gap(t_star * (1.0 + rho * u), cap)
}

/// Converts seconds into a [`Duration`] without panicking: NaN and negatives give zero,
/// anything too large for a `Duration` (which [`MAX_TIME_SECS`] is not) gives [`MAX_GAP`].
pub(crate) fn secs_to_duration(secs: f64) -> Duration {
    if secs.is_nan() || secs <= 0.0 {
        return Duration::ZERO;
    }
    Duration::try_from_secs_f64(secs).unwrap_or(MAX_GAP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equations_match_hand_computed_values() {
        // n = 5, tau = 1 s, epsilon = 0.05: 4 / -ln(0.95) - 1 = 76.98..., capped at 60.
        assert_eq!(t_conf(5, 1.0, 0.05), MAX_GAP_SECS);
        // n = 2, tau = 0.1 s, epsilon = 0.5: 0.1 / ln 2 - 0.1.
        let expected = 0.1 / std::f64::consts::LN_2 - 0.1;
        assert!((t_conf(2, 0.1, 0.5) - expected).abs() < 1e-12);
        // delta = 0.2: T_cost = 4 tau.
        assert!((t_cost(0.25, 0.2) - 1.0).abs() < 1e-12);
        assert!((duty(3.0, 1.0) - 0.25).abs() < 1e-12);
        let p = p_conflict(1.0, 3, 1.0);
        assert!((p - (1.0 - (-1.0f64).exp())).abs() < 1e-12);
    }

    #[test]
    fn degenerate_inputs_follow_the_documented_rules() {
        assert_eq!(t_conf(0, 1.0, 0.05), 0.0);
        assert_eq!(t_conf(1, 1.0, 0.05), 0.0);
        assert_eq!(t_conf(10, 0.0, 0.05), 0.0);
        assert_eq!(t_conf(10, f64::NAN, 0.05), 0.0);
        assert_eq!(t_conf(10, 0.01, 1.0), 0.0);
        assert_eq!(t_conf(10, 0.01, 0.0), MAX_GAP_SECS);
        assert_eq!(t_conf(10, 0.01, f64::NAN), MAX_GAP_SECS);
        assert_eq!(t_conf(10, f64::INFINITY, 0.05), MAX_GAP_SECS);
        assert_eq!(t_cost(0.01, 1.5), 0.0);
        assert_eq!(t_cost(0.01, -1.0), MAX_GAP_SECS);
        assert_eq!(t_cost(-3.0, 0.2), 0.0);
        assert_eq!(p_conflict(f64::NAN, usize::MAX, f64::INFINITY), 1.0);
        assert_eq!(duty(f64::INFINITY, f64::INFINITY), 0.5);
        assert_eq!(jittered_gap(f64::INFINITY, 5.0, 0.9), MAX_GAP_SECS);
        assert_eq!(jittered_gap(2.0, f64::NAN, 0.9), 2.0);
        assert_eq!(jittered_gap(2.0, 0.5, f64::NAN), 2.0);
        assert!((jittered_gap(2.0, 0.5, 0.5) - 2.5).abs() < 1e-12);
    }

    #[test]
    fn duration_conversion_never_panics() {
        assert_eq!(secs_to_duration(f64::NAN), Duration::ZERO);
        assert_eq!(secs_to_duration(-1.0), Duration::ZERO);
        assert_eq!(secs_to_duration(f64::INFINITY), MAX_GAP);
        assert_eq!(secs_to_duration(1.5), Duration::from_millis(1500));
    }
}
