//! The buffer protocol, both ways, without copies.
//!
//! - [`Buffer`]: read-only, zero-copy views of the bytes the consumer read. The consumer
//!   hands out `bytes::Bytes` (reference-counted, immutable). A `Buffer` owns one and
//!   exports its memory through the buffer protocol, so `memoryview(b)`,
//!   `numpy.frombuffer(b)` and `torch.frombuffer(b)` see the bytes where they are: no copy.
//!   Views keep the `Buffer` (and so the bytes) alive, independently of later batches.
//! - [`exported_bytes`]: the producer's slices. A C-contiguous buffer (bytearray, numpy
//!   array, memoryview, array.array) becomes a `Bytes` over the exporter's memory, the
//!   export held by the `Bytes` owner; see `Producer.append` for the rule that makes this
//!   sound for writable buffers.

// The buffer protocol is a C API: filling a `Py_buffer` and reading one are unsafe by
// nature. This is the only module of the crate (and of the workspace) that allows `unsafe`.
#![allow(unsafe_code)]

use std::ffi::{c_int, c_void};

use bytes::Bytes;
use pyo3::buffer::PyUntypedBuffer;
use pyo3::exceptions::PyBufferError;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A held buffer-protocol export of one slice, the owner of the `Bytes` that points into it.
///
/// Holding the export (a `Py_buffer` with a strong reference to the exporter) keeps the
/// memory allocated and in place: an exporter must not free or move the memory of a buffer
/// it has exported until the export is released (a `bytearray` or a numpy array with an
/// export refuses to resize, a `memoryview` refuses `release()`). The export is released
/// when the last `Bytes` clone is dropped: `PyUntypedBuffer`'s `Drop` attaches to the
/// interpreter first (cheap when the GIL is held, as it is where `Producer.append` drops
/// its last clone; from another thread it takes the GIL, and it leaks the export rather
/// than touching a finalized interpreter).
struct Exported {
    buf: PyUntypedBuffer,
}

impl AsRef<[u8]> for Exported {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: `exported_bytes` only builds an `Exported` for a C-contiguous export of
        // at least one byte, so `buf_ptr()` is non-null and `[buf_ptr, buf_ptr +
        // len_bytes)` is the buffer's memory, allocated and unmoved for as long as the
        // export is held (by `self`, so for the lifetime of the returned borrow; the buffer
        // protocol's contract, see `Exported`). `u8` has no alignment or validity
        // requirement. The contents must not change while a `&[u8]` is in use: `bytes` and
        // other read-only exporters never change them, and for writable ones this is the
        // documented contract of `Producer.append`, the only reader: do not mutate a
        // buffer while `append` runs on it. The Rust producer reads the slices (CRC,
        // upload) only inside `append`, and `append` drops its clones before returning
        // (one known exception: an HTTP request that `object_store` abandons on a client
        // timeout may leave a clone in the HTTP client's connection task for a moment;
        // the export is still held then, so the memory stays valid, but what that
        // abandoned request still sends is not guaranteed to be the old bytes).
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr().cast::<u8>(), self.buf.len_bytes()) }
    }
}

/// The bytes of a buffer-protocol object as a `Bytes` over its memory (no copy) when the
/// buffer is C-contiguous, `None` when it is not (the caller copies). An object without the
/// buffer protocol is an error.
pub(crate) fn exported_bytes(obj: &Bound<'_, PyAny>) -> PyResult<Option<Bytes>> {
    let buf = PyUntypedBuffer::get(obj)?;
    if !buf.is_c_contiguous() {
        return Ok(None);
    }
    if buf.len_bytes() == 0 || buf.buf_ptr().is_null() {
        // Nothing to point at (an empty buffer may have a dangling or null pointer).
        buf.release(obj.py());
        return Ok(Some(Bytes::new()));
    }
    Ok(Some(Bytes::from_owner(Exported { buf })))
}

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
