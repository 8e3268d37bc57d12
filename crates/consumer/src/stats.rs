//! Read statistics: bytes fetched vs delivered, stalls, fetch latency percentiles.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use batchweave_store::CounterSnapshot;

/// Fetch latencies kept for the percentiles (the most recent ones).
pub const LATENCY_SAMPLES: usize = 4096;

/// Percentiles of the per-step fetch latency over the most recent [`LATENCY_SAMPLES`]
/// steps (time from the start of a step's reads until all its bytes were verified).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LatencySummary {
    /// Samples the percentiles are computed from.
    pub samples: u64,
    /// Median.
    pub p50: Duration,
    /// 95th percentile.
    pub p95: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest sample.
    pub max: Duration,
}

/// What a consumer has done since it was opened. See
/// [`Consumer::stats`](crate::Consumer::stats).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct ConsumerStats {
    /// Batches returned by `next()`.
    pub steps: u64,
    /// Bytes read from the store (the store counters' delta since open: manifests, GC
    /// boundary, footers, slices, prefetched steps not yet delivered).
    pub bytes_fetched: u64,
    /// Of those, bytes of manifest versions and the GC boundary.
    pub manifest_bytes: u64,
    /// Of those, bytes of TGB footers.
    pub footer_bytes: u64,
    /// Of those, bytes of slice runs (or whole objects in dense mode).
    pub slice_bytes: u64,
    /// Bytes handed to the caller in batches.
    pub bytes_delivered: u64,
    /// `next()` calls that had to wait for a new manifest version.
    pub stalls: u64,
    /// Total time those calls waited.
    pub stall_time: Duration,
    /// Manifest versions read.
    pub manifests_read: u64,
    /// GC boundary reads: one after every poll that found a new version (so that a
    /// version below the boundary is never adopted), each one listing of the short
    /// boundary log (counted in `store.lists`) and, when its newest entry is not the
    /// one read last, one GET.
    pub boundary_reads: u64,
    /// Footers fetched from the store.
    pub footers_read: u64,
    /// Footer lookups served from the cache.
    pub footer_cache_hits: u64,
    /// Footers in the cache now (bounded: TGBs below the cursor are evicted).
    pub footers_cached: u64,
    /// Per-step fetch latency.
    pub fetch_latency: LatencySummary,
    /// The store's request and byte counters since open.
    pub store: CounterSnapshot,
}

impl ConsumerStats {
    /// Data read amplification: `(footer_bytes + slice_bytes) / bytes_delivered`, i.e.
    /// TGB bytes fetched per byte delivered (manifests are control traffic and counted
    /// separately). 1.0 plus the footer share for range reads; about `D * C` for dense
    /// reads. 0 before anything was delivered.
    pub fn read_amplification(&self) -> f64 {
        if self.bytes_delivered == 0 {
            return 0.0;
        }
        (self.footer_bytes + self.slice_bytes) as f64 / self.bytes_delivered as f64
    }
}

/// Live counters shared by the consumer and its prefetch tasks.
#[derive(Debug, Default)]
pub(crate) struct Live {
    pub(crate) steps: AtomicU64,
    pub(crate) manifest_bytes: AtomicU64,
    pub(crate) footer_bytes: AtomicU64,
    pub(crate) slice_bytes: AtomicU64,
    pub(crate) bytes_delivered: AtomicU64,
    pub(crate) stalls: AtomicU64,
    pub(crate) stall_nanos: AtomicU64,
    pub(crate) manifests_read: AtomicU64,
    pub(crate) footers_read: AtomicU64,
    pub(crate) footer_cache_hits: AtomicU64,
    latencies: Mutex<VecDeque<Duration>>,
}

pub(crate) fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

impl Live {
    pub(crate) fn record_latency(&self, d: Duration) {
        if let Ok(mut q) = self.latencies.lock() {
            if q.len() >= LATENCY_SAMPLES {
                q.pop_front();
            }
            q.push_back(d);
        }
    }

    pub(crate) fn add_stall(&self, d: Duration) {
        add(&self.stalls, 1);
        add(
            &self.stall_nanos,
            u64::try_from(d.as_nanos()).unwrap_or(u64::MAX),
        );
    }

    pub(crate) fn snapshot(&self, store: CounterSnapshot) -> ConsumerStats {
        let samples: Vec<Duration> = self
            .latencies
            .lock()
            .map(|q| q.iter().copied().collect())
            .unwrap_or_default();
        ConsumerStats {
            steps: get(&self.steps),
            bytes_fetched: store.bytes_read,
            manifest_bytes: get(&self.manifest_bytes),
            footer_bytes: get(&self.footer_bytes),
            slice_bytes: get(&self.slice_bytes),
            bytes_delivered: get(&self.bytes_delivered),
            stalls: get(&self.stalls),
            stall_time: Duration::from_nanos(get(&self.stall_nanos)),
            manifests_read: get(&self.manifests_read),
            boundary_reads: 0,
            footers_read: get(&self.footers_read),
            footer_cache_hits: get(&self.footer_cache_hits),
            footers_cached: 0,
            fetch_latency: summarize(samples),
            store,
        }
    }
}

/// Nearest-rank percentiles of `samples`.
fn summarize(mut samples: Vec<Duration>) -> LatencySummary {
    samples.sort_unstable();
    let n = samples.len();
    let pick = |p: usize| -> Duration {
        if n == 0 {
            return Duration::ZERO;
        }
        // Nearest rank: ceil(p/100 * n), 1-based.
        let rank = (p * n).div_ceil(100).clamp(1, n);
        samples.get(rank - 1).copied().unwrap_or_default()
    };
    LatencySummary {
        samples: n as u64,
        p50: pick(50),
        p95: pick(95),
        p99: pick(99),
        max: samples.last().copied().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_use_nearest_rank() {
        let s = summarize((1..=100).map(Duration::from_millis).collect());
        assert_eq!(s.samples, 100);
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p95, Duration::from_millis(95));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.max, Duration::from_millis(100));
        assert_eq!(summarize(vec![]), LatencySummary::default());
        let one = summarize(vec![Duration::from_millis(7)]);
        assert_eq!(
            (one.p50, one.p99),
            (Duration::from_millis(7), Duration::from_millis(7))
        );
    }

    #[test]
    fn latency_reservoir_is_bounded() {
        let live = Live::default();
        for i in 0..(LATENCY_SAMPLES as u64 + 10) {
            live.record_latency(Duration::from_micros(i));
        }
        let s = live.snapshot(CounterSnapshot::default());
        assert_eq!(s.fetch_latency.samples, LATENCY_SAMPLES as u64);
        // The oldest ten samples were dropped.
        assert_eq!(
            s.fetch_latency.max,
            Duration::from_micros(LATENCY_SAMPLES as u64 + 9)
        );
    }

    #[test]
    fn amplification_counts_tgb_bytes_only() {
        let s = ConsumerStats {
            bytes_delivered: 100,
            footer_bytes: 10,
            slice_bytes: 100,
            manifest_bytes: 1000,
            ..Default::default()
        };
        assert!((s.read_amplification() - 1.1).abs() < 1e-9);
        assert_eq!(ConsumerStats::default().read_amplification(), 0.0);
    }
}
