//! Per-handle request and byte counters (cheap relaxed atomics).

use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one [`StreamStore`](crate::StreamStore) handle and its clones.
///
/// Every request that reaches the backend is counted once per attempt, so
/// retries show up as extra requests. Bytes are payload bytes (not headers).
#[derive(Debug, Default)]
pub struct Counters {
    gets: AtomicU64,
    range_gets: AtomicU64,
    heads: AtomicU64,
    puts: AtomicU64,
    creates: AtomicU64,
    multipart_parts: AtomicU64,
    lists: AtomicU64,
    deletes: AtomicU64,
    conflicts: AtomicU64,
    retries: AtomicU64,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

/// A point-in-time copy of [`Counters`]; subtract two to get a delta.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct CounterSnapshot {
    /// Whole-object GETs.
    pub gets: u64,
    /// Ranged GET requests (one per range request sent).
    pub range_gets: u64,
    /// HEAD requests.
    pub heads: u64,
    /// Unconditional PUTs (including multipart completions).
    pub puts: u64,
    /// Conditional creates (If-None-Match).
    pub creates: u64,
    /// Multipart parts uploaded.
    pub multipart_parts: u64,
    /// List requests (one per listing call).
    pub lists: u64,
    /// DELETE requests.
    pub deletes: u64,
    /// Conditional creates that found the key taken.
    pub conflicts: u64,
    /// Retried attempts after a transient error.
    pub retries: u64,
    /// Payload bytes received.
    pub bytes_read: u64,
    /// Payload bytes sent.
    pub bytes_written: u64,
}

impl CounterSnapshot {
    /// All read requests (GET, ranged GET, HEAD).
    pub fn read_requests(&self) -> u64 {
        self.gets + self.range_gets + self.heads
    }

    /// All write requests (PUT, create, parts, DELETE).
    pub fn write_requests(&self) -> u64 {
        self.puts + self.creates + self.multipart_parts + self.deletes
    }

    /// `self - earlier`, saturating at zero.
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        CounterSnapshot {
            gets: self.gets.saturating_sub(earlier.gets),
            range_gets: self.range_gets.saturating_sub(earlier.range_gets),
            heads: self.heads.saturating_sub(earlier.heads),
            puts: self.puts.saturating_sub(earlier.puts),
            creates: self.creates.saturating_sub(earlier.creates),
            multipart_parts: self.multipart_parts.saturating_sub(earlier.multipart_parts),
            lists: self.lists.saturating_sub(earlier.lists),
            deletes: self.deletes.saturating_sub(earlier.deletes),
            conflicts: self.conflicts.saturating_sub(earlier.conflicts),
            retries: self.retries.saturating_sub(earlier.retries),
            bytes_read: self.bytes_read.saturating_sub(earlier.bytes_read),
            bytes_written: self.bytes_written.saturating_sub(earlier.bytes_written),
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Op {
    Get,
    RangeGet,
    Head,
    Put,
    Create,
    Part,
    List,
    Delete,
}

impl Counters {
    pub(crate) fn request(&self, op: Op) {
        let c = match op {
            Op::Get => &self.gets,
            Op::RangeGet => &self.range_gets,
            Op::Head => &self.heads,
            Op::Put => &self.puts,
            Op::Create => &self.creates,
            Op::Part => &self.multipart_parts,
            Op::List => &self.lists,
            Op::Delete => &self.deletes,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn read(&self, n: u64) {
        self.bytes_read.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn written(&self, n: u64) {
        self.bytes_written.fetch_add(n, Ordering::Relaxed);
    }

    pub(crate) fn conflict(&self) {
        self.conflicts.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn retry(&self) {
        self.retries.fetch_add(1, Ordering::Relaxed);
    }

    /// Reads all counters.
    pub fn snapshot(&self) -> CounterSnapshot {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            gets: l(&self.gets),
            range_gets: l(&self.range_gets),
            heads: l(&self.heads),
            puts: l(&self.puts),
            creates: l(&self.creates),
            multipart_parts: l(&self.multipart_parts),
            lists: l(&self.lists),
            deletes: l(&self.deletes),
            conflicts: l(&self.conflicts),
            retries: l(&self.retries),
            bytes_read: l(&self.bytes_read),
            bytes_written: l(&self.bytes_written),
        }
    }
}
