//! The facade's coarse error: a kind, a message and the source.

use std::fmt;

use batchweave_consumer::ConsumerError;
use batchweave_gc::GcError;
use batchweave_producer::ProducerError;
use batchweave_store::{ErrorClass, StoreError};

/// What kind of failure an [`Error`] is; decides what the caller should do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// A conditional write lost a race (normally resolved inside BatchWeave).
    Conflict,
    /// This producer was replaced by a newer incarnation; stop it.
    Fenced,
    /// The object store is unreachable or failing; retry later.
    Unavailable,
    /// Bad configuration or arguments; the message says what to fix.
    Invalid,
    /// Corrupt, hostile or reclaimed data in the store; investigate.
    Data,
    /// A bug; please report it.
    Internal,
}

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

    fn wrap<E: std::error::Error + Send + Sync + 'static>(class: ErrorClass, e: E) -> Self {
        Self {
            kind: kind_of(class),
            message: e.to_string(),
            source: Some(Box::new(e)),
        }
    }
}

/// Exhaustive on purpose: a new class must be mapped here.
fn kind_of(class: ErrorClass) -> ErrorKind {
    match class {
        ErrorClass::Conflict => ErrorKind::Conflict,
        ErrorClass::Fenced => ErrorKind::Fenced,
        ErrorClass::Unavailable => ErrorKind::Unavailable,
        ErrorClass::Invalid => ErrorKind::Invalid,
        ErrorClass::Data => ErrorKind::Data,
        ErrorClass::Internal => ErrorKind::Internal,
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
