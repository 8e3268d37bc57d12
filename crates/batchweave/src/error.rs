//! The facade's coarse error: a kind, a message and the source.

use std::fmt;

use batchweave_consumer::ConsumerError;
use batchweave_gc::GcError;
use batchweave_producer::ProducerError;
use batchweave_store::StoreError;

/// What kind of failure an [`Error`] is; decides what the caller should do.
///
/// The same classification every layer crate gives its own errors
/// (`class()`, an exhaustive match in each crate), so nothing is lost or
/// guessed in between.
pub use batchweave_store::ErrorClass as ErrorKind;

/// The error of every BatchWeave operation at the facade.
#[derive(Debug)]
pub struct Error {
    kind: ErrorKind,
    message: String,
    source: Option<Box<dyn std::error::Error + Send + Sync + 'static>>,
}

impl Error {
    /// What kind of failure this is.
    pub fn kind(&self) -> ErrorKind {
        self.kind
    }

    /// The human-readable message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// True if retrying the same call later may succeed.
    pub fn retryable(&self) -> bool {
        matches!(self.kind, ErrorKind::Unavailable | ErrorKind::Conflict)
    }

    /// An `Invalid` error with `message`.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            kind: ErrorKind::Invalid,
            message: message.into(),
            source: None,
        }
    }

    fn wrap<E: std::error::Error + Send + Sync + 'static>(kind: ErrorKind, e: E) -> Self {
        Self {
            kind,
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}: {}", self.kind, self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<StoreError> for Error {
    fn from(e: StoreError) -> Self {
        Self::wrap(e.class(), e)
    }
}

impl From<ProducerError> for Error {
    fn from(e: ProducerError) -> Self {
        Self::wrap(e.class(), e)
    }
}

impl From<ConsumerError> for Error {
    fn from(e: ConsumerError) -> Self {
        Self::wrap(e.class(), e)
    }
}

impl From<GcError> for Error {
    fn from(e: GcError) -> Self {
        Self::wrap(e.class(), e)
    }
}
