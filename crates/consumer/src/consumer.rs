//! The consumer: cursor, step planning, prefetch pipeline, checkpoint and restore.

use std::collections::VecDeque;
use std::sync::Arc;

use batchweave_manifest::{
    Manifest, Watermark, encode_watermark, find_step, stream_grid, watermark_key,
};
use batchweave_store::StreamStore;
use batchweave_tgb::{Grid, Position, convert_step, plan, tgbs_needed_through};
use bytes::Bytes;
use tokio::task::JoinHandle;

use crate::poll::Tracker;
use crate::read::{PlannedRead, Reader};
use crate::stats::{Live, add};
use crate::{
    BatchSource, ConsumerBuilder, ConsumerError, ConsumerSettings, ConsumerState, ConsumerStats,
    RankConfig, ReadMode,
};
use batchweave_manifest::{GroupLayout, encode_group_layout, group_layout_key, rank_mark_name};

/// One consumer step for this rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The consumer step (counted at the consumer's DP degree).
    pub step: u64,
    /// The rank's bytes: one entry per read of the step's plan, in plan order (one entry
    /// under the current remap rule). Every byte passed its slice CRC32.
    pub data: Vec<Bytes>,
    /// Where each entry of `data` came from.
    pub sources: Vec<BatchSource>,
    /// The manifest version the step was planned from.
    pub version: u64,
}

type Fetched = Result<(Vec<Bytes>, Vec<BatchSource>), ConsumerError>;

struct InFlight {
    step: u64,
    version: u64,
    handle: JoinHandle<Fetched>,
}

/// A training rank's reader of one stream. See the crate docs for the protocol.
pub struct Consumer {
    rank: RankConfig,
    settings: ConsumerSettings,
    position: Position,
    store: StreamStore,
    tracker: Tracker,
    live: Arc<Live>,
    reader: Option<Reader>,
    next_step: u64,
    version: u64,
    inflight: VecDeque<InFlight>,
    /// Background footer reads ahead of the steps in flight
    /// ([`ConsumerSettings::footer_lookahead`]).
    warming: Vec<JoinHandle<()>>,
    /// The first step whose footers have not been asked for yet.
    warmed_to: u64,
}

impl std::fmt::Debug for Consumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Consumer")
            .field("rank", &self.rank.rank)
            .field("position", &self.position)
            .field("group", &self.rank.group)
            .field("next_step", &self.next_step)
            .field("version", &self.version)
            .field("prefetched", &self.inflight.len())
            .finish()
    }
}

/// The stream's grid as `m` records it (also when `m` retains no TGB).
fn grid_of(m: &Manifest) -> Option<Grid> {
    stream_grid(m).map(|(dp, cp)| Grid::new(dp, cp))
}

fn remap_err(what: String) -> impl FnOnce(batchweave_tgb::TgbError) -> ConsumerError {
    move |e| ConsumerError::remap(what, e)
}

impl Consumer {
    /// Starts building a consumer for the rank `rank` on `store`: default
    /// [`ConsumerSettings`], starting at consumer step 0 unless
    /// [`ConsumerBuilder::state`] gives a checkpoint to resume from.
    pub fn builder(store: StreamStore, rank: RankConfig) -> ConsumerBuilder {
        ConsumerBuilder::new(store, rank)
    }

    /// Opens at consumer step 0, or resumes from a checkpointed cursor: the first
    /// [`next`](Self::next) then returns exactly consumer step `state.next_step`
    /// (converted to this rank's DP degree when it differs from the state's; that must
    /// fall on a step boundary). Registers the group layout (`watermarks/<group>/_layout`).
    pub(crate) async fn open_inner(
        store: StreamStore,
        rank: RankConfig,
        settings: ConsumerSettings,
        state: Option<ConsumerState>,
    ) -> Result<Self, ConsumerError> {
        let Some(state) = state else {
            let mut c = Self::build(store, rank, settings, 0).await?;
            c.tracker.start_at(0).await?;
            c.after_start().await?;
            return Ok(c);
        };
        state.check()?;
        if state.group != rank.group {
            return Err(ConsumerError::state(format!(
                "the state belongs to consumer group {:?}, this consumer is in group {:?}",
                state.group, rank.group
            )));
        }
        let dp = rank.mesh.dp;
        let step = if state.dp == dp {
            state.next_step
        } else {
            convert_step(state.next_step, state.dp, dp).map_err(remap_err(format!(
                "restoring a checkpoint taken at DP={} (next step {}) with DP={dp}",
                state.dp, state.next_step
            )))?
        };
        let mut c = Self::build(store, rank, settings, step).await?;
        c.tracker.start_at(state.version).await?;
        c.after_start().await?;
        Ok(c)
    }

    async fn build(
        store: StreamStore,
        rank: RankConfig,
        settings: ConsumerSettings,
        next_step: u64,
    ) -> Result<Self, ConsumerError> {
        rank.validate()?;
        settings.validate()?;
        let position = rank.position()?;
        // Private counters, so stats are this consumer's even when the handle is shared.
        let store = store.scoped("");
        // The planted shared-mark bug (crates/sim only) records no TP/PP in the layout.
        let shared = crate::planted::planted().shared_rank_mark;
        let mesh = rank.mesh;
        let layout = GroupLayout {
            dp: mesh.dp,
            cp: mesh.cp,
            tp: if shared { 1 } else { mesh.tp },
            pp: if shared { 1 } else { mesh.pp },
            updated_at_ms: store.clock().unix_millis(),
        };
        let key =
            group_layout_key(&rank.group).map_err(|e| ConsumerError::config(e.to_string()))?;
        store.put(&key, encode_group_layout(&layout)).await?;
        let live = Arc::new(Live::default());
        let tracker = Tracker::new(store.clone(), settings.limits);
        Ok(Self {
            rank,
            settings,
            position,
            store,
            tracker,
            live,
            reader: None,
            next_step,
            version: 0,
            inflight: VecDeque::new(),
            warming: Vec::new(),
            warmed_to: 0,
        })
    }

    /// After the tracker found its first manifest: learn the grid, check the remap, and
    /// refuse a cursor whose data was reclaimed. Reclaimed means below the held
    /// manifest's `first_step` or below the GC boundary's low-water step: GC
    /// deletes TGB objects before producers trim them from new versions, so an
    /// older version can still list objects that are gone.
    async fn after_start(&mut self) -> Result<(), ConsumerError> {
        self.version = self.tracker.current().version;
        self.learn_grid()?;
        if let Some(grid) = self.grid() {
            let m = self.tracker.current().clone();
            // Read by the tracker after the version it adopted.
            let low_water = self.tracker.boundary().low_water_step;
            let reclaimed_below = m.first_step.max(low_water);
            let lowest = self.lowest_tgb(grid, self.next_step)?;
            if lowest < reclaimed_below {
                return Err(ConsumerError::DataReclaimed {
                    step: self.next_step,
                    tgb_step: lowest,
                    version: m.version,
                    first_step: reclaimed_below,
                });
            }
        }
        Ok(())
    }

    fn learn_grid(&mut self) -> Result<(), ConsumerError> {
        if self.reader.is_some() {
            return Ok(());
        }
        if let Some(grid) = grid_of(self.tracker.current()) {
            // Surfaces an impossible CP ratio now rather than at the first read.
            tgbs_needed_through(grid, self.rank.grid(), 0).map_err(remap_err(format!(
                "consumer grid DP={} x CP={} on a stream of grid D={} x C={}",
                self.rank.mesh.dp, self.rank.mesh.cp, grid.dp, grid.cp
            )))?;
            self.reader = Some(Reader::new(
                self.store.clone(),
                self.settings.read_mode,
                self.settings.token_bytes,
                grid,
                self.live.clone(),
            ));
        }
        Ok(())
    }

    /// The stream's TGB grid, once a TGB has been seen.
    pub fn grid(&self) -> Option<Grid> {
        self.reader.as_ref().map(|r| r.grid)
    }

    /// This rank's `(d, c)` position.
    pub fn position(&self) -> Position {
        self.position
    }

    /// Who this consumer is: its rank, mesh and group.
    pub fn rank_config(&self) -> &RankConfig {
        &self.rank
    }

    /// The tunables the consumer runs with.
    pub fn settings(&self) -> &ConsumerSettings {
        &self.settings
    }

    /// The newest manifest version the consumer has read.
    pub fn manifest_version(&self) -> u64 {
        self.tracker.current().version
    }

    fn lowest_tgb(&self, grid: Grid, step: u64) -> Result<u64, ConsumerError> {
        let reads = plan(grid, self.rank.grid(), self.position, step)
            .map_err(remap_err(format!("planning consumer step {step}")))?;
        Ok(reads.iter().map(|r| r.tgb_index).min().unwrap_or(0))
    }

    /// Whether `m` holds every TGB consumer step `step` needs.
    fn covers(
        known: Option<Grid>,
        consumer: Grid,
        m: &Manifest,
        step: u64,
    ) -> Result<bool, ConsumerError> {
        let Some(grid) = known.or_else(|| grid_of(m)) else {
            return Ok(false);
        };
        let through = tgbs_needed_through(grid, consumer, step)
            .map_err(remap_err(format!("consumer step {step}")))?;
        Ok(m.total_tgbs > through)
    }

    /// Waits until the held manifest covers `step`.
    async fn ensure_covered(&mut self, step: u64) -> Result<(), ConsumerError> {
        let (known, consumer) = (self.grid(), self.rank.grid());
        let waited = self
            .tracker
            .wait_until(
                |m| Self::covers(known, consumer, m, step),
                self.settings.poll_min,
                self.settings.poll_max,
            )
            .await?;
        if let Some(d) = waited {
            self.live.add_stall(d);
        }
        self.learn_grid()
    }

    /// The reads of `step` against the held manifest (which must cover it).
    fn plan_step(&self, step: u64) -> Result<Vec<PlannedRead>, ConsumerError> {
        let m = self.tracker.current();
        let grid = self.grid().ok_or_else(|| ConsumerError::Internal {
            message: "planning before the grid is known".into(),
        })?;
        let reads = plan(grid, self.rank.grid(), self.position, step)
            .map_err(remap_err(format!("planning consumer step {step}")))?;
        reads
            .into_iter()
            .map(|read| {
                if read.tgb_index < m.first_step {
                    return Err(ConsumerError::DataReclaimed {
                        step,
                        tgb_step: read.tgb_index,
                        version: m.version,
                        first_step: m.first_step,
                    });
                }
                let desc = find_step(m, read.tgb_index).cloned().ok_or_else(|| {
                    ConsumerError::Internal {
                        message: format!(
                            "TGB step {} is not in version {} although it covers step {step}",
                            read.tgb_index, m.version
                        ),
                    }
                })?;
                Ok(PlannedRead { desc, read })
            })
            .collect()
    }

    fn spawn(&self, step: u64) -> Result<InFlight, ConsumerError> {
        let reads = self.plan_step(step)?;
        let reader = self.reader.clone().ok_or_else(|| ConsumerError::Internal {
            message: "no reader".into(),
        })?;
        let clock = self.store.clock().clone();
        let handle = tokio::spawn(async move {
            let t0 = clock.now();
            let out = reader.fetch_step(&reads).await;
            if out.is_ok() {
                reader
                    .live
                    .record_latency(clock.now().saturating_duration_since(t0));
            }
            out
        });
        Ok(InFlight {
            step,
            version: self.tracker.current().version,
            handle,
        })
    }

    /// Starts fetches for `step` and the following steps the held manifest already covers,
    /// up to `prefetch` steps ahead of `step`.
    fn fill(&mut self, step: u64) -> Result<(), ConsumerError> {
        let depth = self.settings.prefetch.saturating_add(1);
        while self.inflight.len() < depth {
            let s = match self.inflight.back() {
                Some(b) => b.step.saturating_add(1),
                None => step,
            };
            let covered = Self::covers(self.grid(), self.rank.grid(), self.tracker.current(), s);
            if s != step && !matches!(covered, Ok(true)) {
                break;
            }
            match self.spawn(s) {
                Ok(f) => self.inflight.push_back(f),
                Err(e) if s == step => return Err(e),
                Err(_) => break,
            }
        }
        if let Some(back) = self.inflight.back().map(|f| f.step) {
            self.warm_footers(back);
        }
        Ok(())
    }

    /// Starts background reads of the footers of the `footer_lookahead` steps after
    /// `after` that the held manifest covers (each step once).
    fn warm_footers(&mut self, after: u64) {
        let ahead = self.settings.footer_lookahead as u64;
        let Some(reader) = self.reader.clone() else {
            return;
        };
        if ahead == 0 || self.settings.read_mode != ReadMode::Range {
            return;
        }
        self.warming.retain(|h| !h.is_finished());
        let until = after.saturating_add(1).saturating_add(ahead);
        let mut s = self.warmed_to.max(after.saturating_add(1));
        while s < until {
            let covered = Self::covers(self.grid(), self.rank.grid(), self.tracker.current(), s);
            if !matches!(covered, Ok(true)) {
                break;
            }
            let Ok(reads) = self.plan_step(s) else { break };
            let mut last = None;
            for r in reads {
                // Consecutive reads of one step often share a TGB.
                if last == Some(r.read.tgb_index) {
                    continue;
                }
                last = Some(r.read.tgb_index);
                let reader = reader.clone();
                self.warming.push(tokio::spawn(async move {
                    // A failure is the step's own fetch's to report.
                    let _ = reader.warm_footer(&r).await;
                }));
            }
            s += 1;
        }
        self.warmed_to = s;
    }

    fn abort_inflight(&mut self) {
        for f in self.inflight.drain(..) {
            f.handle.abort();
        }
    }

    /// Stops the footer reads ahead; the next fill starts them again from its step.
    fn abort_warming(&mut self) {
        for h in self.warming.drain(..) {
            h.abort();
        }
        self.warmed_to = 0;
    }

    /// The next step's batch for this rank. Waits (polling for new manifest versions with
    /// bounded backoff) until the step is visible. On error the cursor does not move, so
    /// the call can be repeated.
    pub async fn next(&mut self) -> Result<Batch, ConsumerError> {
        let step = self.next_step;
        match self.next_inner(step).await {
            Ok(b) => Ok(b),
            Err(e) => {
                self.abort_inflight();
                self.abort_warming();
                Err(self.explain_missing(step, e).await)
            }
        }
    }

    /// A TGB object that is missing although a live version lists it was deleted by GC
    /// (its step fell below the low-water mark after the version was read): say so with
    /// [`ConsumerError::DataReclaimed`] rather than a bare `NotFound`.
    async fn explain_missing(&mut self, step: u64, e: ConsumerError) -> ConsumerError {
        if !matches!(&e, ConsumerError::Store(s) if s.is_not_found()) {
            return e;
        }
        let Some(grid) = self.grid() else { return e };
        let (Ok(lowest), Ok(b)) = (
            self.lowest_tgb(grid, step),
            self.tracker.refresh_boundary().await,
        ) else {
            return e;
        };
        if lowest < b.low_water_step {
            return ConsumerError::DataReclaimed {
                step,
                tgb_step: lowest,
                version: self.tracker.current().version,
                first_step: b.low_water_step,
            };
        }
        e
    }

    async fn next_inner(&mut self, step: u64) -> Result<Batch, ConsumerError> {
        if self.inflight.front().map(|f| f.step) != Some(step) {
            self.abort_inflight();
            self.ensure_covered(step).await?;
        }
        let (version, (data, sources)) = if self.settings.prefetch == 0 {
            let reads = self.plan_step(step)?;
            let reader = self.reader.clone().ok_or_else(|| ConsumerError::Internal {
                message: "no reader".into(),
            })?;
            let clock = self.store.clock().clone();
            let t0 = clock.now();
            self.warm_footers(step);
            let out = reader.fetch_step(&reads).await?;
            self.live
                .record_latency(clock.now().saturating_duration_since(t0));
            (self.tracker.current().version, out)
        } else {
            self.fill(step)?;
            let f = self
                .inflight
                .pop_front()
                .ok_or_else(|| ConsumerError::Internal {
                    message: "prefetch queue empty".into(),
                })?;
            let out = f.handle.await.map_err(|e| ConsumerError::Internal {
                message: format!("fetch task for step {step} failed: {e}"),
            })??;
            (f.version, out)
        };
        self.next_step = step.saturating_add(1);
        self.version = version;
        add(&self.live.steps, 1);
        add(
            &self.live.bytes_delivered,
            data.iter().map(|b| b.len() as u64).sum(),
        );
        if let (Some(reader), Some(grid)) = (&self.reader, self.grid())
            && let Ok(lowest) = self.lowest_tgb(grid, self.next_step)
        {
            reader.evict_below(lowest);
        }
        Ok(Batch {
            step,
            data,
            sources,
            version,
        })
    }

    /// The cursor after the last batch [`next`](Self::next) returned: save it with the
    /// checkpoint and pass it to [`ConsumerBuilder::state`] to resume.
    pub fn state(&self) -> ConsumerState {
        ConsumerState {
            version: self.version,
            next_step: self.next_step,
            dp: self.rank.mesh.dp,
            cp: self.rank.mesh.cp,
            group: self.rank.group.clone(),
        }
    }

    /// Tells the consumer that a checkpoint holding `state` is durable: writes this
    /// rank's watermark `watermarks/<group>/d{d}-c{c}.wm` (with `-t{t}-p{p}` added when
    /// TP x PP > 1) with the state's version and
    /// the lowest TGB step the state's next consumer step needs (GC keeps everything from
    /// there on).
    pub async fn checkpoint_committed(&self, state: &ConsumerState) -> Result<(), ConsumerError> {
        state.check()?;
        let (group, mesh) = (&self.rank.group, &self.rank.mesh);
        if (state.group.as_str(), state.dp, state.cp) != (group.as_str(), mesh.dp, mesh.cp) {
            return Err(ConsumerError::state(format!(
                "state of group {:?} at DP={} CP={} does not belong to this consumer \
                 (group {group:?}, DP={} CP={})",
                state.group, state.dp, state.cp, mesh.dp, mesh.cp
            )));
        }
        // Without a known grid nothing was read yet: hold the mark at the start.
        let step = match self.grid() {
            Some(grid) => self.lowest_tgb(grid, state.next_step)?,
            None => 0,
        };
        // Each rank its own mark: the TP/PP ranks of a position checkpoint independently
        // (one may restore an older checkpoint), and GC takes the minimum.
        let [t, _, _, p] = mesh
            .coords(self.rank.rank)
            .map_err(|e| ConsumerError::config(format!("rank {}: {e}", self.rank.rank)))?;
        // The planted shared-mark bug (crates/sim only): one key per position.
        let (tp, pp) = if crate::planted::planted().shared_rank_mark {
            (1, 1)
        } else {
            (mesh.tp, mesh.pp)
        };
        let position = rank_mark_name(self.position.d, self.position.c, t, p, tp, pp);
        let key = watermark_key(group, &position)
            .map_err(|e| ConsumerError::config(format!("watermark key: {e}")))?;
        let wm = Watermark {
            version: state.version,
            step,
            updated_at_ms: self.store.clock().unix_millis(),
        };
        self.store.put(&key, encode_watermark(&wm)).await?;
        Ok(())
    }

    /// Statistics since open.
    pub fn stats(&self) -> ConsumerStats {
        let mut s = self.live.snapshot(self.store.stats());
        let chain = self.tracker.chain_stats();
        s.manifests_read += chain.manifests_read;
        s.boundary_reads += chain.boundary_reads;
        s.manifest_bytes += chain.manifest_bytes + chain.boundary_bytes;
        s.footers_cached = self
            .reader
            .as_ref()
            .map_or(0, |r| r.cached_footers() as u64);
        s
    }
}

impl Drop for Consumer {
    fn drop(&mut self) {
        self.abort_inflight();
        self.abort_warming();
    }
}
