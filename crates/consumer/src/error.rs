//! The one error type of this crate.

use batchweave_chain::ChainError;
use batchweave_manifest::{ManifestError, manifest_key};
use batchweave_store::{ErrorClass, StoreError};
use batchweave_tgb::TgbError;

/// Everything that can go wrong while configuring, polling, reading, checkpointing or
/// restoring a consumer.
///
/// Corrupt or hostile objects are reported as [`ConsumerError::Manifest`] or
/// [`ConsumerError::Data`]; the consumer never returns bytes that failed a check and never
/// panics on what it reads.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsumerError {
    /// The configuration (explicit or from the environment) does not describe a valid rank
    /// of a valid mesh; the message says what to fix.
    #[error("invalid consumer configuration: {message}")]
    Config {
        /// What is wrong and how to fix it.
        message: String,
    },
    /// A store request failed (after the store's own retries).
    #[error("store error: {0}")]
    Store(#[from] StoreError),
    /// A manifest version or the GC boundary could not be decoded or is inconsistent.
    #[error("bad metadata object {key}: {source}")]
    Manifest {
        /// The object key, relative to the stream prefix.
        key: String,
        /// Why it was rejected.
        #[source]
        source: ManifestError,
    },
    /// A manifest or TGB object breaks a rule the consumer checks (CRC mismatch, footer
    /// mismatch, a TGB with another grid than the stream, a manifest that goes backwards).
    #[error("corrupt or inconsistent data in {key}: {reason}")]
    Data {
        /// The object key, relative to the stream prefix.
        key: String,
        /// What was found, including the slice when one is involved.
        reason: String,
    },
    /// The step the cursor needs was trimmed from the stream by GC: the checkpoint being
    /// resumed is older than the stream's low-water mark.
    #[error(
        "data reclaimed: consumer step {step} needs TGB step {tgb_step}, but GC reclaimed \
         everything below TGB step {first_step} (manifest version {version}); restore from a \
         newer checkpoint"
    )]
    DataReclaimed {
        /// The consumer step that was asked for.
        step: u64,
        /// The first TGB step it needs.
        tgb_step: u64,
        /// The manifest version consulted.
        version: u64,
        /// The first TGB step still available: the larger of the version's
        /// `first_step` and the GC boundary's low-water step.
        first_step: u64,
    },
    /// Checkpoint state bytes are not a consumer state, or the state does not belong to
    /// this consumer group.
    #[error("invalid consumer state: {message}")]
    State {
        /// What is wrong.
        message: String,
    },
    /// The consumer's grid cannot be mapped onto the stream's TGB grid (CP degrees that do
    /// not divide each other, a DP change at a checkpoint that is not on a step boundary).
    #[error("cannot remap: {message}: {source}")]
    Remap {
        /// The context.
        message: String,
        /// The rule that failed.
        #[source]
        source: TgbError,
    },
    /// A background fetch task failed to run to completion (it panicked or was
    /// cancelled); a bug, not a data problem.
    #[error("internal error: {message}")]
    Internal {
        /// What happened.
        message: String,
    },
}

impl From<ChainError> for ConsumerError {
    fn from(e: ChainError) -> Self {
        match e {
            ChainError::Store(e) => Self::Store(e),
            ChainError::Corrupt { key, source } => Self::Manifest { key, source },
            ChainError::Diverged {
                version,
                held,
                source,
            } => Self::Data {
                key: manifest_key(version),
                reason: format!("it does not extend version {held}: {source}"),
            },
            other => Self::Data {
                key: String::new(),
                reason: other.to_string(),
            },
        }
    }
}

impl ConsumerError {
    /// The coarse class (an exhaustive match: a new variant must be classified).
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Config { .. } | Self::State { .. } | Self::Remap { .. } => ErrorClass::Invalid,
            Self::Store(e) => e.class(),
            Self::Manifest { .. } | Self::Data { .. } | Self::DataReclaimed { .. } => {
                ErrorClass::Data
            }
            Self::Internal { .. } => ErrorClass::Internal,
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> Self {
        Self::Config {
            message: message.into(),
        }
    }

    pub(crate) fn data(key: &str, reason: impl Into<String>) -> Self {
        Self::Data {
            key: key.to_owned(),
            reason: reason.into(),
        }
    }

    pub(crate) fn state(message: impl Into<String>) -> Self {
        Self::State {
            message: message.into(),
        }
    }

    pub(crate) fn remap(message: impl Into<String>, source: TgbError) -> Self {
        Self::Remap {
            message: message.into(),
            source,
        }
    }

    /// True when retrying the same call later may succeed (the store was unavailable).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Store(e) if e.is_retryable())
    }
}
