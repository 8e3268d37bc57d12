//! The store crate's error type: the one place where `object_store` errors are mapped.

use std::fmt;

/// Boxed source error.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error from a [`StreamStore`](crate::StreamStore) operation.
///
/// `object_store` errors are classified here and nowhere else: a taken key is
/// [`StoreError::Conflict`], a missing key [`StoreError::NotFound`], a transient
/// failure that outlived the retry budget [`StoreError::Unavailable`], and a
/// conditional create whose outcome is unknown [`StoreError::Ambiguous`].
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A conditional create found the key already taken (HTTP 412 / 409, or
    /// the local no-clobber link failed). The write had no effect.
    #[error("conflict: {path} already exists")]
    Conflict {
        /// The key, relative to the stream prefix.
        path: String,
    },
    /// The key does not exist.
    #[error("not found: {path}")]
    NotFound {
        /// The key, relative to the stream prefix.
        path: String,
    },
    /// A conditional create failed in a way that does not tell whether it took
    /// effect (timeout, connection reset, 5xx after the request was sent). The
    /// caller must resolve it by reading the key; it is never retried blindly.
    #[error(
        "ambiguous create of {path}: the outcome is unknown ({source}); read the key to resolve it"
    )]
    Ambiguous {
        /// The key, relative to the stream prefix.
        path: String,
        /// The transport error.
        #[source]
        source: BoxError,
    },
    /// A transient failure (timeout, 5xx, 503 SlowDown, connection error) that
    /// persisted through every retry.
    #[error("store unavailable: {op} {path} failed after {attempts} attempt(s): {source}")]
    Unavailable {
        /// The operation, e.g. `get`.
        op: &'static str,
        /// The key, relative to the stream prefix.
        path: String,
        /// How many attempts were made.
        attempts: u32,
        /// The last error.
        #[source]
        source: BoxError,
    },
    /// The store refused the request for a reason retrying cannot fix
    /// (permissions, authentication, unsupported operation, invalid path).
    #[error("store rejected {op} {path}: {source}")]
    Rejected {
        /// The operation, e.g. `put`.
        op: &'static str,
        /// The key, relative to the stream prefix.
        path: String,
        /// The underlying error.
        #[source]
        source: BoxError,
    },
    /// An object is larger than the caller allows to be read into memory.
    #[error("object {path} is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The key, relative to the stream prefix.
        path: String,
        /// The size the store reports.
        size: u64,
        /// The caller's limit.
        limit: u64,
    },
    /// The store URL or its options are wrong; the message says what to fix.
    #[error("invalid store configuration for {url}: {message}")]
    Config {
        /// The URL as given, with any credentials removed.
        url: String,
        /// What is wrong and how to fix it.
        message: String,
    },
    /// The store does not honour conditional create (If-None-Match), so
    /// BatchWeave cannot serialise commits on it.
    #[error(
        "store {url} ignores conditional create: a second create of {probe} succeeded. \
         BatchWeave needs If-None-Match semantics (S3, GCS, Azure, a local directory, moto, \
         SeaweedFS, Azurite); nanio and s3rver are known not to provide them"
    )]
    NonConformant {
        /// The store URL, without credentials.
        url: String,
        /// The probe key that was created twice.
        probe: String,
    },
}

/// The coarse class of an error, shared by every BatchWeave crate so the
/// facade can map each crate's errors without knowing their variants.
///
/// Deliberately exhaustive (not `#[non_exhaustive]`): the facade matches it
/// without a wildcard, so adding a class is a compile error there until mapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// A conditional write lost a race (normally handled inside the protocol).
    Conflict,
    /// This process was fenced by a newer incarnation of its producer id.
    Fenced,
    /// The store is unreachable or failing; retrying later may succeed.
    Unavailable,
    /// Bad configuration or arguments: fix the input.
    Invalid,
    /// Corrupt, hostile or missing data in the store.
    Data,
    /// A bug or a state that should not happen.
    Internal,
}

impl StoreError {
    /// The coarse class (an exhaustive match: a new variant must be classified).
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Conflict { .. } => ErrorClass::Conflict,
            Self::NotFound { .. } | Self::TooLarge { .. } => ErrorClass::Data,
            Self::Ambiguous { .. } | Self::Unavailable { .. } => ErrorClass::Unavailable,
            // Permissions, authentication, unsupported requests: retrying cannot help.
            Self::Rejected { .. } | Self::Config { .. } | Self::NonConformant { .. } => {
                ErrorClass::Invalid
            }
        }
    }

    /// True for [`StoreError::Conflict`].
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Conflict { .. })
    }

    /// True for [`StoreError::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// True for [`StoreError::Ambiguous`].
    pub fn is_ambiguous(&self) -> bool {
        matches!(self, Self::Ambiguous { .. })
    }

    /// True when trying again later may succeed (unavailable or ambiguous).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Self::Unavailable { .. } | Self::Ambiguous { .. })
    }
}

/// How an `object_store` error is treated by the retry layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    Conflict,
    NotFound,
    Transient,
    Permanent,
}

pub(crate) fn classify(err: &object_store::Error) -> Class {
    use object_store::Error as E;
    match err {
        E::AlreadyExists { .. } | E::Precondition { .. } => Class::Conflict,
        E::NotFound { .. } => Class::NotFound,
        // HTTP backends surface 5xx, 503 SlowDown, timeouts and connection
        // errors as `Generic` (4xx with meaning have their own variants).
        E::Generic { .. } | E::JoinError { .. } => Class::Transient,
        _ => Class::Permanent,
    }
}

/// Redacts user info and query strings from a URL for messages and `Debug`.
pub(crate) fn redact_url(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => "<unparseable url>".to_string(),
    }
}

/// A value that prints as `<redacted>` in `Debug` and `Display`.
pub(crate) struct Redacted;

impl fmt::Debug for Redacted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redact_removes_credentials_and_query() {
        let r = redact_url("s3://AKIAKEY:secretvalue@bucket/prefix?sig=abc");
        assert!(!r.contains("secretvalue"), "{r}");
        assert!(!r.contains("AKIAKEY"), "{r}");
        assert!(!r.contains("sig=abc"), "{r}");
        assert!(r.contains("bucket/prefix"), "{r}");
    }

    #[test]
    fn classification() {
        let e = object_store::Error::AlreadyExists {
            path: "a".into(),
            source: "x".into(),
        };
        assert_eq!(classify(&e), Class::Conflict);
        let e = object_store::Error::Generic {
            store: "S3",
            source: "503 SlowDown".into(),
        };
        assert_eq!(classify(&e), Class::Transient);
        let e = object_store::Error::NotFound {
            path: "a".into(),
            source: "x".into(),
        };
        assert_eq!(classify(&e), Class::NotFound);
    }
}
