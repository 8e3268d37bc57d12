//! [`Buffer`]: read-only, zero-copy views of the bytes the consumer read.
//!
//! The consumer hands out `bytes::Bytes` (reference-counted, immutable). A `Buffer` owns
//! one and exports its memory through the buffer protocol, so `memoryview(b)`,
//! `numpy.frombuffer(b)` and `torch.frombuffer(b)` see the bytes where they are: no copy.
//! Views keep the `Buffer` (and so the bytes) alive, independently of later batches.

// The buffer protocol is a C API: filling a `Py_buffer` is unsafe by nature. This is the
// only module of the crate (and of the workspace) that allows `unsafe`.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use bytes::Bytes;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A read-only byte buffer (supports the buffer protocol; not a copy).
#[pyclass(module = "batchweave", frozen)]
#[derive(Debug)]
pub(crate) struct Buffer {
    pub(crate) bytes: Bytes,
}

#[pymethods]
impl Buffer {
    /// Exports the bytes read-only: `PyBuffer_FillInfo` fills a one-dimensional view of
    /// unsigned bytes and refuses a writable request.
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if view.is_null() {
            return Err(PyBufferError::new_err("a NULL Py_buffer was passed"));
        }
        let bytes = &slf.get().bytes;
        let len = isize::try_from(bytes.len())
            .map_err(|_| PyBufferError::new_err("buffer larger than isize::MAX"))?;
        // SAFETY: `view` is non-null and points to a `Py_buffer` the caller (the
        // interpreter) owns for the duration of the call. The pointer we export is into
        // the `Bytes` owned by this frozen object, which is never mutated or replaced
        // (`frozen`: no `&mut` access exists); `PyBuffer_FillInfo` stores a new strong
        // reference to `slf` in `view.obj`, so the object, and with it the memory,
        // outlives every view. `readonly = 1` makes it refuse `PyBUF_WRITABLE`, so the
        // `*mut` cast never leads to a write. On failure it sets a Python exception and
        // returns -1, which we fetch.
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                bytes.as_ptr() as *mut c_void,
                len,
                1,
                flags,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(PyErr::fetch(slf.py()))
        }
    }

    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    /// A `bytes` copy of the contents.
    fn __bytes__<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.bytes)
    }

    fn __repr__(&self) -> String {
        format!("<batchweave.Buffer of {} bytes>", self.bytes.len())
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        if let Ok(b) = other.cast::<Buffer>() {
            return b.get().bytes == self.bytes;
        }
        if let Ok(b) = other.cast::<PyBytes>() {
            return b.as_bytes() == &self.bytes[..];
        }
        false
    }
}
