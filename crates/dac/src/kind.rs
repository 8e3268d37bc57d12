//! Choosing a policy by name: the CLI strings `coop`, `dac`, `naive`, `fixed:K`, `incr`, `aimd`.

use std::fmt;
use std::str::FromStr;

use crate::{Aimd, CommitPolicy, Coop, CoopParams, Dac, DacError, DacParams, Fixed, Incr, Naive};

/// Which commit policy a producer runs, as chosen on the command line.
///
/// Parsing ignores surrounding whitespace and ASCII case. [`Display`](fmt::Display) prints the
/// canonical lowercase form, which parses back to an equal value, except that the DAC
/// parameters are not part of the string (`dac` always parses to the defaults).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PolicyKind {
    /// `dac`: Decentralized Adaptive Commit with these parameters.
    Dac(DacParams),
    /// `naive`: commit every TGB.
    Naive,
    /// `fixed:K`: commit every `K` TGBs (`K >= 1`).
    Fixed(usize),
    /// `incr`: count threshold starting at 10, +1 per conflict.
    Incr,
    /// `aimd`: additive-increase / multiplicative-decrease attempt rate.
    Aimd,
    /// `coop`: cooperative commits (each commit also publishes other producers' uploads)
    /// at about one attempt per round for the whole stream, with these parameters.
    Coop(CoopParams),
}

/// The default is `coop`: cooperative commits keep visibility latency about one round
/// whatever the producer count, where DAC's grows linearly with it (protocol.md §14;
/// operations.md says when to pick `dac` instead).
impl Default for PolicyKind {
    fn default() -> Self {
        Self::Coop(CoopParams::default())
    }
}

impl PolicyKind {
    /// Builds a fresh policy of this kind (`Fixed(0)` behaves as `Fixed(1)`).
    pub fn build(&self) -> Box<dyn CommitPolicy> {
        match *self {
            Self::Dac(params) => Box::new(Dac::new(params)),
            Self::Naive => Box::new(Naive),
            Self::Fixed(k) => Box::new(Fixed::new(k)),
            Self::Incr => Box::new(Incr::new()),
            Self::Aimd => Box::new(Aimd::default()),
            Self::Coop(params) => Box::new(Coop::new(params)),
        }
    }

    /// Checks the parameters: DAC's with [`DacParams::validate`], and `K >= 1` for `fixed:K`.
    pub fn validate(&self) -> Result<(), DacError> {
        match self {
            Self::Dac(params) => params.validate(),
            Self::Coop(params) => params.validate(),
            Self::Fixed(0) => Err(DacError::BadFixedCount {
                input: self.to_string(),
            }),
            Self::Naive | Self::Fixed(_) | Self::Incr | Self::Aimd => Ok(()),
        }
    }
}

impl FromStr for PolicyKind {
    type Err = DacError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "dac" => return Ok(Self::Dac(DacParams::default())),
            "naive" => return Ok(Self::Naive),
            "incr" => return Ok(Self::Incr),
            "aimd" => return Ok(Self::Aimd),
            "coop" => return Ok(Self::Coop(CoopParams::default())),
            _ => {}
        }
        let Some(count) = lower.strip_prefix("fixed:") else {
            return Err(DacError::UnknownPolicy {
                input: s.to_owned(),
            });
        };
        match count.trim().parse::<usize>() {
            Ok(k) if k >= 1 => Ok(Self::Fixed(k)),
            _ => Err(DacError::BadFixedCount {
                input: s.to_owned(),
            }),
        }
    }
}

impl fmt::Display for PolicyKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dac(_) => f.write_str("dac"),
            Self::Naive => f.write_str("naive"),
            Self::Fixed(k) => write!(f, "fixed:{k}"),
            Self::Incr => f.write_str("incr"),
            Self::Aimd => f.write_str("aimd"),
            Self::Coop(_) => f.write_str("coop"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_form_and_displays_it_back() {
        let cases = [
            ("dac", PolicyKind::Dac(DacParams::default())),
            ("naive", PolicyKind::Naive),
            ("fixed:10", PolicyKind::Fixed(10)),
            ("fixed:100", PolicyKind::Fixed(100)),
            ("incr", PolicyKind::Incr),
            ("aimd", PolicyKind::Aimd),
            ("coop", PolicyKind::Coop(CoopParams::default())),
        ];
        for (text, kind) in cases {
            assert_eq!(text.parse::<PolicyKind>(), Ok(kind));
            assert_eq!(kind.to_string(), text);
            assert_eq!(kind.build().name(), text);
            assert_eq!(kind.validate(), Ok(()));
        }
        assert_eq!(
            " DAC ".parse::<PolicyKind>(),
            Ok(PolicyKind::Dac(DacParams::default()))
        );
        assert_eq!(PolicyKind::default().to_string(), "coop");
        assert_eq!("Fixed: 7".parse::<PolicyKind>(), Ok(PolicyKind::Fixed(7)));
    }

    #[test]
    fn rejects_bad_strings_with_the_valid_forms() {
        for bad in ["", "dacx", "fixed", "fixed10", "random", "aimd:3"] {
            let err = bad.parse::<PolicyKind>().unwrap_err();
            assert!(
                matches!(err, DacError::UnknownPolicy { .. }),
                "{bad}: {err:?}"
            );
            let msg = err.to_string();
            for form in ["coop", "dac", "naive", "fixed:K", "incr", "aimd"] {
                assert!(msg.contains(form), "{msg}");
            }
        }
        for bad in [
            "fixed:",
            "fixed:0",
            "fixed:-3",
            "fixed:1.5",
            "fixed:99999999999999999999999",
        ] {
            let err = bad.parse::<PolicyKind>().unwrap_err();
            assert!(
                matches!(err, DacError::BadFixedCount { .. }),
                "{bad}: {err:?}"
            );
        }
    }

    #[test]
    fn build_uses_the_given_dac_params() {
        let params = DacParams {
            delta: 0.5,
            rho: 0.0,
            ..Default::default()
        };
        let mut policy = PolicyKind::Dac(params).build();
        let outcome = crate::AttemptOutcome {
            success: true,
            fragile_window: std::time::Duration::from_millis(100),
            producers: 1,
            slot: None,
        };
        policy.on_attempt(&outcome, 0.0); // the first gap is a random phase
        policy.on_attempt(&outcome, 0.0);
        // delta = 0.5: T_cost = tau, not the default 4 tau.
        let gap = policy.gap().as_secs_f64();
        assert!((gap - 0.1).abs() < 1e-6, "{gap}");
        assert!(
            PolicyKind::Dac(DacParams {
                epsilon: 2.0,
                ..params
            })
            .validate()
            .is_err()
        );
        assert!(PolicyKind::Fixed(0).validate().is_err());
    }
}
