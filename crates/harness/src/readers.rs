//! Many consumer ranks following one stream's manifest chain: what they read from the
//! store to learn about new TGBs (issue #16, "consumers at scale").
//!
//! [`Readers::start`] spawns `w` tasks, each a consumer's own manifest tracker
//! ([`ManifestTracker`]: the `Tracker` and `wait_until` loop a `Consumer` runs, with
//! its polling cadence, boundary reads, extension checks and jumps) on a store handle
//! of its own. Each rank behaves as a consumer whose grid is the stream's and that takes
//! no time per step: as soon as the held version covers its next step it needs the one
//! after the held version's last TGB, so it waits for the next version at once (a rank
//! that keeps up with the stream; one that falls behind reads the versions it missed
//! the way a consumer does). The slice reads themselves are not made: what they would
//! cost is computed by the caller from the TGBs each rank saw become visible
//! ([`ReadersReport::tgbs_delivered`]).
//!
//! The ranks start positioned at the newest version (as if resumed from a checkpoint at
//! the head) and stop at [`Readers::finish`].

use std::time::Duration;

use anyhow::Context;
use batchweave::StreamStore;
use batchweave::consumer::{ConsumerSettings, ManifestTracker};
use batchweave::manifest::DecodeLimits;
use batchweave_chain::Chain;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What one rank did.
#[derive(Debug, Clone, Copy, Default)]
struct RankTotals {
    /// Newer versions adopted.
    versions: u64,
    /// TGBs (steps) the adopted versions added after the start version.
    tgbs: u64,
    /// Manifest bytes and boundary bytes read.
    manifest_bytes: u64,
    boundary_bytes: u64,
    /// Manifest objects read (GETs that returned one).
    manifests_read: u64,
    /// Boundary reads (one listing each, and a GET when the newest entry is new).
    boundary_reads: u64,
    /// GETs of boundary objects.
    boundary_object_gets: u64,
    /// Whole-object GETs (manifests, misses included, and boundary objects).
    gets: u64,
    /// Listings (manifest jumps and boundary reads).
    lists: u64,
    /// Every other request (none expected).
    other: u64,
    /// Failed waits (retried).
    errors: u64,
    /// `total_tgbs` held at the end.
    end_total: u64,
}

/// W ranks following a stream (see the [module docs](self)).
pub struct Readers {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<RankTotals>>,
    start_total: u64,
    started: Instant,
    store: StreamStore,
}

impl std::fmt::Debug for Readers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readers")
            .field("ranks", &self.tasks.len())
            .finish_non_exhaustive()
    }
}

impl Readers {
    /// Starts `w` ranks on `store` (each on a handle with counters of its own), all
    /// positioned at the newest version, polling as consumers with `settings` do.
    pub async fn start(
        store: &StreamStore,
        w: usize,
        settings: ConsumerSettings,
    ) -> anyhow::Result<Self> {
        let head = Chain::new(store.scoped(""), DecodeLimits::default())
            .newest()
            .await
            .context("readers: reading the newest version")?;
        let (stop, rx) = watch::channel(false);
        let clock = store.clock().clone();
        let mut tasks = Vec::with_capacity(w);
        for _ in 0..w {
            let own = store.scoped("");
            let settings = settings.clone();
            let mut rx = rx.clone();
            let version = head.version;
            let clock = clock.clone();
            tasks.push(tokio::spawn(async move {
                let mut t = ManifestTracker::new(own.clone(), &settings);
                let mut totals = RankTotals::default();
                let mut start_total = None;
                loop {
                    if *rx.borrow() {
                        break;
                    }
                    let r = match start_total {
                        None => t.start_at(version).await.map(|()| None),
                        Some(_) => {
                            let step = t.current().total_tgbs;
                            tokio::select! {
                                r = t.wait_for_step(step) => r,
                                _ = rx.changed() => break,
                            }
                        }
                    };
                    match r {
                        Ok(_) => {
                            let m = t.current();
                            match start_total {
                                None => start_total = Some(m.total_tgbs),
                                Some(_) => totals.versions += 1,
                            }
                        }
                        Err(e) => {
                            totals.errors += 1;
                            tracing::debug!("reader: {e}");
                            tokio::select! {
                                () = clock.sleep(settings.poll_max) => {}
                                _ = rx.changed() => break,
                            }
                        }
                    }
                }
                let c = t.chain_stats();
                let s = own.stats();
                totals.end_total = t.current().total_tgbs;
                totals.tgbs = totals.end_total.saturating_sub(start_total.unwrap_or(0));
                totals.manifest_bytes = c.manifest_bytes;
                totals.boundary_bytes = c.boundary_bytes;
                totals.manifests_read = c.manifests_read;
                totals.boundary_reads = c.boundary_reads;
                totals.boundary_object_gets = c.boundary_gets;
                totals.gets = s.gets;
                totals.lists = s.lists;
                totals.other = s.range_gets + s.heads + s.write_requests();
                totals
            }));
        }
        Ok(Self {
            stop,
            tasks,
            start_total: head.total_tgbs,
            started: clock.now(),
            store: store.scoped(""),
        })
    }

    /// Stops every rank and adds up what they read.
    pub async fn finish(self) -> anyhow::Result<ReadersReport> {
        let head = Chain::new(self.store.clone(), DecodeLimits::default())
            .newest()
            .await
            .context("readers: reading the newest version")?;
        let elapsed = self
            .store
            .clock()
            .now()
            .saturating_duration_since(self.started);
        let _ = self.stop.send(true);
        let w = self.tasks.len() as u64;
        let mut r = ReadersReport {
            w,
            elapsed,
            head_tgbs: head.total_tgbs.saturating_sub(self.start_total),
            ..ReadersReport::default()
        };
        for t in self.tasks {
            let t = t.await.context("reader task")?;
            r.versions_read += t.versions;
            r.tgbs_delivered += t.tgbs;
            r.manifest_bytes += t.manifest_bytes;
            r.boundary_bytes += t.boundary_bytes;
            r.manifests_read += t.manifests_read;
            r.boundary_reads += t.boundary_reads;
            r.manifest_gets += t.gets.saturating_sub(t.boundary_object_gets);
            r.boundary_gets += t.gets.min(t.boundary_object_gets);
            r.manifest_lists += t.lists.saturating_sub(t.boundary_reads);
            r.boundary_lists += t.lists.min(t.boundary_reads);
            r.other_requests += t.other;
            r.errors += t.errors;
            r.max_behind_tgbs = r
                .max_behind_tgbs
                .max(head.total_tgbs.saturating_sub(t.end_total));
        }
        Ok(r)
    }
}

/// What [`Readers`] read, summed over the ranks. Request classes are split with the
/// rule that every boundary read is one listing of the boundary log (true once the log
/// has an entry, as in every bench here), plus a GET when its newest entry is new to
/// the rank (counted by the chain): `manifest_gets` = GETs - boundary GETs (version
/// GETs, misses included), `manifest_lists` = listings - boundary reads (jumps).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadersReport {
    /// Ranks.
    pub w: u64,
    /// From the start to the finish, on the store's clock.
    pub elapsed: Duration,
    /// TGBs the stream committed meanwhile (the newest version's total at the finish
    /// minus that at the start).
    pub head_tgbs: u64,
    /// Versions adopted, all ranks.
    pub versions_read: u64,
    /// TGBs the ranks saw become visible (steps a rank could read), all ranks.
    pub tgbs_delivered: u64,
    /// Manifest bytes read, all ranks (starting reads included).
    pub manifest_bytes: u64,
    /// GC boundary bytes read, all ranks.
    pub boundary_bytes: u64,
    /// Manifest objects read (GETs that found a version).
    pub manifests_read: u64,
    /// Boundary reads.
    pub boundary_reads: u64,
    /// GETs of manifest versions, misses (not yet committed) included.
    pub manifest_gets: u64,
    /// GETs of boundary objects.
    pub boundary_gets: u64,
    /// Listings of `manifests/` (jumps to the newest version).
    pub manifest_lists: u64,
    /// Listings of the boundary log.
    pub boundary_lists: u64,
    /// Any other request (none expected).
    pub other_requests: u64,
    /// Waits that failed (retried after `poll_max`).
    pub errors: u64,
    /// The largest number of TGBs a rank was behind the newest version at the finish.
    pub max_behind_tgbs: u64,
}

impl ReadersReport {
    /// Every request the ranks made.
    pub fn requests(&self) -> u64 {
        self.manifest_gets
            + self.boundary_gets
            + self.manifest_lists
            + self.boundary_lists
            + self.other_requests
    }

    /// `n` per second of [`elapsed`](Self::elapsed).
    pub fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}
