//! The Python exception hierarchy, mapped from the facade's error kind.
//!
//! ```text
//! BatchWeaveError (.kind, .retryable)
//!  +-- ConflictError      kind "conflict",     retryable
//!  +-- FencedError        kind "fenced"
//!  +-- UnavailableError   kind "unavailable",  retryable
//!  +-- InvalidError       kind "invalid"
//!  +-- DataError          kind "data"
//!  |    +-- DataReclaimedError   (a checkpoint whose data GC has reclaimed)
//!  +-- InternalError      kind "internal"
//! ```

use batchweave::consumer::ConsumerError;
use batchweave::{Error, ErrorKind};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    batchweave,
    BatchWeaveError,
    PyException,
    "Base class of every BatchWeave error; `kind` and `retryable` say what to do."
);
create_exception!(
    batchweave,
    ConflictError,
    BatchWeaveError,
    "A conditional write lost a race."
);
create_exception!(
    batchweave,
    FencedError,
    BatchWeaveError,
    "A newer incarnation of this producer id took over."
);
create_exception!(
    batchweave,
    UnavailableError,
    BatchWeaveError,
    "The store is unreachable or failing; retrying later may succeed."
);
create_exception!(
    batchweave,
    InvalidError,
    BatchWeaveError,
    "Bad configuration or arguments: fix the input."
);
create_exception!(
    batchweave,
    DataError,
    BatchWeaveError,
    "Corrupt, hostile or missing data in the store."
);
create_exception!(
    batchweave,
    DataReclaimedError,
    DataError,
    "The checkpoint's data was already reclaimed by GC."
);
create_exception!(
    batchweave,
    InternalError,
    BatchWeaveError,
    "A bug or a state that should not happen."
);

/// Adds the classes to the module, each with its `kind` and `retryable` class attributes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes = [
        (
            "BatchWeaveError",
            py.get_type::<BatchWeaveError>(),
            "internal",
        ),
        ("ConflictError", py.get_type::<ConflictError>(), "conflict"),
        ("FencedError", py.get_type::<FencedError>(), "fenced"),
        (
            "UnavailableError",
            py.get_type::<UnavailableError>(),
            "unavailable",
        ),
        ("InvalidError", py.get_type::<InvalidError>(), "invalid"),
        ("DataError", py.get_type::<DataError>(), "data"),
        (
            "DataReclaimedError",
            py.get_type::<DataReclaimedError>(),
            "data",
        ),
        ("InternalError", py.get_type::<InternalError>(), "internal"),
    ];
    for (name, class, kind) in classes {
        class.setattr("kind", kind)?;
        class.setattr("retryable", matches!(kind, "conflict" | "unavailable"))?;
        m.add(name, class)?;
    }
    Ok(())
}

/// The Python exception for a facade error.
pub(crate) fn to_py(e: Error) -> PyErr {
    let reclaimed = std::error::Error::source(&e)
        .and_then(|s| s.downcast_ref::<ConsumerError>())
        .is_some_and(|c| matches!(c, ConsumerError::DataReclaimed { .. }));
    let msg = e.message().to_owned();
    if reclaimed {
        return DataReclaimedError::new_err(msg);
    }
    match e.kind() {
        ErrorKind::Conflict => ConflictError::new_err(msg),
        ErrorKind::Fenced => FencedError::new_err(msg),
        ErrorKind::Unavailable => UnavailableError::new_err(msg),
        ErrorKind::Invalid => InvalidError::new_err(msg),
        ErrorKind::Data => DataError::new_err(msg),
        ErrorKind::Internal => InternalError::new_err(msg),
    }
}

/// Converts any layer error (through the facade's `From`) into a Python exception.
pub(crate) fn py_err<E: Into<Error>>(e: E) -> PyErr {
    to_py(e.into())
}

/// An `InvalidError` with `msg`.
pub(crate) fn invalid(msg: impl Into<String>) -> PyErr {
    InvalidError::new_err(msg.into())
}

/// An `InternalError` with `msg`.
pub(crate) fn internal(msg: impl Into<String>) -> PyErr {
    InternalError::new_err(msg.into())
}
