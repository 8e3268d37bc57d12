//! The innermost simulated store: an `InMemory` backend that keeps the
//! ground truth the checks need and, on request, misbehaves (planted bugs).
//!
//! ```text
//!   StreamStore ─> FaultStore ─> LatencyStore ─> SimBackend ─> InMemory
//!                                                  │ records every manifest write (ghost or live)
//!                                                  │ rebuilds the live chain's steps from them
//!                                                  │ sees every delete: checks it against the live marks
//!                                                  │ stamps objects with virtual time
//!                                                  │ checks every live write as a reader would, and against
//!                                                  │   what was uploaded, deleted and fenced (cooperative rules)
//!                                                  │ delayed creates, stale reads of overwritten objects,
//!                                                  │   stale listings of tgb/
//!                                                  └ planted bug (optional)
//! ```
//!
//! `InMemory` stamps objects with the real wall clock; GC's orphan sweep
//! compares those stamps with the injected clock, so the backend rewrites
//! them in listings with the virtual time of the write. That keeps the sweep
//! meaningful and the run deterministic.
//!
//! **Ghosts.** A manifest write is a ghost when its slot was deleted before (GC deleted
//! the version, then a stalled or delayed create filled the slot). That is the ground
//! truth, independent of any boundary a reader might have seen.
//!
//! **Every live write is checked when it takes effect**, so a version no correct writer
//! would create fails the run even if no reader happens to read it:
//!
//! | invariant | what must hold |
//! |---|---|
//! | `reader-rules` | the version decodes (every per-version rule, `validate`) and extends the live version before it (`check_extends`, with `single-commit`): what every reader checks |
//! | `visible-object-present` | every TGB it makes visible is stored |
//! | `published-uploaded` | ... and was uploaded under that key (by its producer: the key names it), with the descriptor's size, and never deleted since (`published-reclaimed`: a TGB GC deleted, listed by a later version) |
//! | `fenced-published` | no TGB it makes visible has an epoch below the newest its producer claimed in the live chain (a fenced incarnation's leftover, a zombie's upload) |
//! | `published-contiguous` | each producer's TGBs continue its sequence in the live chain (1, 2, 3, ... across epochs) |
//! | `exactly-once` | ... and its source offsets (1, 2, 3, ...: the simulation appends each offset once, in order) |
//! | `claim-recorded` | a cooperative version that moves another producer's entry to a newer epoch records a claim object that producer wrote, of that epoch, incarnation and limit, at most that limit old at the version's `committed_at_ms` |
//! | `coop-age` | a cooperative version publishes another producer's upload only if it was written (the store's `last_modified`) at most that producer's `max_commit_age` before the version's `committed_at_ms`: the rule GC's orphan sweep relies on (exact here: a committer stamps its version at the moment it judges the ages) |
//!
//! **Stale listings of `tgb/`** ([`TgbStale`], drawn per run): a listing may miss objects
//! written within a window (each with probability one half, so a producer's later upload
//! can be listed without its earlier one), or still show objects deleted within a window
//! (a swept orphan still listed), as an eventually consistent store's listings do.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::future::Future;
use std::ops::Range;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use batchweave_chain::{BOUNDARY_DIR, parse_boundary_key};
use batchweave_manifest::{
    CLAIM_DIR, DecodeLimits, EpochClaim, GcBoundary, MANIFEST_DIR, Manifest, TGB_DIR,
    WATERMARK_DIR, check_extends, decode_gc_boundary, decode_manifest, parse_manifest_key,
    parse_tgb_key,
};
use batchweave_store::Clock;
use batchweave_store::object_store::memory::InMemory;
use batchweave_store::object_store::path::Path;
use batchweave_store::object_store::{
    CopyOptions, GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
    ObjectStoreExt, PutMode, PutMultipartOptions, PutOptions, PutPayload, PutResult, Result,
};
use batchweave_store::testing::{is_conflict_error, transient_error};
use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::config::CLOCK_BASE_MS;
use crate::log::{EventLog, summary};
use crate::{PlantedBug, SimConfig};

type BoxFut<'a, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'a>>;

/// Where stale copies of overwritten objects are kept (never listed by anyone).
const SHADOW: &str = "_sim/prev/";

/// One write of a manifest version that took effect.
#[derive(Debug, Clone)]
pub(crate) struct ManifestWrite {
    /// Key relative to the store root.
    pub(crate) key: String,
    /// The bytes written.
    pub(crate) bytes: Bytes,
    /// Virtual unix milliseconds of the write.
    pub(crate) at_ms: u64,
    /// The slot had been deleted before: a ghost, in no live chain.
    pub(crate) ghost: bool,
    /// The highest `low_water_step` any boundary entry held when the write took effect.
    pub(crate) low_water: u64,
}

/// One step of the live chain as the manifest writes define it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepTruth {
    pub(crate) key: String,
    pub(crate) producer: String,
    pub(crate) sequence: u64,
    pub(crate) offset: u64,
}

/// A ghost write, for the probes.
#[derive(Debug, Clone)]
pub(crate) struct Ghost {
    pub(crate) manifest: Manifest,
}

/// A rank's live mark: what its last checkpoint needs (`(version, TGB step)`).
pub(crate) type Mark = (u64, u64);

/// The first violation the backend saw (it cannot fail the request that caused it).
#[derive(Debug, Clone)]
pub(crate) struct Seen {
    pub(crate) invariant: &'static str,
    pub(crate) detail: String,
    pub(crate) trace: Vec<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BackendCounts {
    pub(crate) planted_hits: u64,
    pub(crate) delayed_creates: u64,
    pub(crate) stale_overwrites: u64,
    pub(crate) deletes_checked: u64,
    pub(crate) ghosts: u64,
    /// Live versions that publish other producers' TGBs, and those TGBs.
    pub(crate) coop_versions: u64,
    pub(crate) published_for_others: u64,
    /// Refused candidates that published a producer's uploads at an epoch the slot's
    /// winner had fenced.
    pub(crate) fenced_while_published: u64,
    /// Claims of a newer epoch while uploads of an older one beyond the entry were stored.
    pub(crate) fenced_with_uploads: u64,
    /// Epoch claims live cooperative versions recorded for other producers.
    pub(crate) claims_recorded: u64,
    /// Uploads of a fenced epoch, and listings of `tgb/` that showed one.
    pub(crate) zombie_uploads: u64,
    pub(crate) zombie_listed: u64,
    /// Candidates (created or refused) holding a TGB deleted before the create.
    pub(crate) swept_while_held: u64,
    /// Stale listings of `tgb/` that missed recent objects, and that showed deleted ones.
    pub(crate) stale_missing: u64,
    pub(crate) stale_deleted: u64,
    /// Deleted objects the stale listings showed.
    pub(crate) deleted_listed: u64,
}

/// Stale listings of `tgb/` (drawn per run; all zero: none, and no random draws).
#[derive(Debug, Clone, Default)]
pub(crate) struct TgbStale {
    /// Probability per listing that it misses objects written within `miss_window_ms`
    /// (each with probability one half).
    pub(crate) miss_rate: f64,
    pub(crate) miss_window_ms: u64,
    /// Probability per listing that it still shows the objects deleted within
    /// `deleted_window_ms`.
    pub(crate) deleted_rate: f64,
    pub(crate) deleted_window_ms: u64,
    /// Seed of the random stream these draws come from (its own, so the other draws of
    /// the backend do not move).
    pub(crate) seed: u64,
}

#[derive(Debug)]
struct State {
    /// Virtual modification time of every object written, by key.
    mtimes: BTreeMap<String, u64>,
    /// Every manifest write that took effect, in order.
    manifests: Vec<ManifestWrite>,
    plant: Option<PlantedBug>,
    rng: StdRng,
    counts: BackendCounts,
    /// The highest boundary any log entry held (as its writer created it).
    boundary: GcBoundary,
    /// Manifest slots deleted so far.
    deleted_slots: BTreeSet<u64>,
    /// The live chain's steps, from the non-ghost writes.
    steps: Vec<StepTruth>,
    /// Step of every TGB key of the live chain.
    key_step: HashMap<String, u64>,
    /// Newest live version written.
    newest: u64,
    /// TGB objects stored now.
    tgbs: BTreeSet<String>,
    /// Live ranks' marks, by (group, rank).
    marks: BTreeMap<(usize, u32), Mark>,
    /// Ghost writes, by version.
    ghosts: BTreeMap<u64, Ghost>,
    /// Watermark and layout keys whose previous bytes are kept.
    shadowed: BTreeSet<String>,
    violation: Option<Seen>,
    /// Size of every TGB object uploaded, by key (kept after deletes).
    sizes: HashMap<String, u64>,
    /// When each TGB object was first deleted.
    deleted_tgbs: HashMap<String, u64>,
    /// The live versions written, decoded (the last write of each slot).
    live: BTreeMap<u64, Manifest>,
    /// Per producer, the newest epoch any live version recorded.
    epochs: HashMap<String, u64>,
    /// Per producer, the sequence and source offset of its last TGB in the live chain.
    last_published: HashMap<String, (u64, u64)>,
    /// Uploads of an epoch that was already fenced when they were written.
    zombie_keys: BTreeSet<String>,
    stale: TgbStale,
    stale_rng: StdRng,
}

/// See the module docs.
pub(crate) struct SimBackend {
    inner: Arc<dyn ObjectStore>,
    clock: Arc<dyn Clock>,
    state: Arc<Mutex<State>>,
    log: Arc<EventLog>,
    me: Weak<SimBackend>,
    delayed_rate: f64,
    max_delay: Duration,
    stale_overwrite_rate: f64,
}

impl fmt::Debug for SimBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SimBackend").finish_non_exhaustive()
    }
}

impl fmt::Display for SimBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SimBackend({})", self.inner)
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn is_manifest(p: &Path) -> bool {
    p.as_ref().starts_with(MANIFEST_DIR)
}

fn is_boundary(p: &Path) -> bool {
    parse_boundary_key(p.as_ref()).is_some()
}

fn is_watermark(p: &Path) -> bool {
    p.as_ref().starts_with(WATERMARK_DIR)
}

fn shadow(p: &Path) -> Path {
    Path::from(format!("{SHADOW}{}", p.as_ref()))
}

fn sim_log() -> bool {
    std::env::var("BATCHWEAVE_SIM_LOG").is_ok_and(|x| x == "1")
}

impl State {
    fn violate(&mut self, log: &EventLog, invariant: &'static str, detail: String) {
        log.event("check", format!("VIOLATION {invariant}: {detail}"));
        if self.violation.is_none() {
            self.violation = Some(Seen {
                invariant,
                detail,
                trace: log.trace(),
            });
        }
    }

    fn min_marks(&self) -> Option<Mark> {
        let v = self.marks.values().map(|m| m.0).min()?;
        let s = self.marks.values().map(|m| m.1).min()?;
        Some((v, s))
    }

    /// The ground-truth check of one deletion (at store time `now`): nothing a live mark
    /// needs.
    fn check_delete(&mut self, log: &EventLog, key: &str, now: u64) {
        if let Some(v) = parse_manifest_key(key) {
            self.counts.deletes_checked += 1;
            self.deleted_slots.insert(v);
            let ghost = self.ghosts.contains_key(&v);
            if !ghost && v >= self.newest {
                self.violate(
                    log,
                    "gc-safety",
                    format!(
                        "{key} deleted: it is the newest live version ({})",
                        self.newest
                    ),
                );
            } else if !ghost
                && let Some((version, _)) = self.min_marks()
                && v >= version
            {
                let who = self
                    .marks
                    .iter()
                    .find(|(_, m)| m.0 <= v)
                    .map(|(r, m)| (*r, *m));
                self.violate(
                    log,
                    "gc-safety",
                    format!(
                        "{key} deleted, but a live checkpoint is at version {version} (group, rank, mark: {who:?})"
                    ),
                );
            }
        } else if key.starts_with(TGB_DIR) {
            self.counts.deletes_checked += 1;
            if self.tgbs.remove(key) {
                self.deleted_tgbs.entry(key.to_string()).or_insert(now);
            }
            if let Some(step) = self.key_step.get(key).copied()
                && let Some((_, low)) = self.min_marks()
                && step >= low
            {
                let who = self
                    .marks
                    .iter()
                    .find(|(_, m)| m.1 <= step)
                    .map(|(r, m)| (*r, *m));
                self.violate(
                    log,
                    "gc-safety",
                    format!(
                        "{key} (step {step}) deleted, but a live checkpoint needs step {low} on (group, rank, mark: {who:?})"
                    ),
                );
            }
        }
    }

    /// Records a manifest write that took effect; checks that every TGB it makes
    /// visible is stored.
    fn record_manifest(&mut self, log: &EventLog, key: &str, bytes: Bytes, now: u64) {
        let v = parse_manifest_key(key).unwrap_or(0);
        let ghost = self.deleted_slots.contains(&v);
        let decoded = decode_manifest(&bytes, &DecodeLimits::default());
        if sim_log()
            && let Ok(m) = &decoded
        {
            eprintln!(
                "{:>9}ms store  write{} {}",
                now.saturating_sub(CLOCK_BASE_MS),
                if ghost { " (GHOST)" } else { "" },
                summary(m)
            );
        }
        self.manifests.push(ManifestWrite {
            key: key.to_string(),
            bytes,
            at_ms: now,
            ghost,
            low_water: self.boundary.low_water_step,
        });
        let m = match decoded {
            Ok(m) => m,
            Err(e) => {
                if !ghost {
                    self.violate(
                        log,
                        "reader-rules",
                        format!("version {v} was created, but no reader can decode it: {e}"),
                    );
                }
                return;
            }
        };
        if ghost {
            self.counts.ghosts += 1;
            log.event("store", format!("ghost write of version {v}"));
            self.ghosts.insert(v, Ghost { manifest: m });
            return;
        }
        self.newest = self.newest.max(v);
        self.check_published(log, &m);
        self.check_recorded_claims(log, &m);
        self.check_readers_accept(log, &m);
        let mut missing = None;
        for (i, d) in m.tgbs.iter().enumerate() {
            let step = m.first_step + i as u64;
            if step == self.steps.len() as u64 {
                self.steps.push(StepTruth {
                    key: d.key.clone(),
                    producer: d.producer_id.clone(),
                    sequence: d.sequence,
                    offset: d.source_offset,
                });
                self.key_step.insert(d.key.clone(), step);
                self.last_published
                    .insert(d.producer_id.clone(), (d.sequence, d.source_offset));
            }
            if d.visible_version == v && !self.tgbs.contains(&d.key) && missing.is_none() {
                missing = Some((step, d.key.clone()));
            }
        }
        if let Some((step, k)) = missing {
            self.violate(
                log,
                "visible-object-present",
                format!(
                    "version {v} makes {k} visible at step {step}, but the object is not stored"
                ),
            );
        }
        self.note_claims(&m);
        self.live.insert(v, m);
    }

    /// `reader-rules`: the version extends the live version before it, as every reader
    /// checks (a reader that jumps over it would not see every rule broken).
    fn check_readers_accept(&mut self, log: &EventLog, m: &Manifest) {
        let v = m.version;
        let genesis = Manifest::genesis();
        let prev = if v == 1 {
            Some(&genesis)
        } else {
            self.live.get(&(v - 1))
        };
        let Some(prev) = prev else { return };
        if let Err(e) = check_extends(prev, m) {
            let detail = format!(
                "version {v} was created, but readers refuse it after version {}: {e}: {} after {}",
                prev.version,
                summary(m),
                summary(prev)
            );
            self.violate(log, "reader-rules", detail);
        }
    }

    /// The TGBs `m` appends to the live chain (its steps from the chain's end on).
    fn appended<'m>(
        &self,
        m: &'m Manifest,
    ) -> impl Iterator<Item = (u64, &'m batchweave_manifest::TgbDescriptor)> {
        let from = self.steps.len() as u64;
        m.tgbs
            .iter()
            .enumerate()
            .map(move |(i, d)| (m.first_step + i as u64, d))
            .filter(move |(step, _)| *step >= from)
    }

    /// The ground-truth checks of the TGBs a live version appends (see the module docs).
    fn check_published(&mut self, log: &EventLog, m: &Manifest) {
        let v = m.version;
        let mut last: HashMap<String, (u64, u64)> = HashMap::new();
        let mut others = 0u64;
        let mut problem: Option<(&'static str, String)> = None;
        for (step, d) in self.appended(m) {
            let p = d.producer_id.as_str();
            let fail = |inv: &'static str, what: String| {
                Some((
                    inv,
                    format!("version {v} makes {} visible at step {step}: {what}", d.key),
                ))
            };
            let uploaded = self.mtimes.get(&d.key).copied();
            let newest_epoch = self
                .epochs
                .get(p)
                .copied()
                .unwrap_or(0)
                .max(m.producers.get(p).map_or(0, |e| e.epoch));
            let (seq, off) = last
                .get(p)
                .or_else(|| self.last_published.get(p))
                .copied()
                .unwrap_or((0, 0));
            let found = if uploaded.is_none() || !d.key.starts_with(TGB_DIR) {
                fail(
                    "published-uploaded",
                    "no such object was ever uploaded".into(),
                )
            } else if let Some(size) = self.sizes.get(&d.key)
                && *size != d.object_size
            {
                fail(
                    "published-uploaded",
                    format!(
                        "the object uploaded has {size} bytes, the descriptor says {}",
                        d.object_size
                    ),
                )
            } else if let Some(at) = self.deleted_tgbs.get(&d.key) {
                fail(
                    "published-reclaimed",
                    format!(
                        "GC deleted the object at {}ms (a version may not list what was reclaimed)",
                        at.saturating_sub(CLOCK_BASE_MS)
                    ),
                )
            } else if d.epoch < newest_epoch {
                fail(
                    "fenced-published",
                    format!(
                        "{p} epoch {} is fenced: the live chain holds {p} at epoch {newest_epoch}",
                        d.epoch
                    ),
                )
            } else if d.sequence != seq + 1 {
                fail(
                    "published-contiguous",
                    format!(
                        "{p} sequence {} follows its sequence {seq} in the live chain",
                        d.sequence
                    ),
                )
            } else if d.source_offset != off + 1 {
                fail(
                    "exactly-once",
                    format!(
                        "{p} source offset {} follows its offset {off} in the live chain (each offset is appended once, in order)",
                        d.source_offset
                    ),
                )
            } else {
                None
            };
            let cooperative = !m.committer.is_empty() && m.committer != p;
            let found = found.or_else(|| {
                let limit = m.producers.get(p).map_or(0, |e| e.max_commit_age_ms);
                let age = m.committed_at_ms.saturating_sub(uploaded.unwrap_or(0));
                (cooperative && age > limit).then(|| {
                    (
                        "coop-age",
                        format!(
                            "version {v} (committer {}) makes {} visible at step {step}, uploaded {age}ms before the version's committed_at_ms, beyond {p}'s max_commit_age of {limit}ms",
                            m.committer, d.key
                        ),
                    )
                })
            });
            if cooperative {
                others += 1;
            }
            last.insert(p.to_string(), (d.sequence, d.source_offset));
            if problem.is_none() {
                problem = found;
            }
        }
        if others > 0 {
            self.counts.coop_versions += 1;
            self.counts.published_for_others += others;
        }
        if self.held_swept(m) {
            self.counts.swept_while_held += 1;
        }
        if let Some((inv, detail)) = problem {
            self.violate(log, inv, format!("{detail}: {}", summary(m)));
        }
    }

    /// `claim-recorded`: every entry that live version `m` moves to a newer epoch on behalf
    /// of another producer (a cooperative version whose committer is not that producer)
    /// records a claim object that producer wrote, of exactly that epoch, incarnation and
    /// limit, written at most that limit before the version's `committed_at_ms` (a
    /// committer stamps its version when it judges the ages).
    fn check_recorded_claims(&mut self, log: &EventLog, m: &Manifest) {
        if m.committer.is_empty() {
            return;
        }
        let mut problem = None;
        for (id, e) in &m.producers {
            if *id == m.committer
                || e.last_commit_version != m.version
                || self.epochs.get(id).is_some_and(|b| e.epoch <= *b)
            {
                continue;
            }
            self.counts.claims_recorded += 1;
            let key = EpochClaim {
                producer_id: id.clone(),
                epoch: e.epoch,
                incarnation: e.incarnation,
                max_commit_age_ms: e.max_commit_age_ms,
            }
            .key();
            let found = match self.mtimes.get(&key) {
                None => Some(format!(
                    "version {v} (committer {c}) records {id} at epoch {epoch}, but no claim object {key} was ever written",
                    v = m.version,
                    c = m.committer,
                    epoch = e.epoch
                )),
                Some(&at) if m.committed_at_ms.saturating_sub(at) > e.max_commit_age_ms => {
                    Some(format!(
                        "version {v} (committer {c}) records {id}'s claim of epoch {epoch}, written {age}ms before the version's committed_at_ms, beyond the claim's limit of {limit}ms",
                        v = m.version,
                        c = m.committer,
                        epoch = e.epoch,
                        age = m.committed_at_ms.saturating_sub(at),
                        limit = e.max_commit_age_ms
                    ))
                }
                Some(_) => None,
            };
            if problem.is_none() {
                problem = found;
            }
        }
        if let Some(detail) = problem {
            self.violate(log, "claim-recorded", format!("{detail}: {}", summary(m)));
        }
    }

    /// Whether candidate `m` holds a TGB (one it makes visible) that GC had deleted.
    fn held_swept(&self, m: &Manifest) -> bool {
        m.tgbs
            .iter()
            .any(|d| d.visible_version == m.version && self.deleted_tgbs.contains_key(&d.key))
    }

    /// After live version `m`: the epochs it records; counts a claim that fenced an
    /// epoch whose uploads beyond its entry are stored.
    fn note_claims(&mut self, m: &Manifest) {
        for (id, e) in &m.producers {
            let before = self.epochs.get(id).copied();
            if before.is_some_and(|b| e.epoch > b) {
                let prefix = format!("{TGB_DIR}{id}/");
                let left = self
                    .tgbs
                    .range(prefix.clone()..)
                    .take_while(|k| k.starts_with(&prefix))
                    .filter_map(|k| parse_tgb_key(k))
                    .any(|(_, epoch, seq)| epoch < e.epoch && seq > e.last_sequence);
                if left {
                    self.counts.fenced_with_uploads += 1;
                }
            }
            if before.is_none_or(|b| e.epoch > b) {
                self.epochs.insert(id.clone(), e.epoch);
            }
        }
    }

    /// A create of manifest `bytes` was refused: counts what the candidate held.
    fn note_refused(&mut self, bytes: &Bytes) {
        let Ok(c) = decode_manifest(bytes, &DecodeLimits::default()) else {
            return;
        };
        if self.held_swept(&c) {
            self.counts.swept_while_held += 1;
        }
        if c.committer.is_empty() {
            return;
        }
        let Some(winner) = self.live.get(&c.version) else {
            return;
        };
        let fenced = c.tgbs.iter().any(|d| {
            d.visible_version == c.version
                && d.producer_id != c.committer
                && winner
                    .producers
                    .get(&d.producer_id)
                    .is_some_and(|e| e.epoch > d.epoch)
        });
        if fenced {
            self.counts.fenced_while_published += 1;
        }
    }
}

impl SimBackend {
    pub(crate) fn new(
        clock: Arc<dyn Clock>,
        cfg: &SimConfig,
        seed: u64,
        log: Arc<EventLog>,
        stale: TgbStale,
    ) -> Arc<Self> {
        let stale_rng = StdRng::seed_from_u64(stale.seed);
        Arc::new_cyclic(|me| Self {
            inner: Arc::new(InMemory::new()),
            clock,
            state: Arc::new(Mutex::new(State {
                mtimes: BTreeMap::new(),
                manifests: Vec::new(),
                plant: cfg.plant,
                rng: StdRng::seed_from_u64(seed),
                counts: BackendCounts::default(),
                boundary: GcBoundary::default(),
                deleted_slots: BTreeSet::new(),
                steps: Vec::new(),
                key_step: HashMap::new(),
                newest: 0,
                tgbs: BTreeSet::new(),
                marks: BTreeMap::new(),
                ghosts: BTreeMap::new(),
                shadowed: BTreeSet::new(),
                violation: None,
                sizes: HashMap::new(),
                deleted_tgbs: HashMap::new(),
                live: BTreeMap::new(),
                epochs: HashMap::new(),
                last_published: HashMap::new(),
                zombie_keys: BTreeSet::new(),
                stale,
                stale_rng,
            })),
            log,
            me: me.clone(),
            delayed_rate: cfg.delayed_create_rate.clamp(0.0, 1.0),
            max_delay: cfg.max_create_delay,
            stale_overwrite_rate: cfg.stale_overwrite_rate.clamp(0.0, 1.0),
        })
    }

    /// Every manifest write so far, in order.
    pub(crate) fn manifest_writes(&self) -> Vec<ManifestWrite> {
        lock(&self.state).manifests.clone()
    }

    pub(crate) fn counts(&self) -> BackendCounts {
        lock(&self.state).counts
    }

    /// The first violation the backend saw.
    pub(crate) fn violation(&self) -> Option<Seen> {
        lock(&self.state).violation.clone()
    }

    /// The live chain's step `step`, if committed.
    pub(crate) fn step(&self, step: u64) -> Option<StepTruth> {
        lock(&self.state).steps.get(step as usize).cloned()
    }

    /// Steps of the live chain so far.
    pub(crate) fn total(&self) -> u64 {
        lock(&self.state).steps.len() as u64
    }

    /// The highest boundary any log entry held.
    pub(crate) fn boundary(&self) -> GcBoundary {
        lock(&self.state).boundary
    }

    /// `(first_step, total_tgbs)` of live version `v`, if it was written.
    pub(crate) fn live_version_steps(&self, v: u64) -> Option<(u64, u64)> {
        self.live_version(v).map(|m| (m.first_step, m.total_tgbs))
    }

    /// Live version `v`, if it was written.
    pub(crate) fn live_version(&self, v: u64) -> Option<Manifest> {
        let st = lock(&self.state);
        let key = batchweave_manifest::manifest_key(v);
        let w = st.manifests.iter().find(|m| m.key == key && !m.ghost)?;
        decode_manifest(&w.bytes, &DecodeLimits::default()).ok()
    }

    /// Ghost writes so far.
    pub(crate) fn ghosts(&self) -> BTreeMap<u64, Ghost> {
        lock(&self.state).ghosts.clone()
    }

    /// Sets (or, with `None`, removes) a live rank's mark.
    pub(crate) fn set_mark(&self, rank: (usize, u32), mark: Option<Mark>) {
        let mut st = lock(&self.state);
        match mark {
            Some(m) => {
                st.marks.insert(rank, m);
            }
            None => {
                st.marks.remove(&rank);
            }
        }
    }

    /// Stored TGB objects with their virtual write time, and whether each is at a
    /// live-chain step (`Some(step)`).
    pub(crate) fn stored_tgbs(&self) -> Vec<(String, u64, Option<u64>)> {
        let st = lock(&self.state);
        st.tgbs
            .iter()
            .map(|k| {
                (
                    k.clone(),
                    st.mtimes.get(k).copied().unwrap_or(0),
                    st.key_step.get(k).copied(),
                )
            })
            .collect()
    }

    /// Whether producer `id` uploaded a TGB of `epoch` at or after store time `since_ms`
    /// (deleted ones included): that incarnation was alive then.
    pub(crate) fn uploaded_since(&self, id: &str, epoch: u64, since_ms: u64) -> bool {
        let st = lock(&self.state);
        let prefix = format!("{TGB_DIR}{id}/");
        st.mtimes
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .any(|(k, t)| *t >= since_ms && parse_tgb_key(k).is_some_and(|(_, e, _)| e == epoch))
            || {
                // Or its epoch claim object (cooperative opens).
                let prefix = format!("{CLAIM_DIR}{id}/{epoch:010}.");
                st.mtimes
                    .range(prefix.clone()..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .any(|(_, t)| *t >= since_ms)
            }
    }

    /// Whether `key` exists right now (ground truth, no faults, no latency).
    pub(crate) async fn exists(&self, key: &str) -> bool {
        self.inner.head(&Path::from(key)).await.is_ok()
    }

    /// Writes `key` straight into the store, unrecorded (the forger's objects).
    pub(crate) async fn put_unrecorded(&self, key: &str, bytes: Bytes, create: bool) -> Result<()> {
        let opts = PutOptions {
            mode: if create {
                PutMode::Create
            } else {
                PutMode::Overwrite
            },
            ..Default::default()
        };
        self.inner
            .put_opts(&Path::from(key), PutPayload::from(bytes), opts)
            .await
            .map(|_| ())
    }

    /// Draws whether the planted bug fires for a create of an existing key.
    fn plant_fires(&self) -> Option<PlantedBug> {
        let mut st = lock(&self.state);
        let plant = st.plant?;
        let rate = match plant {
            PlantedBug::CreateOverwrites { rate }
            | PlantedBug::FalseSuccess { rate }
            | PlantedBug::StaleBoundary { rate } => rate,
            PlantedBug::LowerBoundary => 1.0,
            // Producer and consumer plants: the store behaves.
            _ => return None,
        };
        if st.rng.random::<f64>() < rate {
            st.counts.planted_hits += 1;
            Some(plant)
        } else {
            None
        }
    }

    /// The planted stale boundary: a listing of the boundary log that misses its
    /// newest entry, so the reader takes an older boundary for the current one.
    fn maybe_stale(
        &self,
        prefix: Option<&Path>,
        s: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let log =
            prefix.is_some_and(|p| p.as_ref().starts_with(BOUNDARY_DIR.trim_end_matches('/')));
        let planted = matches!(
            lock(&self.state).plant,
            Some(PlantedBug::StaleBoundary { .. })
        );
        if !log || !planted || self.plant_fires().is_none() {
            return s;
        }
        futures::stream::once(async move {
            let mut all: Vec<Result<ObjectMeta>> = s.collect().await;
            let newest = all
                .iter()
                .enumerate()
                .filter_map(|(i, r)| r.as_ref().ok().map(|m| (i, m.location.to_string())))
                .max_by(|a, b| a.1.cmp(&b.1))
                .map(|(i, _)| i);
            if let Some(i) = newest {
                let _ = all.remove(i);
            }
            futures::stream::iter(all)
        })
        .flatten()
        .boxed()
    }

    /// The planted lowered boundary: a moment after entry `index` was created (its
    /// writer has verified it and deleted what it allows), it is rewritten with the
    /// bytes of the entry below it if it is still the newest: the log's newest entry
    /// then holds less than the one before it, as if a reclaimer had written its own
    /// stale proposal instead of the merged maximum.
    fn maybe_lower(&self, index: u64) {
        if !matches!(lock(&self.state).plant, Some(PlantedBug::LowerBoundary)) || index < 2 {
            return;
        }
        let Some(me) = self.me.upgrade() else { return };
        let delay = Duration::from_millis(lock(&self.state).rng.random_range(50..=1000));
        if self.plant_fires().is_none() {
            return;
        }
        tokio::spawn(async move {
            me.clock.sleep(delay).await;
            let dir = Path::from(BOUNDARY_DIR.trim_end_matches('/'));
            let Ok(listed) = me.inner.list(Some(&dir)).try_collect::<Vec<_>>().await else {
                return;
            };
            let newest = listed
                .iter()
                .filter_map(|m| parse_boundary_key(m.location.as_ref()))
                .max();
            let below = Path::from(batchweave_chain::boundary_key(index - 1));
            if newest != Some(index) {
                return;
            }
            let Ok(r) = me.inner.get(&below).await else {
                return;
            };
            let Ok(old) = r.bytes().await else { return };
            let key = Path::from(batchweave_chain::boundary_key(index));
            if me
                .inner
                .put_opts(&key, PutPayload::from(old), PutOptions::default())
                .await
                .is_ok()
            {
                me.log.event(
                    "plant",
                    format!("boundary entry {index} rewritten with entry {}", index - 1),
                );
            }
        });
    }

    /// Records a write that took effect (`size`: the object's, when known).
    fn stamp(&self, key: &Path, bytes: Option<Bytes>, size: Option<u64>) {
        let now = self.clock.unix_millis();
        let mut st = lock(&self.state);
        let k = key.as_ref();
        st.mtimes.insert(k.to_string(), now);
        if k.starts_with(TGB_DIR) {
            st.tgbs.insert(k.to_string());
            // Written again after GC deleted it (seed 63 of the cooperative mix: a
            // suspended host's upload, held in its network, landed after the orphan sweep
            // had deleted the first copy): the object is back, with the same bytes (one
            // key is one TGB of one epoch) and a new `last_modified`, so it is young
            // again and publishable; only a version made while it was gone lists what
            // was reclaimed.
            st.deleted_tgbs.remove(k);
            match size {
                Some(n) => st.sizes.insert(k.to_string(), n),
                None => st.sizes.remove(k),
            };
            if let Some((id, epoch, _)) = parse_tgb_key(k)
                && st.epochs.get(id).is_some_and(|e| *e > epoch)
                && st.zombie_keys.insert(k.to_string())
            {
                st.counts.zombie_uploads += 1;
            }
        }
        let Some(bytes) = bytes else { return };
        if is_manifest(key) {
            st.record_manifest(&self.log, k, bytes, now);
        } else if is_boundary(key)
            && let Ok(b) = decode_gc_boundary(&bytes, &DecodeLimits::default())
        {
            st.boundary.min_live_version = st.boundary.min_live_version.max(b.min_live_version);
            st.boundary.low_water_step = st.boundary.low_water_step.max(b.low_water_step);
        }
    }

    fn restamp(
        &self,
        s: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let state = self.state.clone();
        s.map(move |r| {
            r.map(|mut m| {
                let ms = lock(&state)
                    .mtimes
                    .get(m.location.as_ref())
                    .copied()
                    .unwrap_or(0);
                m.last_modified = Default::default();
                m.last_modified += Duration::from_millis(ms);
                m
            })
        })
        .boxed()
    }

    /// A listing of `tgb/`, maybe stale (see [`TgbStale`]): some objects written within
    /// the miss window left out, or the objects deleted within the deleted window
    /// (after `offset`, if given) shown again with their size and time. Also counts
    /// listings that show a zombie's upload.
    fn maybe_stale_tgb(
        &self,
        prefix: Option<&Path>,
        offset: Option<&Path>,
        s: BoxStream<'static, Result<ObjectMeta>>,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let Some(prefix) = prefix
            .map(|p| p.as_ref().to_string())
            .filter(|p| format!("{p}/").starts_with(TGB_DIR))
        else {
            return s;
        };
        let offset = offset.map(|o| o.as_ref().to_string());
        let state = self.state.clone();
        let clock = self.clock.clone();
        futures::stream::once(async move {
            let mut all: Vec<Result<ObjectMeta>> = s.collect().await;
            let now = clock.unix_millis();
            let mut st = lock(&state);
            let stale = st.stale.clone();
            if stale.miss_rate > 0.0 && st.stale_rng.random_bool(stale.miss_rate.clamp(0.0, 1.0)) {
                let since = now.saturating_sub(stale.miss_window_ms);
                let before = all.len();
                let mut kept = Vec::with_capacity(before);
                for r in all {
                    let recent = r.as_ref().is_ok_and(|m| {
                        st.mtimes
                            .get(m.location.as_ref())
                            .is_some_and(|t| *t >= since)
                    });
                    if !(recent && st.stale_rng.random_bool(0.5)) {
                        kept.push(r);
                    }
                }
                all = kept;
                if all.len() < before {
                    st.counts.stale_missing += 1;
                }
            }
            if stale.deleted_rate > 0.0
                && st.stale_rng.random_bool(stale.deleted_rate.clamp(0.0, 1.0))
            {
                let since = now.saturating_sub(stale.deleted_window_ms);
                let mut shown: Vec<(String, u64)> = st
                    .deleted_tgbs
                    .iter()
                    .filter(|(k, at)| {
                        **at >= since
                            && k.starts_with(&prefix)
                            && offset.as_ref().is_none_or(|o| k.as_str() > o.as_str())
                            && !st.tgbs.contains(k.as_str())
                    })
                    .map(|(k, _)| (k.clone(), st.sizes.get(k).copied().unwrap_or(0)))
                    .collect();
                shown.sort();
                if !shown.is_empty() {
                    st.counts.stale_deleted += 1;
                    st.counts.deleted_listed += shown.len() as u64;
                }
                for (k, size) in shown {
                    let ms = st.mtimes.get(&k).copied().unwrap_or(0);
                    let mut meta = ObjectMeta {
                        location: Path::from(k),
                        last_modified: Default::default(),
                        size,
                        e_tag: None,
                        version: None,
                    };
                    meta.last_modified += Duration::from_millis(ms);
                    all.push(Ok(meta));
                }
                all.sort_by(|a, b| match (a, b) {
                    (Ok(a), Ok(b)) => a.location.cmp(&b.location),
                    _ => std::cmp::Ordering::Equal,
                });
            }
            let zombie = all.iter().any(|r| {
                r.as_ref()
                    .is_ok_and(|m| st.zombie_keys.contains(m.location.as_ref()))
            });
            if zombie {
                st.counts.zombie_listed += 1;
            }
            drop(st);
            futures::stream::iter(all)
        })
        .flatten()
        .boxed()
    }

    async fn put_inner(
        &self,
        location: &Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> Result<PutResult> {
        let creating = matches!(opts.mode, PutMode::Create);
        if creating && (is_manifest(location) || is_boundary(location)) {
            let delay = {
                let mut st = lock(&self.state);
                (st.rng.random::<f64>() < self.delayed_rate).then(|| {
                    let d = st
                        .rng
                        .random_range(1..=self.max_delay.as_millis().max(1) as u64);
                    (d, st.rng.random_range(0..d))
                })
            };
            if let (Some((effect_ms, give_up_ms)), Some(me)) = (delay, self.me.upgrade()) {
                // The client gives up first; the create takes effect later.
                lock(&self.state).counts.delayed_creates += 1;
                let loc = location.clone();
                tokio::spawn(async move {
                    me.clock.sleep(Duration::from_millis(effect_ms)).await;
                    let r = me.put_now(&loc, payload, opts).await;
                    me.log.event(
                        "store",
                        format!(
                            "delayed create of {loc} took effect after {effect_ms}ms: {}",
                            if r.is_ok() { "created" } else { "refused" }
                        ),
                    );
                });
                self.clock.sleep(Duration::from_millis(give_up_ms)).await;
                return Err(transient_error(
                    "SimBackend",
                    "timeout: the client gave up on the create (it takes effect later)",
                ));
            }
        }
        self.put_now(location, payload, opts).await
    }

    async fn put_now(
        &self,
        location: &Path,
        payload: PutPayload,
        mut opts: PutOptions,
    ) -> Result<PutResult> {
        let manifest = is_manifest(location);
        let boundary = is_boundary(location);
        let creating = matches!(opts.mode, PutMode::Create);
        let mut false_success = false;
        let planted = matches!(
            lock(&self.state).plant,
            Some(PlantedBug::CreateOverwrites { .. } | PlantedBug::FalseSuccess { .. })
        );
        if planted && manifest && creating && self.inner.head(location).await.is_ok() {
            match self.plant_fires() {
                Some(PlantedBug::CreateOverwrites { .. }) => opts.mode = PutMode::Overwrite,
                Some(PlantedBug::FalseSuccess { .. }) => false_success = true,
                _ => {}
            }
        }
        if is_watermark(location)
            && !creating
            && let Ok(r) = self.inner.get(location).await
            && let Ok(old) = r.bytes().await
        {
            // Keep the bytes this overwrite replaces, for stale reads.
            let _ = self
                .inner
                .put_opts(
                    &shadow(location),
                    PutPayload::from(old),
                    PutOptions::default(),
                )
                .await;
            lock(&self.state)
                .shadowed
                .insert(location.as_ref().to_string());
        }
        let bytes = (manifest || boundary).then(|| Bytes::from(payload.clone()));
        let size = u64::try_from(payload.content_length()).ok();
        let r = self.inner.put_opts(location, payload, opts).await;
        if let (Some(b), Err(e)) = (&bytes, &r)
            && manifest
            && creating
            && is_conflict_error(e)
        {
            lock(&self.state).note_refused(b);
        }
        if let (Some(b), Err(e)) = (&bytes, &r)
            && manifest
            && sim_log()
            && let Ok(m) = decode_manifest(b, &DecodeLimits::default())
        {
            eprintln!(
                "{:>9}ms store  refused {}: {e}",
                self.clock.unix_millis().saturating_sub(CLOCK_BASE_MS),
                summary(&m)
            );
        }
        match r {
            Ok(r) => {
                self.stamp(location, bytes, size);
                if let Some(index) = parse_boundary_key(location.as_ref()) {
                    self.maybe_lower(index);
                }
                Ok(r)
            }
            Err(e) if false_success && is_conflict_error(&e) => Ok(PutResult {
                e_tag: None,
                version: None,
                extensions: Default::default(),
            }),
            Err(e) => Err(e),
        }
    }

    async fn get_inner(&self, location: &Path, options: GetOptions) -> Result<GetResult> {
        let stale = is_watermark(location) && {
            let mut st = lock(&self.state);
            let hit = st.shadowed.contains(location.as_ref())
                && st.rng.random::<f64>() < self.stale_overwrite_rate;
            if hit {
                st.counts.stale_overwrites += 1;
            }
            hit
        };
        if stale
            && let Ok(mut r) = self
                .inner
                .get_opts(&shadow(location), options.clone())
                .await
        {
            r.meta.location = location.clone();
            return Ok(r);
        }
        let mut r = self.inner.get_opts(location, options).await?;
        // The store's virtual time of the write, as listings report it.
        if let Some(ms) = lock(&self.state).mtimes.get(location.as_ref()).copied() {
            r.meta.last_modified = Default::default();
            r.meta.last_modified += Duration::from_millis(ms);
        }
        Ok(r)
    }
}

impl ObjectStore for SimBackend {
    fn put_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        payload: PutPayload,
        opts: PutOptions,
    ) -> BoxFut<'async_trait, PutResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.put_inner(location, payload, opts))
    }

    fn put_multipart_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        opts: PutMultipartOptions,
    ) -> BoxFut<'async_trait, Box<dyn MultipartUpload>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            // The object appears at completion; stamping at the start is
            // early, which only makes the orphan sweep more aggressive.
            self.stamp(location, None, None);
            self.inner.put_multipart_opts(location, opts).await
        })
    }

    fn get_opts<'life0, 'life1, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        options: GetOptions,
    ) -> BoxFut<'async_trait, GetResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(self.get_inner(location, options))
    }

    fn get_ranges<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        location: &'life1 Path,
        ranges: &'life2 [Range<u64>],
    ) -> BoxFut<'async_trait, Vec<Bytes>>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.get_ranges(location, ranges)
    }

    fn delete_stream(
        &self,
        locations: BoxStream<'static, Result<Path>>,
    ) -> BoxStream<'static, Result<Path>> {
        let state = self.state.clone();
        let log = self.log.clone();
        let inner = self.inner.clone();
        let clock = self.clock.clone();
        let checked = locations
            .then(move |r| {
                let state = state.clone();
                let log = log.clone();
                let inner = inner.clone();
                let now = clock.unix_millis();
                async move {
                    if let Ok(p) = &r {
                        let shadowed = {
                            let mut st = lock(&state);
                            st.check_delete(&log, p.as_ref(), now);
                            st.shadowed.remove(p.as_ref())
                        };
                        if shadowed {
                            let _ = inner.delete(&shadow(p)).await;
                        }
                    }
                    r
                }
            })
            .boxed();
        self.inner.delete_stream(checked)
    }

    fn list(&self, prefix: Option<&Path>) -> BoxStream<'static, Result<ObjectMeta>> {
        let s = self.maybe_stale(prefix, self.restamp(self.inner.list(prefix)));
        self.maybe_stale_tgb(prefix, None, s)
    }

    fn list_with_offset(
        &self,
        prefix: Option<&Path>,
        offset: &Path,
    ) -> BoxStream<'static, Result<ObjectMeta>> {
        let s = self.maybe_stale(
            prefix,
            self.restamp(self.inner.list_with_offset(prefix, offset)),
        );
        self.maybe_stale_tgb(prefix, Some(offset), s)
    }

    fn list_with_delimiter<'life0, 'life1, 'async_trait>(
        &'life0 self,
        prefix: Option<&'life1 Path>,
    ) -> BoxFut<'async_trait, ListResult>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        Self: 'async_trait,
    {
        self.inner.list_with_delimiter(prefix)
    }

    fn copy_opts<'life0, 'life1, 'life2, 'async_trait>(
        &'life0 self,
        from: &'life1 Path,
        to: &'life2 Path,
        options: CopyOptions,
    ) -> BoxFut<'async_trait, ()>
    where
        'life0: 'async_trait,
        'life1: 'async_trait,
        'life2: 'async_trait,
        Self: 'async_trait,
    {
        Box::pin(async move {
            self.inner.copy_opts(from, to, options).await?;
            self.stamp(to, None, None);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    //! The ground-truth rules of a live write, each on a version built to break it (the
    //! planted producer bugs rarely get such a version past the producer's own
    //! validation, so these show the backend refuses it if one ever does).

    use batchweave_manifest::{ProducerState, TgbDescriptor, described_tgb_key};
    use batchweave_store::TokioClock;

    use super::*;

    const NOW: u64 = CLOCK_BASE_MS + 100_000;

    fn tgb(p: &str, epoch: u64, seq: u64, offset: u64, version: u64) -> TgbDescriptor {
        let mut d = TgbDescriptor {
            object_size: 100 + 40 + 32,
            dp: 1,
            cp: 1,
            footer_offset: 100,
            footer_length: 40,
            footer_crc32: 7,
            producer_id: p.into(),
            epoch,
            sequence: seq,
            visible_version: version,
            payload_bytes: 100,
            source_offset: offset,
            ..Default::default()
        };
        d.key = described_tgb_key(&d);
        d
    }

    fn entry(epoch: u64, last: &TgbDescriptor, version: u64, age_ms: u64) -> ProducerState {
        ProducerState {
            epoch,
            incarnation: 1,
            last_sequence: last.sequence,
            tgbs_committed: last.sequence,
            source_offset: last.source_offset,
            last_commit_version: version,
            max_commit_age_ms: age_ms,
            ..Default::default()
        }
    }

    /// A backend whose chain holds producer `a` at `(sequence 1, offset 1)` of epoch
    /// `epoch`, with `uploads` stored (written at `NOW - 500`).
    fn state(epoch: u64, uploads: &[&TgbDescriptor]) -> (Arc<SimBackend>, Arc<EventLog>) {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_base(CLOCK_BASE_MS));
        let log = Arc::new(EventLog::new(clock.clone()));
        let b = SimBackend::new(
            clock,
            &SimConfig::default(),
            1,
            log.clone(),
            TgbStale::default(),
        );
        {
            let mut st = lock(&b.state);
            st.epochs.insert("a".into(), epoch);
            st.last_published.insert("a".into(), (1, 1));
            for d in uploads {
                st.mtimes.insert(d.key.clone(), NOW - 500);
                st.tgbs.insert(d.key.clone());
                st.sizes.insert(d.key.clone(), d.object_size);
            }
        }
        (b, log)
    }

    /// Version 2 committed by `committer` at `NOW`, appending `new` (`a`'s entry at epoch
    /// `epoch`, limit `age_ms`).
    fn version(committer: &str, epoch: u64, new: TgbDescriptor, age_ms: u64) -> Manifest {
        let mut producers = BTreeMap::new();
        producers.insert("a".to_string(), entry(epoch, &new, 2, age_ms));
        Manifest {
            version: 2,
            first_step: 1,
            total_tgbs: 2,
            tgbs: vec![new],
            producers,
            committed_at_ms: NOW,
            committer: committer.into(),
            ..Default::default()
        }
    }

    fn verdict(b: &SimBackend, log: &EventLog, m: &Manifest) -> Option<&'static str> {
        let mut st = lock(&b.state);
        st.steps = vec![StepTruth {
            key: String::new(),
            producer: "a".into(),
            sequence: 1,
            offset: 1,
        }];
        st.check_published(log, m);
        st.violation.as_ref().map(|s| s.invariant)
    }

    #[test]
    fn the_next_upload_of_the_current_epoch_passes() {
        let d = tgb("a", 2, 2, 2, 2);
        let (b, log) = state(2, &[&d]);
        assert_eq!(verdict(&b, &log, &version("c", 2, d, 1000)), None);
    }

    #[test]
    fn a_gap_is_refused() {
        let d = tgb("a", 2, 3, 2, 2);
        let (b, log) = state(2, &[&d]);
        assert_eq!(
            verdict(&b, &log, &version("c", 2, d, 1000)),
            Some("published-contiguous")
        );
    }

    #[test]
    fn a_fenced_epoch_is_refused() {
        let d = tgb("a", 1, 2, 2, 2);
        let (b, log) = state(2, &[&d]);
        assert_eq!(
            verdict(&b, &log, &version("c", 2, d, 1000)),
            Some("fenced-published")
        );
    }

    #[test]
    fn a_lost_or_repeated_offset_is_refused() {
        let d = tgb("a", 2, 2, 3, 2);
        let (b, log) = state(2, &[&d]);
        assert_eq!(
            verdict(&b, &log, &version("c", 2, d, 1000)),
            Some("exactly-once")
        );
    }

    #[test]
    fn an_upload_never_made_or_of_another_size_is_refused() {
        let d = tgb("a", 2, 2, 2, 2);
        let (b, log) = state(2, &[]);
        assert_eq!(
            verdict(&b, &log, &version("c", 2, d.clone(), 1000)),
            Some("published-uploaded")
        );
        let (b, log) = state(2, &[&d]);
        lock(&b.state).sizes.insert(d.key.clone(), 1);
        assert_eq!(
            verdict(&b, &log, &version("c", 2, d, 1000)),
            Some("published-uploaded")
        );
    }

    #[test]
    fn a_swept_upload_is_refused_until_it_is_stored_again() {
        let d = tgb("a", 2, 2, 2, 2);
        let (b, log) = state(2, &[&d]);
        lock(&b.state).deleted_tgbs.insert(d.key.clone(), NOW - 100);
        assert_eq!(
            verdict(&b, &log, &version("c", 2, d.clone(), 1000)),
            Some("published-reclaimed")
        );
        // The producer's upload lands again after the sweep (a request held while its
        // host was suspended): the object is back, young, and publishable.
        let (b, log) = state(2, &[&d]);
        lock(&b.state).deleted_tgbs.insert(d.key.clone(), NOW - 100);
        b.stamp(&Path::from(d.key.as_str()), None, Some(d.object_size));
        lock(&b.state).mtimes.insert(d.key.clone(), NOW - 50);
        assert_eq!(verdict(&b, &log, &version("c", 2, d, 1000)), None);
    }

    #[test]
    fn a_cooperative_publication_of_an_old_upload_is_refused() {
        let d = tgb("a", 2, 2, 2, 2);
        // Uploaded 500 ms before the version: within 500 ms passes, 499 does not.
        let (b, log) = state(2, &[&d]);
        assert_eq!(verdict(&b, &log, &version("c", 2, d.clone(), 500)), None);
        let (b, log) = state(2, &[&d]);
        assert_eq!(
            verdict(&b, &log, &version("c", 2, d.clone(), 499)),
            Some("coop-age")
        );
        // The owner's own commit is not bound by the listing rule (it checks its own ages).
        let (b, log) = state(2, &[&d]);
        assert_eq!(verdict(&b, &log, &version("", 2, d, 499)), None);
    }

    #[test]
    fn a_version_readers_refuse_is_a_violation_when_created() {
        let (b, log) = state(2, &[]);
        let mut st = lock(&b.state);
        let prev = Manifest {
            version: 1,
            ..Default::default()
        };
        st.live.insert(1, prev);
        // Version 2 changes no entry: `single-commit`.
        let m = Manifest {
            version: 2,
            ..Default::default()
        };
        st.check_readers_accept(&log, &m);
        assert_eq!(
            st.violation.as_ref().map(|s| s.invariant),
            Some("reader-rules")
        );
    }
}
