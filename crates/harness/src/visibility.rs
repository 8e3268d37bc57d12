//! Visibility latency: how long after a TGB's `append` returned (the object is durable)
//! a manifest version first lists it.
//!
//! An [`Observer`] is a poller on the stream's manifest chain (a
//! [`Follower`], the reader the consumers use): every `poll`
//! it reads the next version (one GET when nothing is new), and for every step a newly
//! read version added (the steps between the previous `total_tgbs` and the new one) it
//! notes the first time it saw that step's TGB key. The producing side calls
//! [`Observer::record_upload`] (or a [`Recorder`]'s) with the instant its append
//! returned; [`Observer::finish`] joins the two into a [`VisibilityReport`].
//!
//! Resolution: a TGB is seen when the read of a version listing it returns, so a
//! sample is an upper bound, late by at most one poll interval plus one manifest read
//! (and by more when the observer falls behind: it then reads up to
//! [`MAX_STEPS_PER_POLL`] versions in a row and jumps to the newest). Steps that were
//! already trimmed from the version the observer read first are counted in
//! [`VisibilityReport::unobserved`] (their keys are unknown). Time is the store's
//! injected clock, so on the simulated store it is virtual.
//!
//! The observer reads through a handle of its own (the same backend, fresh counters), so
//! the request counters of the store passed to [`Observer::start`] do not include its
//! reads.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use std::time::Duration;
//! use batchweave::Stream;
//! use batchweave_harness::visibility::Observer;
//!
//! let stream = Stream::open("memory:///").await?;
//! let observer = Observer::start(stream.store(), Duration::from_millis(20)).await?;
//! let mut p = stream.producer("p0").open().await?;
//! let receipt = p.append(1, 1, vec![bytes::Bytes::from_static(b"x")], 1).await?;
//! observer.record_upload(receipt.key, observer.now());
//! p.close().await?; // everything appended is visible when close returns
//! let report = observer.finish().await?;
//! assert_eq!((report.uploads, report.samples, report.pending), (1, 1, 0));
//! # Ok::<(), anyhow::Error>(()) }).unwrap();
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use batchweave::StreamStore;
use batchweave::manifest::{DecodeLimits, Manifest};
use batchweave::store::Clock;
use batchweave_chain::{Chain, Follower};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Versions one poll reads one by one before it jumps to the newest (a listing): an
/// observer that fell behind catches up at once, at the price of seeing the skipped
/// versions' TGBs late, or not at all if the newest version no longer lists them.
pub const MAX_STEPS_PER_POLL: u32 = 8;

/// The upload times not yet matched and the visibility times not yet matched, shared by
/// the poller and the recorders.
#[derive(Debug, Default)]
struct Book {
    /// Key -> when its append returned, for keys not seen yet.
    uploads: HashMap<String, Instant>,
    /// Key -> when it was first seen, for keys seen before their upload was recorded.
    early: HashMap<String, Instant>,
    /// Matched pairs: seen - uploaded (zero if seen first).
    latencies: Vec<Duration>,
    /// Distinct keys recorded.
    recorded: u64,
    /// The latest upload instant recorded.
    last_upload: Option<Instant>,
    /// The latest visibility instant of a matched key.
    last_visible: Option<Instant>,
}

impl Book {
    fn matched(&mut self, uploaded: Instant, seen: Instant) {
        self.latencies
            .push(seen.saturating_duration_since(uploaded));
        self.last_visible = Some(self.last_visible.map_or(seen, |t| t.max(seen)));
    }

    fn upload(&mut self, key: String, at: Instant) {
        self.recorded += 1;
        self.last_upload = Some(self.last_upload.map_or(at, |t| t.max(at)));
        match self.early.remove(&key) {
            Some(seen) => self.matched(at, seen),
            None => {
                if self.uploads.insert(key, at).is_some() {
                    self.recorded -= 1; // the same key twice: keep one (the later) time
                }
            }
        }
    }

    fn seen(&mut self, key: &str, at: Instant) {
        match self.uploads.remove(key) {
            Some(up) => self.matched(up, at),
            None => {
                self.early.entry(key.to_owned()).or_insert(at);
            }
        }
    }
}

fn lock(book: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
    // A panic while holding the lock leaves a consistent book (every update is one
    // call): keep using it.
    book.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Records upload times for an [`Observer`] (cheap to clone; hand one to each producing
/// task).
#[derive(Debug, Clone)]
pub struct Recorder {
    book: Arc<Mutex<Book>>,
}

impl Recorder {
    /// The TGB `key` (the append receipt's key, relative to the stream prefix) was
    /// durable at `at` (when its append returned; take it from the store's clock).
    pub fn record_upload(&self, key: impl Into<String>, at: Instant) {
        lock(&self.book).upload(key.into(), at);
    }
}

/// What the poller counted (returned by its task).
#[derive(Debug, Default)]
struct PollerStats {
    polls: u64,
    versions: u64,
    errors: u64,
    unobserved: u64,
    steps_seen: u64,
    visible_bytes: u64,
}

/// The polling task's state.
struct Poller {
    follower: Follower,
    clock: Arc<dyn Clock>,
    book: Arc<Mutex<Book>>,
    /// `total_tgbs` of the version held when it was last noted.
    total: u64,
    stats: PollerStats,
}

impl Poller {
    /// Notes the steps the held version added since the last one noted.
    fn note(&mut self, m: &Manifest, at: Instant) {
        self.stats.versions += 1;
        let new_end = m.total_tgbs;
        if new_end <= self.total {
            return;
        }
        let trimmed_end = m.first_step.clamp(self.total, new_end);
        self.stats.unobserved += trimmed_end - self.total;
        let mut book = lock(&self.book);
        for step in trimmed_end..new_end {
            let Some(d) = usize::try_from(step - m.first_step)
                .ok()
                .and_then(|i| m.tgbs.get(i))
            else {
                self.stats.unobserved += 1;
                continue;
            };
            self.stats.steps_seen += 1;
            self.stats.visible_bytes += d.object_size;
            book.seen(&d.key, at);
        }
        self.total = new_end;
    }

    /// One poll: read the next versions while they exist (at most
    /// [`MAX_STEPS_PER_POLL`] one by one, then one jump to the newest).
    async fn poll_once(&mut self) {
        self.stats.polls += 1;
        for i in 0..=MAX_STEPS_PER_POLL {
            let r = if i < MAX_STEPS_PER_POLL {
                self.follower.poll().await
            } else {
                let from = self.follower.current().version.saturating_add(1);
                self.follower.jump_from(from).await
            };
            match r {
                Ok(true) => {
                    let m = self.follower.current().clone();
                    let now = self.clock.now();
                    self.note(&m, now);
                }
                Ok(false) => break,
                Err(e) => {
                    self.stats.errors += 1;
                    tracing::debug!("visibility observer: poll failed: {e}");
                    break;
                }
            }
        }
    }
}

/// A running visibility observer (see the [module docs](self)).
pub struct Observer {
    book: Arc<Mutex<Book>>,
    clock: Arc<dyn Clock>,
    poll: Duration,
    stop: Arc<Notify>,
    chain: Chain,
    store: StreamStore,
    task: JoinHandle<PollerStats>,
}

impl std::fmt::Debug for Observer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Observer")
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl Observer {
    /// Starts observing the stream in `store` every `poll` (on the store's clock): first
    /// positions at the newest version (TGBs committed before this call are not
    /// observed), then spawns the poller on the current tokio runtime. Reads go through
    /// a handle of its own (fresh counters).
    pub async fn start(store: &StreamStore, poll: Duration) -> anyhow::Result<Self> {
        let own = store.map_backend(|b| b);
        let clock = own.clock().clone();
        let chain = Chain::new(own.clone(), DecodeLimits::default());
        let mut follower = Follower::new(chain.clone());
        follower
            .refresh_boundary()
            .await
            .context("visibility observer: reading the boundary")?;
        follower
            .jump_from(1)
            .await
            .context("visibility observer: reading the newest version")?;
        let book = Arc::new(Mutex::new(Book::default()));
        let stop = Arc::new(Notify::new());
        let mut poller = Poller {
            total: follower.current().total_tgbs,
            follower,
            clock: clock.clone(),
            book: book.clone(),
            stats: PollerStats::default(),
        };
        let (stop2, poll2) = (stop.clone(), poll.max(Duration::from_millis(1)));
        let task = tokio::spawn(async move {
            let mut next = poller.clock.now() + poll2;
            loop {
                let wait = next.saturating_duration_since(poller.clock.now());
                tokio::select! {
                    () = stop2.notified() => break,
                    () = poller.clock.sleep(wait) => {}
                }
                poller.poll_once().await;
                // A fixed cadence; a poll longer than the interval skips the ticks it
                // overran (the next poll starts at once).
                next += poll2;
                let now = poller.clock.now();
                if next < now {
                    next = now;
                }
            }
            // Whatever became visible before `finish` was called.
            poller.poll_once().await;
            poller.stats
        });
        Ok(Self {
            book,
            clock,
            poll,
            stop,
            chain,
            store: own,
            task,
        })
    }

    /// A handle for the producing tasks.
    pub fn recorder(&self) -> Recorder {
        Recorder {
            book: self.book.clone(),
        }
    }

    /// Like [`Recorder::record_upload`].
    pub fn record_upload(&self, key: impl Into<String>, at: Instant) {
        lock(&self.book).upload(key.into(), at);
    }

    /// Now, on the observed store's clock (what upload instants must be taken from).
    pub fn now(&self) -> Instant {
        self.clock.now()
    }

    /// The poll interval.
    pub fn poll_interval(&self) -> Duration {
        self.poll
    }

    /// Stops the poller after one last poll (so that whatever was visible when this was
    /// called is seen) and reports. Uploads recorded but never seen are
    /// [`VisibilityReport::pending`].
    pub async fn finish(self) -> anyhow::Result<VisibilityReport> {
        self.stop.notify_one();
        let stats = self.task.await.context("visibility observer task")?;
        let mut book = lock(&self.book);
        let mut lat = std::mem::take(&mut book.latencies);
        lat.sort_unstable();
        let pick = |p: usize| -> Duration {
            let n = lat.len();
            if n == 0 {
                return Duration::ZERO;
            }
            // Nearest rank: ceil(p/100 * n), 1-based (as the consumers' fetch latency).
            let rank = (p * n).div_ceil(100).clamp(1, n);
            lat[rank - 1]
        };
        let chain = self.chain.stats();
        let req = self.store.stats();
        let report = VisibilityReport {
            poll: self.poll,
            uploads: book.recorded,
            samples: lat.len() as u64,
            p50: pick(50),
            p95: pick(95),
            max: lat.last().copied().unwrap_or_default(),
            mean: if lat.is_empty() {
                Duration::ZERO
            } else {
                lat.iter().sum::<Duration>() / u32::try_from(lat.len()).unwrap_or(u32::MAX)
            },
            pending: book.uploads.len() as u64,
            oldest_pending: book.uploads.values().min().copied(),
            unobserved: stats.unobserved,
            seen_unrecorded: book.early.len() as u64,
            steps_seen: stats.steps_seen,
            last_upload: book.last_upload,
            last_visible: book.last_visible,
            polls: stats.polls,
            versions_read: stats.versions,
            poll_errors: stats.errors,
            requests: req.read_requests() + req.write_requests() + req.lists,
            manifest_bytes: chain.manifest_bytes + chain.boundary_bytes,
            visible_bytes: stats.visible_bytes,
        };
        Ok(report)
    }
}

/// What an [`Observer`] measured. Counts add up: `uploads = samples + pending`, and
/// `steps_seen = samples + seen_unrecorded` (`unobserved` steps are on top: visible,
/// but trimmed before the observer read a version listing them; those of them that
/// were recorded are among `pending`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VisibilityReport {
    /// The poll interval (the resolution: a sample is late by at most this plus one
    /// manifest read).
    pub poll: Duration,
    /// Distinct TGB keys whose upload was recorded.
    pub uploads: u64,
    /// Recorded uploads that the observer saw listed (one latency sample each).
    pub samples: u64,
    /// Median visibility latency (nearest rank; zero without samples).
    pub p50: Duration,
    /// 95th percentile.
    pub p95: Duration,
    /// Largest sample.
    pub max: Duration,
    /// Mean of the samples.
    pub mean: Duration,
    /// Recorded uploads never seen listed by the end (not committed yet, or trimmed
    /// before the observer saw them).
    pub pending: u64,
    /// When the oldest pending upload's append returned (its age when the producers
    /// stopped is a lower bound on its latency).
    pub oldest_pending: Option<Instant>,
    /// Steps that became visible but were already trimmed from the first version the
    /// observer read that covered them (their keys, so their latency, are unknown).
    pub unobserved: u64,
    /// Keys seen listed whose upload nobody recorded.
    pub seen_unrecorded: u64,
    /// Retained steps the observer saw added.
    pub steps_seen: u64,
    /// The latest recorded upload instant.
    pub last_upload: Option<Instant>,
    /// When the last matched key was first seen.
    pub last_visible: Option<Instant>,
    /// Polls made.
    pub polls: u64,
    /// Newer versions adopted.
    pub versions_read: u64,
    /// Polls that ended in an error (counted, then retried at the next poll).
    pub poll_errors: u64,
    /// Store requests the observer made (its own handle).
    pub requests: u64,
    /// Manifest and boundary bytes the observer read.
    pub manifest_bytes: u64,
    /// Object bytes of the TGBs the observer saw become visible.
    pub visible_bytes: u64,
}

impl VisibilityReport {
    /// Time from the last recorded upload (the end of production) to the moment the
    /// last matched TGB was seen visible: `None` unless every recorded upload was seen.
    pub fn drain(&self) -> Option<Duration> {
        if self.pending > 0 || self.samples == 0 {
            return None;
        }
        Some(
            self.last_visible?
                .saturating_duration_since(self.last_upload?),
        )
    }

    /// Manifest bytes the observer read per byte it saw become visible (0 when none
    /// did).
    pub fn manifest_bytes_per_visible_byte(&self) -> f64 {
        if self.visible_bytes == 0 {
            0.0
        } else {
            self.manifest_bytes as f64 / self.visible_bytes as f64
        }
    }

    /// How long the oldest pending upload had been waiting at `at` (zero without one).
    pub fn oldest_pending_age(&self, at: Instant) -> Duration {
        self.oldest_pending
            .map(|t| at.saturating_duration_since(t))
            .unwrap_or_default()
    }

    /// Fraction of the recorded uploads that were seen (1 when none were recorded).
    pub fn visible_fraction(&self) -> f64 {
        if self.uploads == 0 {
            1.0
        } else {
            self.samples as f64 / self.uploads as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use batchweave::{ProducerSettings, Stream};
    use bytes::Bytes;

    /// Three producers append on an in-memory stream while the observer polls; every
    /// appended TGB gets exactly one sample and the counts add up.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_appended_tgb_gets_a_sample() {
        let stream = Stream::open("memory:///").await.unwrap();
        let observer = Observer::start(stream.store(), Duration::from_millis(5))
            .await
            .unwrap();
        let mut tasks = Vec::new();
        for i in 0..3u64 {
            let (stream, rec) = (stream.clone(), observer.recorder());
            let clock = stream.store().clock().clone();
            tasks.push(tokio::spawn(async move {
                let settings = ProducerSettings {
                    seed: Some(i),
                    ..Default::default()
                };
                let mut p = stream
                    .producer(format!("p{i}"))
                    .settings(settings)
                    .open()
                    .await
                    .unwrap();
                for seq in 1..=20u64 {
                    let r = p
                        .append(1, 1, vec![Bytes::from(vec![i as u8; 100])], seq)
                        .await
                        .unwrap();
                    rec.record_upload(r.key, clock.now());
                    if seq % 7 == 0 {
                        p.flush().await.unwrap();
                    }
                }
                p.close().await.unwrap()
            }));
        }
        let mut committed = 0;
        for t in tasks {
            committed += t.await.unwrap().tgbs_committed;
        }
        let r = observer.finish().await.unwrap();
        assert_eq!(committed, 60);
        assert_eq!(r.uploads, 60, "{r:?}");
        assert_eq!(r.samples, 60, "{r:?}");
        assert_eq!(r.pending, 0, "{r:?}");
        assert_eq!(r.unobserved, 0, "{r:?}");
        assert_eq!(r.seen_unrecorded, 0, "{r:?}");
        assert_eq!(r.steps_seen, r.samples + r.seen_unrecorded);
        assert_eq!(r.uploads, r.samples + r.pending);
        assert_eq!(r.poll_errors, 0, "{r:?}");
        assert!(r.p50 <= r.p95 && r.p95 <= r.max, "{r:?}");
        assert!(r.mean <= r.max, "{r:?}");
        assert!(r.drain().is_some(), "{r:?}");
        assert!(
            r.versions_read > 0 && r.polls > 0 && r.requests > 0,
            "{r:?}"
        );
        assert!(r.visible_bytes > 0 && r.manifest_bytes > 0, "{r:?}");
    }

    /// The observer's requests are counted on its own handle, not on the store's.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_observer_reads_on_counters_of_its_own() {
        let stream = Stream::open("memory:///").await.unwrap();
        let before = stream.store().stats();
        let observer = Observer::start(stream.store(), Duration::from_millis(2))
            .await
            .unwrap();
        stream
            .store()
            .clock()
            .sleep(Duration::from_millis(30))
            .await;
        let r = observer.finish().await.unwrap();
        assert!(r.requests > 0 && r.polls > 0, "{r:?}");
        assert_eq!(stream.store().stats(), before);
        assert_eq!((r.uploads, r.samples, r.pending), (0, 0, 0));
        assert_eq!(r.drain(), None);
        assert_eq!(r.visible_fraction(), 1.0);
    }

    #[test]
    fn the_book_matches_in_either_order() {
        let t0 = Instant::now();
        let mut b = Book::default();
        b.upload("a".into(), t0);
        b.seen("a", t0 + Duration::from_millis(30));
        b.seen("b", t0 + Duration::from_millis(10)); // seen before its upload was recorded
        b.upload("b".into(), t0 + Duration::from_millis(12));
        b.upload("c".into(), t0 + Duration::from_millis(40));
        b.seen("d", t0);
        assert_eq!(b.recorded, 3);
        assert_eq!(
            b.latencies,
            vec![Duration::from_millis(30), Duration::ZERO],
            "a seen-first key counts as zero"
        );
        assert_eq!(b.uploads.len(), 1, "c is pending");
        assert_eq!(b.early.len(), 1, "d was never recorded");
        assert_eq!(b.last_upload, Some(t0 + Duration::from_millis(40)));
        assert_eq!(b.last_visible, Some(t0 + Duration::from_millis(30)));
    }
}
