//! One reclamation pass and the background reclaimer.
//!
//! ```text
//!  1 read the boundary B0 and the newest manifest M (from B0 on), through the chain
//!  2 low-water mark W = min over live groups (eq. 11)
//!  3 B = max(B0, (min(W.version, M.version), min(W.step, M.total_tgbs)))
//!  4 advance the boundary to B  <- durable BEFORE anything is deleted; a
//!    monotone log (batchweave-chain), so any number of reclaimers is safe
//!  5 delete TGB objects of M with step < B.low_water_step
//!  6 delete orphans: tgb/ objects not in M, older than the grace period, and
//!    proven never to be committed: M decides their producer's sequence, or M was
//!    committed after their commit deadline (however stale the reads that found M);
//!    and claims/ objects past the grace period that no committer may record any more
//!  7 delete manifest versions < B.min_live_version (the newest is never below it)
//!  8 prune the boundary log's old entries
//! ```
//! Every step is idempotent; a crash anywhere leaves a state the next pass
//! finishes. Producers trim descriptors below `B.low_water_step` from the
//! versions they create and treat a create below `B.min_live_version` as a
//! conflict (no ghost commits).

use std::collections::HashSet;
use std::time::Duration;

use batchweave_chain::Chain;
use batchweave_manifest::{
    CLAIM_DIR, DecodeLimits, EpochClaim, GcBoundary, MANIFEST_DIR, Manifest, TGB_DIR,
    group_layout_key, parse_manifest_key, parse_tgb_key, validate_producer_id,
};
use batchweave_store::StreamStore;
use tokio::task::JoinHandle;

use crate::GcError;
use crate::marks::{LowWater, low_water};

/// Tunables of a [`Reclaimer`]. Use `..Default::default()`.
#[derive(Debug, Clone)]
pub struct GcSettings {
    /// TGB objects that no manifest references are deleted once older than
    /// this (`None`: never). Must exceed the longest time between a TGB's
    /// upload and its commit.
    pub orphan_grace: Option<Duration>,
    /// What `orphan_grace` must exceed beyond the longest `max_commit_age` the
    /// stream's producers recorded: clock skew between the hosts, plus the longest
    /// commit attempt, plus a pass's time from reading the newest version to listing
    /// the TGBs (default one minute). A pass with a shorter grace is refused.
    pub orphan_margin: Duration,
    /// The caller vouches that no producer of the stream is running (the job has
    /// ended): the orphan grace is then not checked against the producers'
    /// `max_commit_age`, so a final pass can sweep every orphan with a zero grace.
    pub producers_stopped: bool,
    /// A group none of whose positions wrote a watermark for this long is
    /// ignored (`None`, the default: groups live until retired).
    pub dead_group_after: Option<Duration>,
    /// Compute and report, but write and delete nothing.
    pub dry_run: bool,
    /// Bounds for every object read.
    pub limits: DecodeLimits,
}

impl Default for GcSettings {
    fn default() -> Self {
        Self {
            orphan_grace: Some(Duration::from_secs(3600)),
            orphan_margin: Duration::from_secs(60),
            producers_stopped: false,
            dead_group_after: None,
            dry_run: false,
            limits: DecodeLimits::default(),
        }
    }
}

/// What one pass did (or, in a dry run, would do).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct GcReport {
    /// The boundary before the pass.
    pub boundary_before: GcBoundary,
    /// The boundary after the pass.
    pub boundary: GcBoundary,
    /// Newest manifest version seen.
    pub newest_version: u64,
    /// TGB objects below the low-water mark deleted.
    pub tgbs_deleted: u64,
    /// Orphan TGB objects deleted.
    pub orphans_deleted: u64,
    /// Epoch claim objects deleted (`claims/`: cooperative producers' opens that no
    /// committer may record any more).
    pub claims_deleted: u64,
    /// Manifest versions deleted.
    pub manifests_deleted: u64,
    /// Bytes of all deleted objects.
    pub bytes_freed: u64,
    /// True if nothing was written or deleted.
    pub dry_run: bool,
    /// Groups that held the mark (group, step, version).
    pub groups: Vec<(String, u64, u64)>,
}

/// `max_commit_age` assumed for a producer entry that recorded none (the producers'
/// default before they recorded it).
const UNRECORDED_MAX_COMMIT_AGE: Duration = Duration::from_secs(30 * 60);

/// Reclaims a stream's storage behind the low-water mark.
#[derive(Debug, Clone)]
pub struct Reclaimer {
    store: StreamStore,
    chain: Chain,
    settings: GcSettings,
}

impl Reclaimer {
    /// A reclaimer for the stream in `store`.
    pub fn new(store: StreamStore, settings: GcSettings) -> Self {
        let chain = Chain::new(store.clone(), settings.limits);
        Self {
            store,
            chain,
            settings,
        }
    }

    /// The current boundary (zero if GC never ran).
    pub async fn boundary(&self) -> Result<GcBoundary, GcError> {
        Ok(self.chain.boundary().await?)
    }

    /// Moves the boundary forward to at least `to` (never back, whatever other
    /// reclaimers write) without deleting anything; returns the durable boundary.
    /// For tools that pace producers without reclaiming (benchmarks' controls).
    pub async fn advance_boundary(&self, to: GcBoundary) -> Result<GcBoundary, GcError> {
        Ok(self.chain.advance_boundary(to).await?)
    }

    /// The low-water mark from the groups' layouts and watermarks.
    pub async fn low_water(&self) -> Result<LowWater, GcError> {
        low_water(
            &self.store,
            &self.settings.limits,
            self.settings.dead_group_after,
        )
        .await
    }

    /// The newest manifest version of the stream, if it has any. A stale listing never
    /// makes GC take an older version for the newest (the chain probes past it): the
    /// orphan sweep would then delete TGBs that newer versions made visible.
    pub async fn newest_manifest(&self) -> Result<Option<Manifest>, GcError> {
        let b = self.chain.boundary().await?;
        Ok(self.chain.newest_from(b.min_live_version.max(1)).await?)
    }

    /// Refuses an orphan grace period that could sweep an upload a producer may still
    /// commit: it must exceed the longest `max_commit_age` a producer of the stream
    /// recorded (the producers' old default, 30 minutes, for entries that recorded
    /// none) plus `orphan_margin`. Checked before anything is written or deleted.
    fn check_orphan_grace(&self, m: &Manifest) -> Result<(), GcError> {
        let Some(grace) = self
            .settings
            .orphan_grace
            .filter(|_| !self.settings.producers_stopped)
        else {
            return Ok(());
        };
        let longest = m
            .producers
            .iter()
            .map(|(id, e)| {
                let age = match e.max_commit_age_ms {
                    0 => UNRECORDED_MAX_COMMIT_AGE,
                    ms => Duration::from_millis(ms),
                };
                (age, id)
            })
            .max();
        let Some((age, id)) = longest else {
            return Ok(());
        };
        let need = age.saturating_add(self.settings.orphan_margin);
        if grace <= need {
            return Err(GcError::Invalid(format!(
                "orphan_grace {}s is not above the longest max_commit_age of this stream's \
                 producers ({}s, producer {id}) plus the margin for clock skew and commit time \
                 ({}s): an orphan it sweeps could still be committed; raise orphan_grace above \
                 {}s (--orphan-grace-secs) or lower the producers' max_commit_age",
                grace.as_secs(),
                age.as_secs(),
                self.settings.orphan_margin.as_secs(),
                need.as_secs()
            )));
        }
        Ok(())
    }

    /// Whether an object `m` does not list, uploaded at `uploaded_ms` (the store's
    /// clock), is proven to be in no version and never to be committed, whatever the
    /// versions after `m` hold (`m` may be an old view: a stale read of the chain ends
    /// the search for the newest early). One of:
    /// - its fate is decided in `m`: the key's producer has, in `m`, a higher epoch (the
    ///   upload's epoch is fenced) or the same epoch with a last sequence at or past the
    ///   key's (that sequence is done: committed and since trimmed, or given up); later
    ///   versions extend `m`, so this holds in all of them;
    /// - `m` was committed after the object's commit deadline (upload + the longest
    ///   `max_commit_age` + `orphan_margin`): a version that lists the object was built
    ///   on a base read before that deadline, so it precedes `m`, which extends it;
    /// - the producers have stopped (nothing can commit any more).
    ///
    /// Without proof (a producer's upload that no version decides yet, on an idle stream)
    /// the object waits for a later pass.
    fn provably_orphan(&self, m: &Manifest, key: &str, uploaded_ms: i64) -> bool {
        if self.settings.producers_stopped {
            return true;
        }
        if let Some((id, epoch, sequence)) = parse_tgb_key(key)
            && let Some(e) = m.producers.get(id)
            && (e.epoch > epoch || (e.epoch == epoch && e.last_sequence >= sequence))
        {
            return true;
        }
        let reach = m
            .producers
            .values()
            .map(|e| match e.max_commit_age_ms {
                0 => UNRECORDED_MAX_COMMIT_AGE,
                ms => Duration::from_millis(ms),
            })
            .max()
            .unwrap_or_default()
            .saturating_add(self.settings.orphan_margin);
        let reach = i64::try_from(reach.as_millis()).unwrap_or(i64::MAX);
        let committed = i64::try_from(m.committed_at_ms).unwrap_or(i64::MAX);
        committed > uploaded_ms.saturating_add(reach)
    }

    /// Whether no committer can record claim `c` (written at `written_ms`) on a version
    /// that extends `m`: its id's entry in `m` holds its epoch or a higher one, or `m` was
    /// committed after the claim's own limit (plus `orphan_margin`) ran out, or the
    /// producers have stopped.
    fn claim_done(&self, m: &Manifest, c: &EpochClaim, written_ms: i64) -> bool {
        if self.settings.producers_stopped
            || m.producers
                .get(&c.producer_id)
                .is_some_and(|e| e.epoch >= c.epoch)
        {
            return true;
        }
        let reach =
            Duration::from_millis(c.max_commit_age_ms).saturating_add(self.settings.orphan_margin);
        let reach = i64::try_from(reach.as_millis()).unwrap_or(i64::MAX);
        let committed = i64::try_from(m.committed_at_ms).unwrap_or(i64::MAX);
        committed > written_ms.saturating_add(reach)
    }

    /// One reclamation pass (see the module docs for the order of steps).
    pub async fn run_once(&self) -> Result<GcReport, GcError> {
        let dry = self.settings.dry_run;
        let b0 = self.chain.boundary().await?;
        let newest = self.chain.newest_from(b0.min_live_version.max(1)).await?;
        let mut report = GcReport {
            boundary_before: b0,
            boundary: b0,
            dry_run: dry,
            ..Default::default()
        };
        let Some(m) = newest else {
            return Ok(report);
        };
        report.newest_version = m.version;
        self.check_orphan_grace(&m)?;
        let lw = self.low_water().await?;
        report.groups = lw
            .groups
            .iter()
            .filter(|g| !g.dead)
            .map(|g| (g.group.clone(), g.step, g.version))
            .collect();
        let mut b = b0;
        if let (Some(step), Some(version)) = (lw.step, lw.version) {
            b.min_live_version = b.min_live_version.max(version.min(m.version));
            b.low_water_step = b.low_water_step.max(step.min(m.total_tgbs));
        }
        if b != b0 {
            b.updated_at_ms = self.store.clock().unix_millis();
            if !dry {
                // Durable before anything is deleted; with other reclaimers at work the
                // boundary may be further on than ours: it only moves forward.
                self.chain.advance_boundary(b).await?;
            }
            tracing::info!(
                min_live = b.min_live_version,
                low_water = b.low_water_step,
                "gc boundary advanced"
            );
        }
        report.boundary = b;

        // TGBs of the newest version below the low-water step.
        // Every key of M is accounted for here, so the orphan sweep below
        // never touches a TGB the newest version lists.
        let mut listed: HashSet<&str> = HashSet::with_capacity(m.tgbs.len());
        for (i, d) in m.tgbs.iter().enumerate() {
            listed.insert(d.key.as_str());
            let step = m.first_step + (i as u64);
            if step < b.low_water_step {
                // Deleted again on every pass until a commit trims it (idempotent,
                // and it finishes an interrupted pass), but counted only the
                // first time it falls below the mark.
                if !dry {
                    self.store.delete(&d.key).await?;
                }
                if step >= b0.low_water_step {
                    report.tgbs_deleted += 1;
                    report.bytes_freed += d.object_size;
                }
            }
        }

        // Orphans: never committed (or trimmed by an earlier, interrupted pass).
        if let Some(grace) = self.settings.orphan_grace {
            let now = i64::try_from(self.store.clock().unix_millis()).unwrap_or(i64::MAX);
            let cutoff = now.saturating_sub(i64::try_from(grace.as_millis()).unwrap_or(i64::MAX));
            for o in self.store.list(TGB_DIR.trim_end_matches('/')).await? {
                if listed.contains(o.key.as_str())
                    || o.last_modified_ms > cutoff
                    || !self.provably_orphan(&m, &o.key, o.last_modified_ms)
                {
                    continue;
                }
                if !dry {
                    self.store.delete(&o.key).await?;
                }
                report.orphans_deleted += 1;
                report.bytes_freed += o.size;
            }
            // Epoch claim objects (cooperative producers' opens), once no committer may
            // record them any more: past the grace period, and recorded or overtaken by
            // `m` (its entry's epoch at or above the claim's) or past the limit the claim
            // names (committers record a claim only while it is younger than that).
            for o in self.store.list(CLAIM_DIR.trim_end_matches('/')).await? {
                let Some(c) = EpochClaim::parse(&o.key) else {
                    continue; // not a claim object: not ours to delete
                };
                if o.last_modified_ms > cutoff || !self.claim_done(&m, &c, o.last_modified_ms) {
                    continue;
                }
                if !dry {
                    self.store.delete(&o.key).await?;
                }
                report.claims_deleted += 1;
            }
        }

        // Manifest versions below the boundary (never the newest: b.min_live <= m.version).
        if b.min_live_version > 1 {
            for o in self.store.list(MANIFEST_DIR.trim_end_matches('/')).await? {
                match parse_manifest_key(&o.key) {
                    Some(v) if v < b.min_live_version => {
                        if !dry {
                            self.store.delete(&o.key).await?;
                        }
                        report.manifests_deleted += 1;
                        report.bytes_freed += o.size;
                    }
                    _ => {}
                }
            }
        }
        if !dry {
            self.chain.prune_boundaries().await?;
        }
        Ok(report)
    }

    /// Retires a consumer group: deletes its layout and watermarks so it no
    /// longer holds the low-water mark back.
    pub async fn retire_group(&self, group: &str) -> Result<u64, GcError> {
        validate_producer_id(group).map_err(|e| GcError::Invalid(e.to_string()))?;
        let layout = group_layout_key(group)?;
        let dir = layout.trim_end_matches("/_layout").to_string();
        let mut n = 0;
        for o in self.store.list(&dir).await? {
            self.store.delete(&o.key).await?;
            n += 1;
        }
        Ok(n)
    }

    /// Runs a pass every `interval` in a background task until the handle is
    /// dropped or [`GcTask::stop`] is called. Errors are logged and retried
    /// at the next pass (GC is off the critical path).
    pub fn spawn(self, interval: Duration) -> GcTask {
        let handle = tokio::spawn(async move {
            let clock = self.store.clock().clone();
            loop {
                match self.run_once().await {
                    Ok(r) => {
                        tracing::debug!(freed = r.bytes_freed, boundary = ?r.boundary, "gc pass")
                    }
                    Err(e) => tracing::warn!(error = %e, "gc pass failed; retrying next interval"),
                }
                clock.sleep(interval).await;
            }
        });
        GcTask { handle }
    }
}

/// A background reclaimer; stops when dropped.
#[derive(Debug)]
pub struct GcTask {
    handle: JoinHandle<()>,
}

impl GcTask {
    /// Stops the background passes.
    pub fn stop(self) {
        self.handle.abort();
    }
}

impl Drop for GcTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}
