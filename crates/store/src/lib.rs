//! Object-store access for BatchWeave: the only crate that talks to
//! [`object_store`].
//!
//! A [`StreamStore`] is one stream's view of a bucket or directory: a backend
//! opened from a URL, a key prefix, request/byte [`Counters`], a retry policy
//! for idempotent requests and an injected [`Clock`]. It offers exactly the
//! primitives the BatchWeave protocol is built on:
//!
//! | operation | guarantee |
//! |---|---|
//! | [`StreamStore::create`] | conditional create (If-None-Match): one winner; never retried; `Conflict` or `Ambiguous` otherwise |
//! | [`StreamStore::put`] / [`StreamStore::put_multipart`] | atomic (over)write, retried on transient errors |
//! | [`StreamStore::get`] / [`StreamStore::get_range`] / [`StreamStore::get_ranges`] | bounded reads; exact-length ranges |
//! | [`StreamStore::list`] / [`StreamStore::list_after`] | sorted listing under a prefix, optionally after a key |
//! | [`StreamStore::delete`] | idempotent |
//!
//! For tests and simulation it also provides wrappers: [`FaultStore`] (seeded
//! errors before and after a request takes effect, stale reads, latency) and
//! [`LatencyStore`] (a per-request latency and bandwidth model in tokio time),
//! and, behind the `test-util` feature, the `conformance` suite every backend
//! must pass.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use batchweave_store::{StreamStore, StoreError};
//! use bytes::Bytes;
//!
//! let store = StreamStore::open("memory:///").await?;
//! store.create("manifests/1", Bytes::from_static(b"v1")).await?;
//! let again = store.create("manifests/1", Bytes::from_static(b"other")).await;
//! assert!(again.unwrap_err().is_conflict());
//! assert_eq!(store.get("manifests/1", 1024).await?, "v1");
//! assert_eq!(store.stats().creates, 4); // two here, two by the open-time probe
//! # Ok::<(), StoreError>(()) }).unwrap();
//! ```

mod clock;
mod counters;
mod error;
mod fault;
mod latency;
mod open;
mod store;

#[cfg(any(test, feature = "test-util"))]
pub mod conformance;

pub use clock::{Clock, TokioClock};
pub use counters::{CounterSnapshot, Counters};
pub use error::{BoxError, ErrorClass, StoreError};
pub use fault::{FaultOp, FaultRule, FaultStats, FaultStore};
pub use latency::{LatencyModel, LatencyStore, Surcharge};
pub use object_store;
pub use open::OpenOptions;
pub use store::{ObjectInfo, RetryPolicy, StreamStore, StreamingUpload};

#[cfg(any(test, feature = "test-util"))]
pub mod testing;
