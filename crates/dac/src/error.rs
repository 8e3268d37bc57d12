//! The crate's error type.

/// Everything that can go wrong in this crate: a bad tuning parameter or a policy string that
/// does not parse. The math itself never fails; it sanitises its inputs instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DacError {
    /// A [`DacParams`](crate::DacParams) field is outside its valid range (or is NaN/infinite).
    #[error("invalid DAC parameter `{name}` = {value}: must be in {range}")]
    InvalidParam {
        /// Field name: `epsilon`, `delta`, `alpha` or `rho`.
        name: &'static str,
        /// The rejected value.
        value: f64,
        /// The valid range, in interval notation, e.g. `(0, 1)`.
        range: &'static str,
    },
    /// A commit-policy string is not one of the accepted forms.
    #[error(
        "unknown commit policy `{input}`: expected one of `coop`, `dac`, `naive`, `fixed:K` (K >= 1), `incr`, `aimd`"
    )]
    UnknownPolicy {
        /// The string as given.
        input: String,
    },
    /// A `fixed:K` policy string whose `K` is not an integer >= 1.
    #[error("invalid commit policy `{input}`: in `fixed:K`, K must be an integer >= 1")]
    BadFixedCount {
        /// The string as given.
        input: String,
    },
}
