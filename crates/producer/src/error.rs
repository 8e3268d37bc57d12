//! The producer's error type.

use std::sync::Arc;

use batchweave_chain::ChainError;
use batchweave_manifest::{ManifestError, RebaseError};
use batchweave_store::{ErrorClass, StoreError};
use batchweave_tgb::TgbError;

use crate::settings::FailPoint;

/// Why a producer operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProducerError {
    /// The object store failed (after retries for idempotent requests).
    #[error("store error: {0}")]
    Store(#[from] StoreError),
    /// A manifest or GC boundary read from the store is corrupt or hostile.
    #[error("corrupt metadata in the store: {0}")]
    Manifest(#[from] ManifestError),
    /// Reading the chain failed: the store, or a version that is corrupt, breaks a
    /// rule of the format or does not extend the version held.
    #[error("{0}")]
    Chain(#[from] ChainError),
    /// The TGB could not be encoded (bad grid, wrong slice count).
    #[error("invalid TGB: {0}")]
    Tgb(#[from] TgbError),
    /// Another incarnation of this producer id owns the stream entry: this
    /// process is a zombie and has stopped. Nothing more will be committed
    /// by it; restart it to resume from the committed source offset.
    #[error(
        "producer {producer_id} is fenced: this incarnation has (epoch, incarnation) {ours:?}, \
         the stream holds {theirs:?}; a newer process with the same id took over"
    )]
    Fenced {
        /// The producer id.
        producer_id: String,
        /// This process's `(epoch, incarnation)`.
        ours: (u64, u64),
        /// What the manifest records.
        theirs: (u64, u64),
    },
    /// Another process opened the same producer id at the same moment and its epoch
    /// claim landed first: this one stops at open. Run one process per producer id
    /// (restart this one once the other has stopped, or give it another id).
    #[error(
        "producer id {producer_id} was opened by another process at the same time (it claimed \
         epoch {epoch} first); this process stops: run one process per producer id"
    )]
    OpenRace {
        /// The producer id.
        producer_id: String,
        /// The epoch the other process claimed.
        epoch: u64,
    },
    /// The merge refused the candidate (a protocol invariant would break).
    #[error("rebase refused: {0}")]
    Rebase(RebaseError),
    /// A fail point fired (tests): the producer behaves as if the process died here.
    #[error("simulated crash at fail point {0:?}")]
    Crashed(FailPoint),
    /// The producer stopped earlier because of this error; it accepts nothing more.
    #[error("producer stopped: {0}")]
    Stopped(Arc<ProducerError>),
    /// A TGB waited longer than `max_commit_age` between upload and commit;
    /// it may have been swept as an orphan, so it is not committed.
    #[error(
        "TGB {key} was uploaded {age:?} ago, more than max_commit_age; not committing it (GC may have swept it)"
    )]
    Expired {
        /// The TGB object key.
        key: String,
        /// How long ago it was uploaded.
        age: std::time::Duration,
    },
    /// Invalid settings or arguments; the message says what to fix.
    #[error("invalid producer configuration: {0}")]
    Invalid(String),
}

impl ProducerError {
    /// The coarse class (an exhaustive match: a new variant must be classified).
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Store(e) => e.class(),
            Self::Chain(e) => e.class(),
            Self::Manifest(_) | Self::Expired { .. } => ErrorClass::Data,
            Self::Tgb(_) | Self::Invalid(_) => ErrorClass::Invalid,
            Self::Fenced { .. } | Self::OpenRace { .. } => ErrorClass::Fenced,
            Self::Rebase(_) | Self::Crashed(_) => ErrorClass::Internal,
            Self::Stopped(inner) => inner.class(),
        }
    }

    /// True if this error (or the error that stopped the producer) is [`ProducerError::Fenced`].
    pub fn is_fenced(&self) -> bool {
        match self {
            Self::Fenced { .. } => true,
            Self::Stopped(inner) => inner.is_fenced(),
            _ => false,
        }
    }

    pub(crate) fn from_rebase(e: RebaseError) -> Self {
        match e {
            RebaseError::Fenced {
                producer_id,
                ours,
                theirs,
            } => Self::Fenced {
                producer_id,
                ours,
                theirs,
            },
            other => Self::Rebase(other),
        }
    }
}
