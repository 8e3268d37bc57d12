//! The chain's error type.

use batchweave_manifest::ManifestError;
use batchweave_store::{ErrorClass, StoreError};

/// Why reading the chain or advancing the boundary failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ChainError {
    /// The object store failed (after retries for idempotent requests).
    #[error("store error: {0}")]
    Store(#[from] StoreError),
    /// An object read from the store is corrupt, hostile, or breaks a rule of
    /// the format (docs/format.md section 4): nothing from it is used.
    #[error("{key} is refused: {source}")]
    Corrupt {
        /// The object's key, relative to the stream prefix.
        key: String,
        /// What the decoder or validator objected to.
        #[source]
        source: ManifestError,
    },
    /// A newer version does not extend the version held (docs/format.md
    /// section 4, rule `extends`): a writer rewrote history. Nothing from the
    /// newer version is used.
    #[error("manifest version {version} does not extend version {held}: {source}")]
    Diverged {
        /// The version refused.
        version: u64,
        /// The version held, which it should have extended.
        held: u64,
        /// The rule it breaks and where.
        #[source]
        source: ManifestError,
    },
}

impl ChainError {
    /// The coarse class (an exhaustive match: a new variant must be classified).
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Store(e) => e.class(),
            Self::Corrupt { .. } | Self::Diverged { .. } => ErrorClass::Data,
        }
    }

    /// True when trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Store(e) if e.is_retryable())
    }

    pub(crate) fn corrupt(key: &str, source: ManifestError) -> Self {
        Self::Corrupt {
            key: key.to_owned(),
            source,
        }
    }
}
