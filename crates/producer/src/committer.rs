//! The commit loop (paper Algorithm 1 with DESIGN.md's additions).
//!
//! ```text
//!            append() ──TGB refs──▶ pending ──policy says go──▶ attempt
//!                                                              │
//!   rebase(base, pending, low_water) ─▶ candidate v+1 ─▶ create manifests/<v+1>
//!        ▲                                                      │
//!        │  Conflict / Ambiguous: newest ≥ v+1, commit_status   │ Ok
//!        │    Committed  ─▶ it was ours (lost reply): done      ▼
//!        │    Fenced     ─▶ stop                     read gc/boundary
//!        └─── NotCommitted ◀── ghost (v+1 < min_live) ──┘  else: done
//! ```

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use batchweave_chain::Follower;
use batchweave_dac::{AttemptOutcome, CommitPolicy, Decision, Slot};
use batchweave_manifest::{
    CLAIM_DIR, CommitStatus, EpochClaim, Manifest, Pending, ProducerState, TGB_DIR, TgbDescriptor,
    commit_status, descriptor_from_key, manifest_key, parse_described_tgb_key,
    rebase_cooperative_with_claims, tgb_key_after, try_encode_manifest,
};
use batchweave_store::{ObjectInfo, StoreError, StreamStore};
use futures::{StreamExt, TryStreamExt};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::{Semaphore, mpsc, oneshot};
use tracing::Instrument;

use crate::ProducerError;
use crate::planted::planted;
use crate::settings::{FailPoint, FailPoints, ProducerSettings};
use crate::shared::Shared;

/// Messages from the producer handle to its committer.
pub(crate) enum Msg {
    /// A TGB reference and when its upload started, in wall-clock Unix
    /// milliseconds (ages must count time the host spent suspended).
    Tgb(TgbDescriptor, u64),
    Flush(oneshot::Sender<Result<(), ProducerError>>),
}

/// Identity of this incarnation.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub(crate) id: String,
    pub(crate) epoch: u64,
    pub(crate) incarnation: u64,
}

pub(crate) struct Committer {
    pub(crate) store: StreamStore,
    pub(crate) me: Identity,
    pub(crate) settings: ProducerSettings,
    pub(crate) fail: FailPoints,
    /// The base: the newest live version this producer has seen, and the boundary.
    pub(crate) follower: Follower,
    pub(crate) pending: VecDeque<(TgbDescriptor, u64)>,
    pub(crate) policy: Box<dyn CommitPolicy>,
    pub(crate) rng: StdRng,
    pub(crate) shared: Arc<Shared>,
    pub(crate) permits: Arc<Semaphore>,
    /// The version of the last create this producer sent that may have taken effect
    /// (one refused with a conflict did not, and is forgotten): an entry that a later
    /// read shows advanced at another version was advanced by another producer's commit.
    pub(crate) last_sent: Option<u64>,
    /// The `committed_at_ms` of that create's candidate: an entry that records the same
    /// version at another `last_commit_ms` was advanced by another producer's commit of
    /// that version number (one that recorded our epoch claim, say).
    pub(crate) last_sent_ms: u64,
    /// A create was sent and its outcome is not yet resolved: the attempt is counted in
    /// [`ProducerStats::attempts`](crate::ProducerStats) together with its outcome (in the
    /// same update as the success, if it committed), so that a snapshot taken while an
    /// attempt is in flight never shows more successes than attempts.
    pub(crate) unresolved_attempt: bool,
    /// The listing behind the last cooperative attempt's offers and when it was taken
    /// (wall-clock Unix milliseconds), until an attempt commits: a retry after a conflict
    /// within [`OFFERS_REUSE`] reuses it rather than listing `tgb/` again.
    pub(crate) offers_listing: Option<(u64, Listing)>,
    /// The fragile window of the last create sent, for the claim's backoff.
    pub(crate) last_window: Duration,
}

/// GETs of the next version a refresh makes before it jumps to the newest with a
/// listing (which costs a LIST, a GET of the listed version and a GET confirming it is
/// the newest): with at most this many versions created since the base, stepping is
/// cheaper or no dearer.
const REFRESH_STEPS: usize = 3;

/// How old the boundary may be when an attempt starts; an older one is re-read first,
/// outside the fragile window. A candidate drops the descriptors below the boundary's
/// low-water step as this producer last read it, and the boundary is otherwise read
/// only after a create: under DAC that read is a whole commit gap old at the next
/// attempt (minutes at 128 producers), so every version kept about a gap's worth of
/// TGBs that GC had already released (up to about 100k descriptors per version at 128
/// producers in `bench visibility --sim` with a trimmer every second, about 8k with
/// this). Costs at most one GET per second per producer.
const BOUNDARY_MAX_AGE: Duration = Duration::from_secs(1);

/// The claim backoff's cap, in fragile windows of the last attempt, when that is more
/// than a second; never more than [`CLAIM_BACKOFF_MAX`].
const CLAIM_BACKOFF_WINDOWS: u32 = 8;

/// The claim backoff's largest cap: one create that took long (a store timeout, a host
/// suspended in the middle of it) must not hold the next claim back for minutes.
const CLAIM_BACKOFF_MAX: Duration = Duration::from_secs(10);

/// The longest wait before a claim's retry after `conflicts` conflicts in a row, the last
/// create's fragile window having been `window`: 5 ms doubling per conflict, capped at
/// [`CLAIM_BACKOFF_WINDOWS`] windows within 1 s and [`CLAIM_BACKOFF_MAX`].
fn claim_backoff_ceiling(conflicts: u32, window: Duration) -> Duration {
    let cap = window
        .saturating_mul(CLAIM_BACKOFF_WINDOWS)
        .clamp(Duration::from_secs(1), CLAIM_BACKOFF_MAX);
    Duration::from_millis(5)
        .saturating_mul(1u32 << conflicts.min(16))
        .min(cap)
}

/// How long a cooperative attempt's listing of `tgb/` serves the retries that follow a
/// conflict. Every attempt lists `tgb/`, each conflicting claim retry of a pool opening
/// at once included (on a local directory `object_store` stats every entry a listing
/// returns: 256 producers opening together spent about 45% of their CPU in 5,879
/// listings for 263 commits). A listing up to this old is as safe as a fresh one: each attempt filters it against its refreshed base (sequence,
/// epoch, and age by each object's `last_modified` against the attempt's own clock), and
/// a listing that misses the newest uploads or still shows swept orphans is what any
/// eventually consistent listing may return (the simulation serves such listings, up to
/// 3 s stale). It only delays the newest uploads until a fresh listing finds them, and
/// a commit clears it.
const OFFERS_REUSE: Duration = Duration::from_secs(1);

/// The longest a full buffer or a cooperative flush waits for others to publish it, in
/// rounds, however busy the chain is (others that commit and never list our uploads must
/// not hold them back for long).
const FULL_WAIT_ROUNDS: u32 = 8;

/// A full buffer's (or a cooperative flush's) wait for others to publish it
/// ([`Committer::when_full`]).
#[derive(Debug, Clone, Copy)]
struct FullWait {
    /// When the wait began.
    since: tokio::time::Instant,
    /// When it last saw the chain advance.
    progress: tokio::time::Instant,
    /// The newest version it has seen.
    version: u64,
    /// How long it waits without seeing the chain advance.
    patience: Duration,
}

/// An entry whose `last_commit_ms` is older than this, against the base's
/// `committed_at_ms`, is not counted as an active producer by a cooperative cadence.
const ACTIVE_WINDOW_MS: u64 = 60_000;

/// Keys per listing request (S3's and GCS's page size; Azure's default is larger).
const LIST_PAGE: usize = 1000;

/// Per-producer listings of a cooperative attempt in flight at once.
const LIST_CONCURRENCY: usize = 32;

/// What a cooperative attempt listed: `tgb/` (or its active producers' parts) and
/// `claims/`.
pub(crate) struct Listing {
    tgbs: Vec<ObjectInfo>,
    claims: Vec<ObjectInfo>,
}

/// Reads of a version that the held chain lists, before an open-race check takes it
/// for deleted.
const VERSION_REREADS: usize = 3;

/// Epoch claims one version records at most (each adds or changes one entry).
const MAX_CLAIMS_PER_VERSION: usize = 1024;

/// A candidate version ready to be created: it commits the first `n` pending TGBs (the
/// last of them, or the entry's, has sequence `last_seq`).
struct Proposal {
    candidate: Manifest,
    n: usize,
    last_seq: u64,
    /// Other producers' TGBs the candidate publishes.
    others: usize,
    /// Other producers' epoch claims the candidate records.
    claims: usize,
}

/// What [`Committer::prepare`] found.
enum Prepared {
    Send(Proposal),
    /// Nothing to send: the attempt's outcome as it stands.
    Done(Attempt),
}

/// Result of one attempt.
enum Attempt {
    Committed,
    Conflict,
    /// `max_lag` leaves no room on the current base: nothing was sent.
    Lagged,
}

impl Committer {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        store: StreamStore,
        me: Identity,
        settings: ProducerSettings,
        fail: FailPoints,
        follower: Follower,
        shared: Arc<Shared>,
        permits: Arc<Semaphore>,
    ) -> Self {
        let seed = settings
            .seed
            .map_or_else(|| StdRng::from_os_rng().random(), |s| s ^ 0x00c0_ffee);
        Self {
            policy: settings.policy.build(),
            rng: StdRng::seed_from_u64(seed),
            store,
            me,
            settings,
            fail,
            follower,
            pending: VecDeque::new(),
            shared,
            permits,
            last_sent: None,
            last_sent_ms: 0,
            unresolved_attempt: false,
            offers_listing: None,
            last_window: Duration::ZERO,
        }
    }

    fn crash_if(&self, p: FailPoint) -> Result<(), ProducerError> {
        if self.fail.fires(p) {
            Err(ProducerError::Crashed(p))
        } else {
            Ok(())
        }
    }

    /// Commits a version with no TGBs that records this incarnation's epoch
    /// (the claim that fences older incarnations). Retries until it lands.
    /// `opened_at` is the store's time when the open began, before its first read.
    pub(crate) async fn claim(&mut self, opened_at: i64) -> Result<(), ProducerError> {
        let mut bumps = 0;
        let mut conflicts: u32 = 0;
        self.put_claim_object().await?;
        loop {
            match self.attempt(0).await {
                Ok(Attempt::Committed) => return Ok(()),
                Ok(_) => {
                    // Many producers opening at once would otherwise retry in
                    // lockstep (O(N^2) creates): exponential backoff with full
                    // jitter from the seeded RNG, capped at one second or, when
                    // contention stretches the fragile window (on a machine the
                    // claimers share, their attempts queue for its cores), at
                    // CLAIM_BACKOFF_WINDOWS of it, up to CLAIM_BACKOFF_MAX: 256 producers opening on a local
                    // directory on 2 cores stretched it to seconds, and a one-second
                    // cap kept them attempting faster than anyone could commit (5,732
                    // attempts for 281 commits, 138 s until the last had claimed).
                    conflicts = conflicts.saturating_add(1);
                    let ceiling = claim_backoff_ceiling(conflicts, self.last_window);
                    let wait = ceiling.mul_f64(self.rng.random::<f64>());
                    self.store.clock().sleep(wait).await;
                }
                // The epoch we picked is taken by another incarnation. At our own
                // epoch, written after this open began: another process read the
                // same chain and claimed first (an open at the same moment): the
                // first claim wins and this one fails at open, loudly, rather than
                // fencing the winner a moment later. At a higher epoch, or at ours
                // by an incarnation whose last commit precedes this open, our first
                // view was stale (on a store that keeps read-after-write, a fresh view
                // always shows the newest epoch): claim the next one, as any restart
                // does.
                Err(ProducerError::Fenced { theirs, .. }) if theirs.0 >= self.me.epoch => {
                    let concurrent =
                        theirs.0 == self.me.epoch && self.committed_since(opened_at).await?;
                    if concurrent || bumps >= 8 {
                        return Err(ProducerError::OpenRace {
                            producer_id: self.me.id.clone(),
                            epoch: theirs.0,
                        });
                    }
                    bumps += 1;
                    self.me.epoch = theirs.0 + 1;
                    self.put_claim_object().await?;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// This incarnation's epoch claim as others may record it (cooperative commits).
    fn epoch_claim(&self) -> EpochClaim {
        EpochClaim {
            producer_id: self.me.id.clone(),
            epoch: self.me.epoch,
            incarnation: self.me.incarnation,
            max_commit_age_ms: max_commit_age_ms(&self.settings),
        }
    }

    /// A cooperative producer makes its epoch claim discoverable through the store
    /// before it claims itself (`docs/protocol.md` section 14): any cooperative attempt
    /// that lists it may record it, so a pool that opens at once is recorded by a few
    /// creates rather than one create per producer. The object only lets others record
    /// the claim sooner: if it cannot be written, the producer's own claim still lands.
    async fn put_claim_object(&mut self) -> Result<(), ProducerError> {
        if !self.policy.cooperative() {
            return Ok(());
        }
        let key = self.epoch_claim().key();
        match self.store.create(&key, bytes::Bytes::new()).await {
            // Taken: our own create's earlier try (the key holds our random incarnation).
            Ok(()) | Err(StoreError::Conflict { .. } | StoreError::Ambiguous { .. }) => {}
            Err(e) => {
                tracing::warn!(producer = %self.me.id, key, error = %e, "epoch claim object not written; claiming alone");
                return Ok(());
            }
        }
        self.shared.stats_mut(|s| s.claim_objects += 1);
        self.crash_if(FailPoint::AfterClaimObject)
    }

    /// Whether the incarnation the held version records for our id committed at or
    /// after store time `t` (by the `last_modified` of its last commit's version; a
    /// version GC deleted, or below the boundary, is older than any open in progress).
    /// When that version is another producer's cooperative commit, which published the
    /// incarnation's uploads, it dates nothing the incarnation did: the `last_modified` of
    /// the newest upload it published does. Ties count as after:
    /// a store with one-second timestamps then reports a race, never hides one.
    async fn committed_since(&mut self, t: i64) -> Result<bool, ProducerError> {
        let current = self.follower.current().clone();
        let Some(e) = current.producers.get(&self.me.id) else {
            return Ok(false);
        };
        let (v, epoch) = (e.last_commit_version, e.epoch);
        // Below the boundary the version was reclaimed (older than any open in progress,
        // as a deleted one), even when a ghost fills its slot now: the slot's
        // `last_modified` is then the ghost's, this very open's claim among them (seeds
        // 9268 and 6858 of the simulation: a restart long after its predecessor's last
        // commit, on a stale first view, claims the predecessor's epoch, whose version GC
        // had deleted; its claim lands in that slot as a ghost and was taken for a
        // concurrent open's).
        if v < self.follower.boundary().min_live_version {
            return Ok(false);
        }
        // Seed 8354: a crashed incarnation's uploads, published by a cooperative commit
        // after this open began, were taken for a concurrent open's claim.
        let at_v = if current.version == v {
            Some(current.clone())
        } else {
            // The held chain lists `v`, so a read that finds nothing is stale or comes
            // after GC deleted it: read again, and if it is still not there, treat it as
            // deleted (older than this open). Seed 7646 of the simulation: a stale miss
            // was dated by the version's own `last_modified`, as if our id had created
            // it, while another producer's cooperative commit had recorded a dead
            // incarnation's epoch claim there, and a restart was taken for a concurrent
            // open.
            let mut read = None;
            for _ in 0..VERSION_REREADS {
                read = self.follower.chain().read_version(v).await?;
                if read.is_some() {
                    break;
                }
            }
            match read {
                Some(m) => Some(Arc::new(m)),
                None => return Ok(false),
            }
        };
        let key = match at_v.filter(|m| !m.committer.is_empty() && m.committer != self.me.id) {
            Some(m) => {
                let newest = m
                    .tgbs
                    .iter()
                    .filter(|d| {
                        d.producer_id == self.me.id && d.epoch == epoch && d.visible_version == v
                    })
                    .max_by_key(|d| d.sequence);
                match newest {
                    Some(d) => d.key.clone(),
                    // Another producer recorded the incarnation's epoch claim: its claim
                    // object dates it.
                    None => EpochClaim {
                        producer_id: self.me.id.clone(),
                        epoch,
                        incarnation: e.incarnation,
                        max_commit_age_ms: e.max_commit_age_ms,
                    }
                    .key(),
                }
            }
            None => manifest_key(v),
        };
        let store = self.store.clone();
        match store.head(&key).await {
            Ok(info) => Ok(info.last_modified_ms >= t),
            Err(StoreError::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    /// Pending TGBs that the base already holds (a commit whose reply was
    /// lost and that a later read revealed) are done: never sent again.
    fn absorb_committed(&mut self) {
        if self.fail.fires(FailPoint::SkipStateMapCheck) {
            return;
        }
        let Some(e) = self.follower.current().producers.get(&self.me.id) else {
            return;
        };
        if e.epoch != self.me.epoch
            || e.incarnation != self.me.incarnation
            || self.follower.current().version < self.follower.boundary().min_live_version
        {
            return;
        }
        let last = e.last_sequence;
        let k = self
            .pending
            .iter()
            .take_while(|(d, _)| d.sequence <= last)
            .count();
        if k > 0 {
            if self.created_by_us(e) {
                self.shared.stats_mut(|s| s.lost_replies_recovered += 1);
                self.finish_commit(k, true);
            } else {
                // Another producer's cooperative commit published them.
                self.finish_commit(k, false);
            }
        }
    }

    /// Whether version `v`, which our entry names as its last commit, is the create we
    /// sent last (a lost reply), rather than another producer's cooperative commit of
    /// the same version number that published our batch. The held version tells when it
    /// is `v`: a cooperative version names its committer. A later one does not, and
    /// reading `v` back would cost a request, so then the number and the entry's
    /// `last_commit_ms` (our candidate's time, or the other committer's) decide
    /// (statistics only: either way the batch is committed once).
    fn created_by_us(&self, e: &ProducerState) -> bool {
        let v = e.last_commit_version;
        let held = self.follower.current();
        self.last_sent == Some(v)
            && if held.version == v {
                held.committer.is_empty() || held.committer == self.me.id
            } else {
                e.last_commit_ms == self.last_sent_ms
            }
    }

    /// How many pending TGBs `max_lag` lets this attempt commit.
    fn lag_allowance(&self, want: usize) -> usize {
        match self.settings.max_lag {
            None => want,
            Some(lag) => {
                let limit = self.follower.boundary().low_water_step.saturating_add(lag);
                let room = limit.saturating_sub(self.follower.current().total_tgbs);
                want.min(usize::try_from(room).unwrap_or(usize::MAX))
            }
        }
    }

    /// One commit attempt of up to `want` pending TGBs (0: an epoch claim): prepare a
    /// candidate on the refreshed base, create it, resolve what the create's outcome
    /// means, and tell the policy.
    async fn attempt(&mut self, want: usize) -> Result<Attempt, ProducerError> {
        let clock = self.store.clock().clone();
        if self
            .follower
            .boundary_age()
            .is_none_or(|age| age > BOUNDARY_MAX_AGE)
        {
            self.follower.refresh_boundary().await?;
        }
        let t0 = clock.now();
        let proposal = match self.prepare(want).await? {
            Prepared::Send(p) => p,
            Prepared::Done(a) => return Ok(a),
        };
        let v = proposal.candidate.version;
        let span =
            tracing::debug_span!("commit", producer = %self.me.id, version = v, tgbs = proposal.n);
        let bytes = try_encode_manifest(&proposal.candidate, &self.settings.limits)?;
        self.crash_if(FailPoint::BeforeCreate)?;
        let earlier = (self.last_sent, self.last_sent_ms);
        self.last_sent = Some(v);
        self.last_sent_ms = proposal.candidate.committed_at_ms;
        let created = self
            .store
            .create(&manifest_key(v), bytes)
            .instrument(span.clone())
            .await;
        if matches!(created, Err(StoreError::Conflict { .. })) {
            // Refused: this create had no effect (creates are never retried, so a
            // conflict is not our own earlier request), and the version that took the
            // number is never ours, even if it carries the same commit time.
            (self.last_sent, self.last_sent_ms) = earlier;
        }
        self.crash_if(FailPoint::AfterCreate)?;
        // The fragile window: from reading the current version to the end of the create.
        let tau = clock.now().saturating_duration_since(t0);
        self.last_window = tau;
        self.shared.stats_mut(|s| s.commit_time += tau);
        self.unresolved_attempt = true;
        let outcome = self.resolve(created, proposal, &span).await;
        // Not counted yet if it did not commit (a conflict, a ghost, an error).
        if std::mem::take(&mut self.unresolved_attempt) {
            self.shared.stats_mut(|s| s.attempts += 1);
        }
        let outcome = outcome?;
        if matches!(outcome, Attempt::Committed) {
            self.offers_listing = None;
        }
        self.learn(&outcome, tau);
        Ok(outcome)
    }

    /// The candidate version of an attempt of up to `want` pending TGBs, built on the
    /// refreshed base, or the attempt's outcome when there is nothing to send.
    async fn prepare(&mut self, want: usize) -> Result<Prepared, ProducerError> {
        // TryCommit starts from the current version (paper 5.2): the fragile
        // window is this probe plus the create, not the whole commit gap.
        self.refresh().await?;
        self.absorb_committed();
        if want == 0 && self.claim_recorded() {
            self.shared.stats_mut(|s| s.claims_recorded_by_others += 1);
            return Ok(Prepared::Done(Attempt::Committed));
        }
        // The allowance is computed on the refreshed base (it may be longer).
        let n = self.lag_allowance(want.min(self.pending.len()));
        if want > 0 && self.pending.is_empty() {
            return Ok(Prepared::Done(Attempt::Committed));
        }
        if want > 0 && n == 0 {
            return Ok(Prepared::Done(Attempt::Lagged));
        }
        // Ages by wall-clock time, which keeps running while the host is suspended
        // (a monotonic clock stops, and GC may sweep the upload meanwhile).
        let clock = self.store.clock().clone();
        let now_ms = clock.unix_millis();
        for (d, uploaded_ms) in self.pending.iter().take(n) {
            let age = Duration::from_millis(now_ms.saturating_sub(*uploaded_ms));
            if age > self.settings.max_commit_age {
                return Err(ProducerError::Expired {
                    key: d.key.clone(),
                    age,
                });
            }
        }
        let tgbs: Vec<TgbDescriptor> = self
            .pending
            .iter()
            .take(n)
            .map(|(d, _)| d.clone())
            .collect();
        // An epoch claim (no TGBs) keeps the entry's sequence and offset.
        let entry = self.follower.current().producers.get(&self.me.id);
        let (last_seq, source_offset) = match tgbs.last() {
            Some(d) => (d.sequence, d.source_offset),
            None => entry.map_or((0, 0), |e| (e.last_sequence, e.source_offset)),
        };
        let pending = Pending {
            producer_id: self.me.id.clone(),
            epoch: self.me.epoch,
            incarnation: self.me.incarnation,
            tgbs,
            source_offset,
            now_ms: clock.unix_millis(),
        };
        // A cooperative commit also publishes other producers' next uploads, within
        // what `max_lag` leaves after our own; an epoch claim too: a claim is a create
        // of its own, and a pool opening at once makes one per fragile window for a
        // while (256 producers on a local directory: 94 s until the last had claimed),
        // during which nothing else committed and the open producers' uploads waited.
        let (offers, claims) = if self.policy.cooperative() {
            self.offers(now_ms).await?
        } else {
            (Vec::new(), Vec::new())
        };
        let room = self.lag_allowance(usize::MAX).saturating_sub(n);
        let producer_room = usize::try_from(self.settings.limits.max_producers)
            .unwrap_or(usize::MAX)
            .saturating_sub(self.follower.current().producers.len() + 1)
            .min(MAX_CLAIMS_PER_VERSION);
        let (mut candidate, others, recorded) = rebase_cooperative_with_claims(
            self.follower.current(),
            &pending,
            &offers,
            &claims,
            room,
            producer_room,
            self.follower.boundary().low_water_step,
        )
        .map_err(ProducerError::from_rebase)?;
        if !claims.is_empty() {
            plant_claims(
                &mut candidate,
                self.follower.current(),
                &claims,
                &self.me.id,
            );
        }
        if !offers.is_empty() {
            plant_publications(
                &mut candidate,
                self.follower.current(),
                &offers,
                &self.me.id,
            );
        }
        // Record this producer's limit, so that GC can refuse an orphan grace
        // period that could sweep an upload before this producer commits it.
        if let Some(e) = candidate.producers.get_mut(&self.me.id) {
            e.max_commit_age_ms = max_commit_age_ms(&self.settings);
        }
        Ok(Prepared::Send(Proposal {
            candidate,
            n,
            last_seq,
            others,
            claims: recorded,
        }))
    }

    /// Other producers' uploads that a cooperative commit may publish: one listing of
    /// `tgb/`, each object described by its self-describing key and listed size
    /// ([`descriptor_from_key`]), kept when it is beyond its producer's entry in the base,
    /// of that entry's epoch, and younger than the `max_commit_age` the entry records
    /// (by the store's `last_modified` against our wall clock, the same comparison GC's
    /// orphan sweep makes; its `orphan_margin` covers the clock skew).
    /// [`rebase_cooperative`] then keeps each producer's contiguous run.
    async fn offers(
        &mut self,
        now_ms: u64,
    ) -> Result<(Vec<TgbDescriptor>, Vec<EpochClaim>), ProducerError> {
        // By wall-clock time, which keeps running while the host is suspended: a
        // listing from before a suspend is not reused after it.
        let reuse_ms = u64::try_from(OFFERS_REUSE.as_millis()).unwrap_or(u64::MAX);
        let fresh_enough = self
            .offers_listing
            .as_ref()
            .is_some_and(|(at_ms, _)| now_ms.saturating_sub(*at_ms) < reuse_ms);
        if fresh_enough {
            self.shared.stats_mut(|s| s.offer_listings_reused += 1);
        } else {
            let (tgbs, claims) = futures::try_join!(
                list_offers(&self.store, self.follower.current(), &self.me.id),
                self.store.list(CLAIM_DIR),
            )?;
            self.shared.stats_mut(|s| s.offer_listings += 1);
            self.offers_listing = Some((now_ms, Listing { tgbs, claims }));
        }
        let Some((_, listing)) = self.offers_listing.as_ref() else {
            return Ok((Vec::new(), Vec::new()));
        };
        let listed = &listing.tgbs[..];
        let base = self.follower.current();
        let bugs = planted();
        let mut out = Vec::new();
        for o in listed {
            let Some(k) = parse_described_tgb_key(&o.key) else {
                continue; // key form 1 (an older writer) or not a TGB
            };
            if k.producer_id == self.me.id {
                continue;
            }
            let Some(e) = base.producers.get(k.producer_id) else {
                continue; // never claimed: not publishable
            };
            let stale_plant = bugs.publish_stale_epoch && k.epoch < e.epoch;
            if k.sequence <= e.last_sequence || (k.epoch != e.epoch && !stale_plant) {
                continue;
            }
            let age = i64::try_from(now_ms)
                .unwrap_or(i64::MAX)
                .saturating_sub(o.last_modified_ms);
            let limit = i64::try_from(e.max_commit_age_ms).unwrap_or(i64::MAX);
            if e.max_commit_age_ms == 0 || (age > limit && !bugs.skip_others_age_check) {
                continue;
            }
            if let Some(d) = descriptor_from_key(&o.key, o.size) {
                out.push(d);
            }
        }
        // Epoch claims above the entry's epoch, younger than the limit they name (a claim
        // object older than that is never recorded: an opener that crashed after writing
        // it must not fence its id's live incarnation later; GC sweeps it).
        let mut claims = Vec::new();
        for o in &listing.claims {
            let Some(c) = EpochClaim::parse(&o.key) else {
                continue;
            };
            let held = base.producers.get(&c.producer_id);
            let above = held.is_none_or(|e| c.epoch > e.epoch);
            let same_plant = bugs.record_same_epoch_claims
                && held.is_some_and(|e| c.epoch == e.epoch && c.incarnation != e.incarnation);
            if c.producer_id == self.me.id || !(above || same_plant) {
                continue;
            }
            let age = i64::try_from(now_ms)
                .unwrap_or(i64::MAX)
                .saturating_sub(o.last_modified_ms);
            let limit = i64::try_from(c.max_commit_age_ms).unwrap_or(i64::MAX);
            if age > limit && !bugs.record_old_claims {
                continue;
            }
            claims.push(c);
        }
        Ok((out, claims))
    }

    /// Whether the refreshed, live base records this incarnation's epoch claim (another
    /// producer's cooperative attempt recorded it, or our own lost reply did).
    fn claim_recorded(&self) -> bool {
        let current = self.follower.current();
        current.version >= self.follower.boundary().min_live_version
            && current
                .producers
                .get(&self.me.id)
                .is_some_and(|e| e.epoch == self.me.epoch && e.incarnation == self.me.incarnation)
    }

    /// What the create of `proposal` means: committed, or (a conflict, an unknown
    /// outcome, a create below the GC boundary) whatever the chain says after a resync.
    async fn resolve(
        &mut self,
        created: Result<(), StoreError>,
        proposal: Proposal,
        span: &tracing::Span,
    ) -> Result<Attempt, ProducerError> {
        let Proposal {
            candidate,
            n,
            last_seq,
            others: proposal_others,
            claims: proposal_claims,
        } = proposal;
        let v = candidate.version;
        match created {
            Ok(()) => {
                self.follower.refresh_boundary().await?;
                let min_live = self.follower.boundary().min_live_version;
                if v < min_live {
                    // Ghost commit: GC had deleted this version number; the
                    // object we created is in no live chain. Not committed.
                    tracing::warn!(parent: span, version = v, min_live, "ghost commit detected, treating as conflict");
                    self.shared.stats_mut(|s| s.ghost_commits_prevented += 1);
                    self.resync(min_live).await?;
                    self.classify_after_conflict(last_seq, n, false)
                } else {
                    self.follower.adopt(candidate)?;
                    self.finish_commit(n, true);
                    if proposal_others > 0 || proposal_claims > 0 {
                        self.shared.stats_mut(|s| {
                            s.tgbs_published_for_others += proposal_others as u64;
                            s.claims_recorded_for_others += proposal_claims as u64;
                        });
                    }
                    Ok(Attempt::Committed)
                }
            }
            Err(e @ (StoreError::Conflict { .. } | StoreError::Ambiguous { .. })) => {
                let ambiguous = e.is_ambiguous();
                self.shared.stats_mut(|s| {
                    if ambiguous {
                        s.ambiguous += 1
                    } else {
                        s.conflicts += 1
                    }
                });
                tracing::debug!(parent: span, error = %e, "create did not succeed plainly; resolving");
                self.resync(v).await?;
                self.classify_after_conflict(last_seq, n, true)
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Tells the commit policy how an attempt with fragile window `tau` went (a
    /// cooperative cadence counts the active producers, [`active_producers`]).
    fn learn(&mut self, outcome: &Attempt, tau: Duration) {
        let (producers, slot) = if self.policy.cooperative() {
            let (count, index) = active_producers(self.follower.current(), &self.me.id);
            let now_ms = self.store.clock().unix_millis();
            (count, index.map(|index| Slot { index, now_ms }))
        } else {
            (self.follower.current().producers.len(), None)
        };
        self.policy.on_attempt(
            &AttemptOutcome {
                success: matches!(outcome, Attempt::Committed),
                fragile_window: tau,
                producers,
                slot,
            },
            self.rng.random::<f64>(),
        );
        self.shared.stats_mut(|s| {
            s.gap = self.policy.gap();
            s.tau = self.policy.tau_estimate();
            s.producers_seen = producers;
        });
    }

    /// After a failed or ghost create: is our batch in the chain anyway?
    fn classify_after_conflict(
        &mut self,
        last_seq: u64,
        n: usize,
        lost_reply_possible: bool,
    ) -> Result<Attempt, ProducerError> {
        if self.follower.current().version < self.follower.boundary().min_live_version {
            // A version below the boundary may be a ghost: never trust it.
            return Ok(Attempt::Conflict);
        }
        if lost_reply_possible && self.fail.fires(FailPoint::SkipStateMapCheck) {
            return Ok(Attempt::Conflict);
        }
        match commit_status(
            self.follower.current(),
            &self.me.id,
            self.me.epoch,
            self.me.incarnation,
            last_seq,
        ) {
            CommitStatus::Committed => {
                // Our create took effect (a lost reply) if our entry records our version;
                // otherwise another producer's cooperative commit published our batch.
                let ours = self
                    .follower
                    .current()
                    .producers
                    .get(&self.me.id)
                    .is_some_and(|e| self.created_by_us(e));
                if lost_reply_possible && ours {
                    self.shared.stats_mut(|s| s.lost_replies_recovered += 1);
                }
                if n == 0 && !ours {
                    // An epoch claim another producer's cooperative attempt recorded.
                    self.shared.stats_mut(|s| s.claims_recorded_by_others += 1);
                }
                self.finish_commit(n, ours);
                Ok(Attempt::Committed)
            }
            CommitStatus::Fenced { epoch, incarnation } => Err(ProducerError::Fenced {
                producer_id: self.me.id.clone(),
                ours: (self.me.epoch, self.me.incarnation),
                theirs: (epoch, incarnation),
            }),
            CommitStatus::NotCommitted => Ok(Attempt::Conflict),
        }
    }

    /// Brings the base up to date cheaply: one GET of the next version number
    /// (a 404 when nobody committed since); only if it exists, a listing to
    /// jump to the newest. The boundary is not re-read here: every create is
    /// followed by a fresh boundary check, so a deleted base costs a retry.
    async fn refresh(&mut self) -> Result<(), ProducerError> {
        // A producer that is a few versions behind catches up with a GET per version
        // (the last one a 404); one further behind jumps with a listing. Neither reads
        // the boundary here: it is read after the create.
        for _ in 0..REFRESH_STEPS {
            if !self.follower.poll_cached().await? {
                return Ok(());
            }
        }
        let next = self.follower.current().version.saturating_add(1);
        self.follower.jump_from_cached(next).await?;
        Ok(())
    }

    /// Moves the base to the newest live version at or after `at_least`, if one
    /// can be read; otherwise keeps the current base (the next attempt will
    /// conflict again and retry: stale views cost retries, never correctness).
    /// Reads the boundary first: versions below it may be ghosts.
    async fn resync(&mut self, at_least: u64) -> Result<(), ProducerError> {
        let live = self
            .follower
            .refresh_boundary()
            .await?
            .min_live_version
            .max(1);
        if !self.follower.jump_from(at_least.max(live)).await? {
            // The listing may be stale or the version deleted: look from the boundary.
            self.follower.jump_from(live).await?;
        }
        Ok(())
    }

    /// `own`: this producer's attempt committed them (else another's cooperative commit).
    fn finish_commit(&mut self, n: usize, own: bool) {
        let done: Vec<TgbDescriptor> = self
            .pending
            .drain(..n.min(self.pending.len()))
            .map(|(d, _)| d)
            .collect();
        let bytes: u64 = done.iter().map(|d| d.object_size).sum();
        self.permits.add_permits(done.len());
        let version = self.follower.current().version;
        let attempt = own && std::mem::take(&mut self.unresolved_attempt);
        self.shared.stats_mut(|s| {
            if attempt {
                s.attempts += 1;
            }
            if own {
                s.successes += 1;
            } else {
                s.tgbs_published_by_others += done.len() as u64;
            }
            s.tgbs_committed += done.len() as u64;
            s.bytes_committed += bytes;
            s.version = version;
            if let Some(d) = done.last() {
                s.committed_offset = d.source_offset;
                s.last_sequence = d.sequence;
            }
        });
    }

    /// The loop: takes TGB references, commits when the policy says so,
    /// drains on flush. Returns when the handle is dropped or on a fatal error.
    pub(crate) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Msg>) {
        let clock = self.store.clock().clone();
        let mut t_last = clock.now();
        let mut flushers: Vec<oneshot::Sender<Result<(), ProducerError>>> = Vec::new();
        let mut open = true;
        // Single-worker mode: the worker, held from the first attempt of a
        // run of attempts until the policy wants to wait.
        let mut worker: Option<tokio::sync::OwnedMutexGuard<()>> = None;
        // A full buffer's (or a cooperative flush's) wait for others to publish it.
        let mut full_since: Option<FullWait> = None;
        loop {
            while let Ok(m) = rx.try_recv() {
                self.take(m, &mut flushers);
            }
            if self.pending.is_empty() {
                for f in flushers.drain(..) {
                    let _ = f.send(Ok(()));
                }
                if !open {
                    return;
                }
            }
            let decision = if self.pending.is_empty() {
                Decision::NeedMoreData
            } else if !flushers.is_empty() && !self.policy.cooperative() {
                // A flush: commit now whatever the policy's batch size.
                Decision::CommitNow
            } else {
                let by_policy = self.policy.decide(
                    clock.now().saturating_duration_since(t_last),
                    self.pending.len(),
                );
                if !self.waiting(&flushers) || matches!(by_policy, Decision::CommitNow) {
                    by_policy
                } else {
                    // A full buffer (appenders are waiting for room) or a cooperative
                    // flush (its caller waits for the pending TGBs to be published).
                    match self.when_full(&mut full_since, !flushers.is_empty()).await {
                        Some(d) => d,
                        // Others published some of it (there is room again), or all of
                        // what a flush waits for.
                        None => continue,
                    }
                }
            };
            if matches!(decision, Decision::CommitNow) || !self.waiting(&flushers) {
                full_since = None;
            }
            if !matches!(decision, Decision::CommitNow) {
                worker = None;
            } else if self.settings.single_worker && worker.is_none() {
                worker = Some(self.shared.worker.clone().lock_owned().await);
                // Uploads finished while we waited for the worker.
                while let Ok(m) = rx.try_recv() {
                    self.take(m, &mut flushers);
                }
            }
            let wait = match decision {
                Decision::CommitNow => match self.attempt(self.pending.len()).await {
                    Ok(Attempt::Lagged) => {
                        self.shared.stats_mut(|s| s.lag_waits += 1);
                        worker = None;
                        Some(self.settings.lag_poll)
                    }
                    Ok(_) => {
                        t_last = clock.now();
                        continue;
                    }
                    Err(e) => {
                        let e = self.shared.set_fatal(e);
                        tracing::warn!(producer = %self.me.id, error = %e, "producer stopped");
                        for f in flushers.drain(..) {
                            let _ = f.send(Err(ProducerError::Stopped(e.clone())));
                        }
                        // Unblock appenders waiting for buffer space.
                        self.permits.close();
                        return;
                    }
                },
                Decision::WaitFor(d) => Some(d),
                Decision::NeedMoreData => None,
            };
            if !open {
                // The handle is gone and a wait is needed: stop (like a crash).
                return;
            }
            let msg = match wait {
                Some(d) => tokio::select! {
                    biased;
                    m = rx.recv() => m.map(Some),
                    () = clock.sleep(d) => Some(None),
                },
                None => rx.recv().await.map(Some),
            };
            match msg {
                Some(Some(m)) => self.take(m, &mut flushers),
                Some(None) => {
                    if self.settings.max_lag.is_some() && matches!(decision, Decision::CommitNow) {
                        match self.follower.refresh_boundary().await {
                            Ok(_) => {}
                            Err(e) => {
                                tracing::debug!(error = %e, "boundary read failed while lagging")
                            }
                        }
                    }
                }
                None => open = false,
            }
        }
    }

    /// Whether someone waits on the pending TGBs: appenders for room in a full buffer,
    /// or, under a cooperative policy, a flush for all of them to be published.
    fn waiting(&self, flushers: &[oneshot::Sender<Result<(), ProducerError>>]) -> bool {
        self.pending.len() >= self.settings.max_buffered
            || (!flushers.is_empty() && self.policy.cooperative())
    }

    /// What a full buffer, or a cooperative flush (`flushing`), does. A policy that
    /// publishes only its own producer's TGBs commits at once (whatever its gap: the
    /// appenders wait). Under a cooperative one, some other producer's turn is likely to
    /// publish the buffer within a round, and an attempt out of turn would mostly
    /// conflict with it: so while others commit (until two to four rounds pass without a
    /// new version, and for at most [`FULL_WAIT_ROUNDS`] rounds in all) the producer reads the
    /// chain every quarter round, as an attempt does before it prepares (the boundary when
    /// it is old, then the next versions), and releases what others published (`None`:
    /// there is room again, or for a flush nothing is pending); only then does it attempt
    /// itself, and its own turns come as usual meanwhile. A read error ends the wait: the
    /// attempt reports it as it would.
    ///
    /// A flush that attempted at once, and again at once after every conflict, made a
    /// pool that closes together (the end of a job) a storm: 256 producers closing on a
    /// local directory made about 550 creates for 14 commits, and the last upload became
    /// visible 8-17 s after production ended.
    async fn when_full(
        &mut self,
        full_since: &mut Option<FullWait>,
        flushing: bool,
    ) -> Option<Decision> {
        let Some(round) = self.policy.round().filter(|_| self.policy.cooperative()) else {
            return Some(Decision::CommitNow);
        };
        let now = self.store.clock().now();
        let version = self.follower.current().version;
        let w = *full_since.get_or_insert_with(|| FullWait {
            since: now,
            progress: now,
            version,
            // Two to four rounds, from the seeded RNG: a pool whose flushes began together
            // (the end of a job) must not give up together and attempt all at once.
            patience: round
                .saturating_mul(2)
                .mul_f64(1.0 + self.rng.random::<f64>()),
        });
        let idle = now.saturating_duration_since(w.progress);
        let total = now.saturating_duration_since(w.since);
        if idle >= w.patience || total >= round.saturating_mul(FULL_WAIT_ROUNDS) {
            return Some(Decision::CommitNow);
        }
        self.shared.stats_mut(|s| s.full_buffer_reads += 1);
        if let Err(e) = self.catch_up().await {
            tracing::debug!(producer = %self.me.id, error = %e, "catch-up read failed");
            return Some(Decision::CommitNow);
        }
        let released = if flushing {
            self.pending.is_empty()
        } else {
            self.pending.len() < self.settings.max_buffered
        };
        if released {
            *full_since = None;
            return None;
        }
        let current = self.follower.current().version;
        if let Some(w) = full_since.as_mut()
            && current > w.version
        {
            // Others commit: the next of their rounds is likely to publish ours.
            w.version = current;
            w.progress = now;
        }
        Some(Decision::WaitFor((round / 4).max(Duration::from_millis(1))))
    }

    /// Reads what others committed since our base (as [`Self::attempt`] does before it
    /// prepares) and releases the pending TGBs the chain now records as ours.
    async fn catch_up(&mut self) -> Result<(), ProducerError> {
        if self
            .follower
            .boundary_age()
            .is_none_or(|age| age > BOUNDARY_MAX_AGE)
        {
            self.follower.refresh_boundary().await?;
        }
        self.refresh().await?;
        self.absorb_committed();
        Ok(())
    }

    fn take(&mut self, m: Msg, flushers: &mut Vec<oneshot::Sender<Result<(), ProducerError>>>) {
        match m {
            Msg::Tgb(d, at) => self.pending.push_back((d, at)),
            Msg::Flush(tx) => flushers.push(tx),
        }
    }
}

/// Producers whose entries advanced within [`ACTIVE_WINDOW_MS`] of `m`'s commit time (at
/// least 1): the ones a cooperative cadence shares the stream's attempt rate with. Under
/// cooperative commits an uploading producer's entry advances about every round, by
/// whoever publishes it; ids that stopped long ago do not slow the others down. With the
/// count, `me`'s index among them in id order (`None` if it is not one of them): its turn
/// in the cooperative schedule, the same for every producer that read `m`.
fn active_producers(m: &Manifest, me: &str) -> (usize, Option<usize>) {
    let since = m.committed_at_ms.saturating_sub(ACTIVE_WINDOW_MS);
    let mut count = 0;
    let mut index = None;
    for (id, _) in m
        .producers
        .iter()
        .filter(|(_, e)| e.last_commit_ms >= since)
    {
        if id.as_str() == me {
            index = Some(count);
        }
        count += 1;
    }
    (count.max(1), index)
}

/// The listing behind a cooperative attempt's offers, on `base` for producer `me`,
/// whichever takes fewer requests: one listing of `tgb/` (a request per 1,000 keys,
/// and `tgb/` holds about what the base retains, GC reclaiming behind the consumers),
/// or one listing per active producer from its entry's position ([`tgb_key_after`]),
/// which returns only what that producer uploaded beyond what the base publishes, so
/// its cost does not grow with the retained window. At most [`LIST_CONCURRENCY`] of
/// those run at once.
async fn list_offers(
    store: &StreamStore,
    base: &Manifest,
    me: &str,
) -> Result<Vec<ObjectInfo>, StoreError> {
    let since = base.committed_at_ms.saturating_sub(ACTIVE_WINDOW_MS);
    let active: Vec<String> = base
        .producers
        .iter()
        .filter(|(id, e)| id.as_str() != me && e.last_commit_ms >= since && e.max_commit_age_ms > 0)
        .map(|(id, e)| tgb_key_after(id, e.epoch, e.last_sequence))
        .collect();
    if !list_per_producer(base.tgbs.len(), active.len()) {
        return store.list(TGB_DIR).await;
    }
    let lists = futures::stream::iter(active.into_iter().map(|after| {
        let store = store.clone();
        async move {
            let prefix = after[..after.rfind('/').map_or(after.len(), |i| i + 1)].to_owned();
            store.list_after(&prefix, &after).await
        }
    }))
    .buffer_unordered(LIST_CONCURRENCY)
    .try_collect::<Vec<_>>()
    .await?;
    Ok(lists.into_iter().flatten().collect())
}

/// Whether a cooperative attempt lists each of `active` producers from its position
/// rather than all of `tgb/`, given that the base retains `retained` TGBs (about what
/// `tgb/` holds besides the uploads not yet published): when that takes fewer requests.
fn list_per_producer(retained: usize, active: usize) -> bool {
    let full_pages = retained.saturating_add(active).div_ceil(LIST_PAGE).max(1);
    active < full_pages
}

/// `max_commit_age` in milliseconds, as an entry and a claim key record it.
fn max_commit_age_ms(settings: &ProducerSettings) -> u64 {
    u64::try_from(settings.max_commit_age.as_millis()).unwrap_or(u64::MAX)
}

/// Planted bug ([`crate::planted`]) `record_same_epoch_claims`: an epoch claim of the
/// epoch an entry already holds, under another incarnation, recorded as if it were above
/// it (the claim takes the epoch from its live holder), for the simulation to show that
/// readers refuse it.
fn plant_claims(candidate: &mut Manifest, base: &Manifest, claims: &[EpochClaim], me: &str) {
    if !planted().record_same_epoch_claims {
        return;
    }
    for c in claims {
        let Some(e) = base.producers.get(&c.producer_id) else {
            continue;
        };
        if c.epoch != e.epoch || c.incarnation == e.incarnation {
            continue;
        }
        let Some(entry) = candidate.producers.get_mut(&c.producer_id) else {
            continue;
        };
        if entry.last_commit_version == candidate.version {
            continue; // published or recorded by this version already
        }
        entry.incarnation = c.incarnation;
        entry.max_commit_age_ms = c.max_commit_age_ms;
        entry.last_commit_version = candidate.version;
        entry.last_commit_ms = candidate.committed_at_ms;
        candidate.committer = me.to_owned();
        return;
    }
}

/// Planted bugs ([`crate::planted`]): publications `rebase_cooperative` refuses, added to
/// `candidate` as if it had accepted them, for the simulation to show they are caught.
fn plant_publications(
    candidate: &mut Manifest,
    base: &Manifest,
    offers: &[TgbDescriptor],
    me: &str,
) {
    let bugs = planted();
    if !(bugs.publish_gap || bugs.publish_stale_epoch) {
        return;
    }
    for d in offers {
        let Some(e) = base.producers.get(&d.producer_id) else {
            continue;
        };
        let Some(c) = candidate.producers.get(&d.producer_id) else {
            continue;
        };
        let gap = bugs.publish_gap
            && d.epoch == e.epoch
            && c.last_sequence == e.last_sequence
            && d.sequence == e.last_sequence + 2;
        let stale = bugs.publish_stale_epoch
            && d.epoch < e.epoch
            && c.last_sequence == e.last_sequence
            && d.sequence == e.last_sequence + 1;
        if !(gap || stale) {
            continue;
        }
        let mut t = d.clone();
        t.visible_version = candidate.version;
        candidate.retained_bytes += t.object_size;
        candidate.tgbs.push(t);
        candidate.total_tgbs += 1;
        if let Some(c) = candidate.producers.get_mut(&d.producer_id) {
            c.last_sequence = d.sequence;
            c.tgbs_committed += 1;
            c.source_offset = d.source_offset;
            c.last_commit_version = candidate.version;
        }
        candidate.committer = me.to_owned();
        return;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_claim_backoff_is_capped_in_fragile_windows_within_one_to_ten_seconds() {
        let ms = Duration::from_millis;
        // Doubling from 10 ms after the first conflict.
        assert_eq!(claim_backoff_ceiling(1, ms(20)), ms(10));
        assert_eq!(claim_backoff_ceiling(4, ms(20)), ms(80));
        // A short window (the simulator's, a store on other machines): one second.
        assert_eq!(claim_backoff_ceiling(8, ms(20)), ms(1000));
        assert_eq!(claim_backoff_ceiling(40, ms(120)), ms(1000));
        // Claimers queueing for shared cores stretch the window: 8 of them.
        assert_eq!(claim_backoff_ceiling(40, ms(700)), ms(5600));
        assert_eq!(claim_backoff_ceiling(9, ms(700)), ms(2560));
        // One create that took a minute does not hold the next claim back for minutes.
        assert_eq!(claim_backoff_ceiling(40, ms(60_000)), ms(10_000));
        assert_eq!(claim_backoff_ceiling(u32::MAX, Duration::MAX), ms(10_000));
    }

    #[test]
    fn a_large_retained_window_is_listed_per_producer() {
        // A small stream: one listing of `tgb/` is one request.
        assert!(!list_per_producer(0, 1));
        assert!(!list_per_producer(900, 99));
        assert!(!list_per_producer(10, 1023));
        // 1,024 producers and 30,000 retained TGBs: 31 pages against 1,023 listings.
        assert!(!list_per_producer(30_000, 1023));
        // 256 producers and 300,000 retained TGBs (a long checkpoint window): 301 pages
        // against 255 listings of a few keys each.
        assert!(list_per_producer(300_000, 255));
        assert!(list_per_producer(1_001, 1));
        assert!(!list_per_producer(999, 1));
        assert!(!list_per_producer(usize::MAX, usize::MAX));
    }
}
