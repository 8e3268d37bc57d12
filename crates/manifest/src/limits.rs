//! [`DecodeLimits`]: the hard bounds every decoder applies to untrusted bytes, and the
//! one count check they share (used by the envelope's pre-checks and by validation).

use crate::error::ManifestError;

/// Hard bounds applied while decoding untrusted objects.
///
/// Lengths and counts are checked before the corresponding memory is
/// allocated, so a hostile object cannot make a decoder allocate more than
/// a small multiple of `max_bytes`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeLimits {
    /// Largest accepted payload, in bytes (default 256 MiB).
    pub max_bytes: u64,
    /// Largest accepted number of TGB descriptors in one manifest (default 10 million).
    pub max_tgbs: u64,
    /// Largest accepted number of producer entries (default 100 000).
    pub max_producers: u64,
    /// Largest accepted slice grid `dp * cp` of one TGB (default 65 536).
    pub max_grid: u64,
}

impl Default for DecodeLimits {
    fn default() -> Self {
        Self {
            max_bytes: 256 * 1024 * 1024,
            max_tgbs: 10_000_000,
            max_producers: 100_000,
            max_grid: 65_536,
        }
    }
}

pub(crate) fn check_count(what: &'static str, count: u64, max: u64) -> Result<(), ManifestError> {
    if count > max {
        return Err(ManifestError::LimitExceeded { what, count, max });
    }
    Ok(())
}
