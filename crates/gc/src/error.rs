//! The GC error type.

use batchweave_chain::ChainError;
use batchweave_manifest::ManifestError;
use batchweave_store::{ErrorClass, StoreError};

/// Why a reclamation step failed. Every step is idempotent: rerunning after
/// any error converges.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GcError {
    /// The object store failed (after retries).
    #[error("store error: {0}")]
    Store(#[from] StoreError),
    /// A manifest, boundary, watermark or layout object is corrupt.
    #[error("corrupt metadata in the store: {0}")]
    Manifest(#[from] ManifestError),
    /// Reading the chain or advancing the boundary failed.
    #[error("{0}")]
    Chain(#[from] ChainError),
    /// Invalid arguments (e.g. a bad group name); the message says what to fix.
    #[error("invalid GC request: {0}")]
    Invalid(String),
}

impl GcError {
    /// The coarse class (an exhaustive match: a new variant must be classified).
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Store(e) => e.class(),
            Self::Chain(e) => e.class(),
            Self::Manifest(_) => ErrorClass::Data,
            Self::Invalid(_) => ErrorClass::Invalid,
        }
    }
}
