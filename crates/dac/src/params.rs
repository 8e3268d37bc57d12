//! DAC tuning parameters and the EMA of the fragile window (equation 6).

use crate::DacError;
use crate::model::{MAX_GAP_SECS, MAX_RHO, MAX_TIME_SECS};

/// Default conflict budget: the paper fixes `epsilon = 0.05` for its microbenchmarks.
pub const DEFAULT_EPSILON: f64 = 0.05;
/// Default duty budget (our choice): at most 20% of a cycle on manifest I/O, i.e. `T >= 4 tau`.
pub const DEFAULT_DELTA: f64 = 0.2;
/// Default EMA coefficient (our choice): the newest fragile window weighs 20%.
pub const DEFAULT_ALPHA: f64 = 0.2;
/// Default jitter magnitude (our choice): gaps are stretched by up to 10%.
pub const DEFAULT_RHO: f64 = 0.1;

/// The four knobs of DAC (paper Algorithm 1, line 1), and the cap on its gap.
///
/// Callers usually write `DacParams { epsilon: 0.02, ..Default::default() }` and then
/// [`validate`](Self::validate). The math functions accept any value (see the
/// [sanitising rules](crate#sanitising-rules)), but only validated parameters mean
/// what their names say.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DacParams {
    /// Conflict budget: the largest acceptable modelled conflict probability, in `(0, 1)`.
    pub epsilon: f64,
    /// Duty budget: the largest acceptable fraction of time spent on manifest I/O, in `(0, 1)`.
    pub delta: f64,
    /// EMA coefficient for the fragile-window estimate, in `(0, 1]` (`1` = no smoothing).
    pub alpha: f64,
    /// Jitter magnitude: gaps are drawn from `[T*, T* (1 + rho)]`, in `[0, 1]`.
    pub rho: f64,
    /// Longest gap between attempts, in seconds, in `(0, MAX_TIME_SECS]`; the default is
    /// [`MAX_GAP_SECS`] (60 s). Equations 7-10 hold exactly only while `T*` is below it:
    /// above, the producer attempts once per cap and its conflict probability exceeds
    /// `epsilon`. The cap bounds how long a wrong `tau` estimate can stall a producer;
    /// raise it where `tau` is legitimately seconds (a large untrimmed manifest) and the
    /// uploads wait that long anyway.
    pub max_gap_secs: f64,
}

impl Default for DacParams {
    fn default() -> Self {
        Self {
            epsilon: DEFAULT_EPSILON,
            delta: DEFAULT_DELTA,
            alpha: DEFAULT_ALPHA,
            rho: DEFAULT_RHO,
            max_gap_secs: MAX_GAP_SECS,
        }
    }
}

impl DacParams {
    /// Checks every field against its range, reporting the first bad one (in the order
    /// epsilon, delta, alpha, rho, max_gap_secs) with its value and valid range. NaN is
    /// always rejected.
    pub fn validate(&self) -> Result<(), DacError> {
        let open_unit = |x: f64| x > 0.0 && x < 1.0;
        let checks: [(&'static str, f64, &'static str, bool); 5] = [
            ("epsilon", self.epsilon, "(0, 1)", open_unit(self.epsilon)),
            ("delta", self.delta, "(0, 1)", open_unit(self.delta)),
            (
                "alpha",
                self.alpha,
                "(0, 1]",
                self.alpha > 0.0 && self.alpha <= 1.0,
            ),
            (
                "rho",
                self.rho,
                "[0, 1]",
                (0.0..=MAX_RHO).contains(&self.rho),
            ),
            (
                "max_gap_secs",
                self.max_gap_secs,
                "(0, 1e12]",
                self.max_gap_secs > 0.0 && self.max_gap_secs <= MAX_TIME_SECS,
            ),
        ];
        for (name, value, range, ok) in checks {
            if !ok {
                return Err(DacError::InvalidParam { name, value, range });
            }
        }
        Ok(())
    }
}

/// Exponential moving average of the observed fragile window (equation 6):
/// `tau_hat <- (1 - alpha) tau_hat + alpha tau_obs`.
///
/// **Initialisation.** Algorithm 1 starts from `tau_hat = 0`, which makes the first estimates
/// a fraction `alpha` of the truth (20% with the default `alpha`), so the first gaps are far
/// too short exactly when every producer starts at once. We instead let the **first
/// observation initialise** the average; later observations follow equation 6 exactly.
///
/// Observations are sanitised: NaN is ignored, negatives count as `0`, values above
/// [`MAX_TIME_SECS`] (and `+inf`) count as that maximum. `alpha` is clamped into `[0, 1]`, a
/// NaN `alpha` falling back to [`DEFAULT_ALPHA`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Ema {
    alpha: f64,
    value: Option<f64>,
}

impl Ema {
    /// An empty average with coefficient `alpha` (sanitised as described on [`Ema`]).
    pub fn new(alpha: f64) -> Self {
        let alpha = if alpha.is_nan() {
            DEFAULT_ALPHA
        } else {
            alpha.clamp(0.0, 1.0)
        };
        Self { alpha, value: None }
    }

    /// The coefficient actually in use.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Feeds one observation, in seconds, and returns the new estimate (if any).
    pub fn observe(&mut self, x: f64) -> Option<f64> {
        if x.is_nan() {
            return self.value;
        }
        let x = x.clamp(0.0, MAX_TIME_SECS);
        let next = match self.value {
            None => x,
            Some(old) => (1.0 - self.alpha) * old + self.alpha * x,
        };
        self.value = Some(next);
        self.value
    }

    /// The current estimate, `None` before the first observation.
    pub fn value(&self) -> Option<f64> {
        self.value
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_match_the_documented_values() {
        let p = DacParams::default();
        assert_eq!(p.epsilon, 0.05);
        assert_eq!(p.delta, 0.2);
        assert_eq!(p.alpha, 0.2);
        assert_eq!(p.rho, 0.1);
        assert_eq!(p.max_gap_secs, 60.0);
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn validate_names_the_bad_parameter_and_its_range() {
        let cases = [
            (
                DacParams {
                    epsilon: 0.0,
                    ..Default::default()
                },
                "epsilon",
                "(0, 1)",
            ),
            (
                DacParams {
                    epsilon: 1.0,
                    ..Default::default()
                },
                "epsilon",
                "(0, 1)",
            ),
            (
                DacParams {
                    delta: f64::NAN,
                    ..Default::default()
                },
                "delta",
                "(0, 1)",
            ),
            (
                DacParams {
                    alpha: 0.0,
                    ..Default::default()
                },
                "alpha",
                "(0, 1]",
            ),
            (
                DacParams {
                    rho: -0.1,
                    ..Default::default()
                },
                "rho",
                "[0, 1]",
            ),
            (
                DacParams {
                    rho: f64::INFINITY,
                    ..Default::default()
                },
                "rho",
                "[0, 1]",
            ),
            (
                DacParams {
                    max_gap_secs: 0.0,
                    ..Default::default()
                },
                "max_gap_secs",
                "(0, 1e12]",
            ),
            (
                DacParams {
                    max_gap_secs: f64::INFINITY,
                    ..Default::default()
                },
                "max_gap_secs",
                "(0, 1e12]",
            ),
        ];
        for (params, want_name, want_range) in cases {
            match params.validate() {
                Err(DacError::InvalidParam { name, range, .. }) => {
                    assert_eq!((name, range), (want_name, want_range));
                }
                other => panic!("{params:?}: expected InvalidParam, got {other:?}"),
            }
        }
        let msg = DacParams {
            delta: 2.0,
            ..Default::default()
        }
        .validate()
        .unwrap_err()
        .to_string();
        assert!(
            msg.contains("delta") && msg.contains("(0, 1)") && msg.contains('2'),
            "{msg}"
        );
        assert_eq!(
            DacParams {
                alpha: 1.0,
                rho: 0.0,
                ..Default::default()
            }
            .validate(),
            Ok(())
        );
    }

    #[test]
    fn ema_first_observation_initialises_then_follows_equation_6() {
        let mut ema = Ema::new(0.5);
        assert_eq!(ema.value(), None);
        assert_eq!(ema.observe(2.0), Some(2.0));
        assert_eq!(ema.observe(4.0), Some(3.0));
        assert_eq!(ema.observe(f64::NAN), Some(3.0));
        assert_eq!(ema.observe(-1.0), Some(1.5));
        assert_eq!(ema.observe(f64::INFINITY), Some(0.75 + 0.5 * MAX_TIME_SECS));
    }

    #[test]
    fn ema_alpha_is_sanitised() {
        assert_eq!(Ema::new(f64::NAN).alpha(), DEFAULT_ALPHA);
        assert_eq!(Ema::new(7.0).alpha(), 1.0);
        assert_eq!(Ema::new(-7.0).alpha(), 0.0);
    }
}
