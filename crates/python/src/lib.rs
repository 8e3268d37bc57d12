//! Python bindings of BatchWeave: the native module `batchweave._native` of the Python
//! package `batchweave` (see `python/batchweave/` and `docs/python.md`).
//!
//! The binding only converts: every protocol decision is the facade crate's. Blocking
//! calls release the GIL; the tokio runtime is created lazily per process (and again in
//! a forked child, see `src/runtime.rs`).

mod buffer;
mod consumer;
mod convert;
mod errors;
mod producer;
mod runtime;
mod stream;

use pyo3::prelude::*;

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<stream::Stream>()?;
    m.add_class::<producer::Producer>()?;
    m.add_class::<buffer::Buffer>()?;
    m.add_class::<consumer::Consumer>()?;
    m.add_class::<consumer::Batch>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
