//! Producer settings and test fail points.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use batchweave_dac::PolicyKind;
use batchweave_manifest::DecodeLimits;
pub use batchweave_tgb::SliceLayout;

/// Tunables of a [`Producer`](crate::Producer). Use `..Default::default()`.
#[derive(Debug, Clone)]
pub struct ProducerSettings {
    /// When to attempt a commit (`coop`, cooperative commits, by default; DAC and the
    /// paper's baselines for comparison).
    pub policy: PolicyKind,
    /// Uploaded-but-uncommitted TGBs allowed before `append` waits (>= 1).
    pub max_buffered: usize,
    /// Do not commit TGBs more than this many steps ahead of the stream's
    /// low-water mark (from `gc/boundary`); `None` = unbounded.
    pub max_lag: Option<u64>,
    /// How often a producer held back by `max_lag` re-reads the GC boundary.
    pub lag_poll: Duration,
    /// TGB objects at least this large are uploaded as multipart.
    pub multipart_threshold: u64,
    /// Part size of multipart uploads (at least 5 MiB, S3's minimum).
    pub multipart_part_size: usize,
    /// Parts of a streamed TGB ([`Producer::stream_tgb`](crate::Producer::stream_tgb))
    /// uploading at once (>= 1): a streamed TGB holds at most
    /// `(stream_parts_in_flight + 1) * multipart_part_size` bytes of its own.
    pub stream_parts_in_flight: usize,
    /// Bounds applied to every manifest read from the store.
    pub limits: DecodeLimits,
    /// A TGB uploaded longer ago than this is never committed: the producer
    /// stops with [`ProducerError::Expired`](crate::ProducerError::Expired)
    /// instead. GC's orphan grace period must exceed it (plus clock skew), so
    /// an upload that GC may already have swept as an orphan is never made
    /// visible.
    pub max_commit_age: Duration,
    /// Seed for the incarnation nonce and the DAC jitter; `None` draws one
    /// from the operating system. Simulations pass a seed.
    pub seed: Option<u64>,
    /// Model a producer whose one worker both uploads and commits, as the
    /// paper's producers do: `append` waits while a commit attempt is in
    /// flight, and retries that the policy wants at once (a count-based
    /// policy after a conflict) run back to back before the next upload.
    /// Off by default: uploads overlap commits, so a commit policy costs
    /// requests, not upload time. The benchmarks turn it on to reproduce the
    /// paper's comparison of policies (`bench dac`).
    pub single_worker: bool,
    /// How [`Producer::append`](crate::Producer::append) lays out a TGB's slices. The
    /// default, [`SliceLayout::Auto`], seals them (TGB format version 2: a rank reads its
    /// slice with one GET instead of footer + slice) unless padding to the longest slice
    /// costs more than 1/16 of the bytes. Streams with sealed TGBs need readers of this
    /// version or later.
    pub slice_layout: SliceLayout,
}

impl Default for ProducerSettings {
    fn default() -> Self {
        Self {
            policy: PolicyKind::default(),
            max_buffered: 64,
            max_lag: None,
            lag_poll: Duration::from_millis(100),
            multipart_threshold: 64 * 1024 * 1024,
            multipart_part_size: 16 * 1024 * 1024,
            stream_parts_in_flight: 4,
            limits: DecodeLimits::default(),
            max_commit_age: Duration::from_secs(30 * 60),
            seed: None,
            single_worker: false,
            slice_layout: SliceLayout::default(),
        }
    }
}

impl ProducerSettings {
    /// Checks the settings; the error says what to fix.
    pub fn validate(&self) -> Result<(), String> {
        if self.max_buffered == 0 {
            return Err("max_buffered must be at least 1".into());
        }
        if self.stream_parts_in_flight == 0 {
            return Err("stream_parts_in_flight must be at least 1".into());
        }
        if self.max_lag == Some(0) {
            return Err("max_lag must be at least 1 (or None for unbounded)".into());
        }
        self.policy.validate().map_err(|e| e.to_string())?;
        Ok(())
    }
}

/// Named points in the producer where a test can make the process "die".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailPoint {
    /// The TGB object is written, its reference not yet handed to the committer.
    AfterTgbPut,
    /// The candidate manifest is built, the conditional create not yet sent.
    BeforeCreate,
    /// The conditional create was sent and answered; the producer has not
    /// yet acted on the answer (the lost-response crash).
    AfterCreate,
    /// A cooperative producer wrote its epoch claim object (`claims/`) and has not yet
    /// claimed itself: others may record the claim of a process that is gone.
    AfterClaimObject,
    /// Not a crash but a planted bug, for the simulation to catch: where it
    /// fires, the producer skips the state-map check that recognises its own
    /// batch after a lost or failed create reply, and sends the batch again.
    SkipStateMapCheck,
}

/// Decides, at each fail point, whether the producer crashes there (or, at
/// [`FailPoint::SkipStateMapCheck`], misbehaves there).
#[derive(Clone, Default)]
pub struct FailPoints(Option<Arc<dyn Fn(FailPoint) -> bool + Send + Sync>>);

impl FailPoints {
    /// Crash whenever `f` returns true.
    pub fn new(f: impl Fn(FailPoint) -> bool + Send + Sync + 'static) -> Self {
        Self(Some(Arc::new(f)))
    }

    /// True if the producer must crash at `p`.
    pub(crate) fn fires(&self, p: FailPoint) -> bool {
        self.0.as_ref().is_some_and(|f| f(p))
    }
}

impl fmt::Debug for FailPoints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "FailPoints(armed)"
        } else {
            "FailPoints(none)"
        })
    }
}
