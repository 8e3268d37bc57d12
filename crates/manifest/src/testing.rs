//! Synthetic stream histories for tests and benchmarks (feature `test-util`).
//!
//! [`SyntheticHistory`] builds the newest manifest version of a stream that has a long
//! history behind it, without running that history: building 100k versions commit by
//! commit costs time quadratic in the untrimmed case. The result passes [`validate`]
//! (every reader rule of `docs/format.md` section 4), so producers can commit on top of
//! it through the real [`rebase`](crate::rebase) path and consumers and GC read it.
//!
//! Only metadata is built: the TGB objects the descriptors name are not written, so a
//! consumer that reads a retained step of a synthetic history finds no object.
//!
//! [`validate`]: crate::validate

use std::collections::BTreeMap;

use crate::keys::tgb_key;
use crate::pb::{Manifest, ProducerState, TgbDescriptor};
use crate::validate::{TGB_TRAILER_LEN, tgb_footer_length};

/// The newest manifest of a synthetic history. The history it stands for:
///
/// 1. every *idle* producer claims its id (epoch 1) with a commit of no TGBs, one
///    version each, in the order they were added;
/// 2. the *writers* then commit one TGB per version, round robin over the writers that
///    have TGBs left (writer `w`'s `n`-th TGB has sequence and source offset `n`);
/// 3. descriptors of all but the newest [`retain`](Self::retain) TGBs are trimmed.
///
/// The newest version is the number of claims plus the number of TGBs; its committer
/// is the writer of the last TGB (or the last idle producer when there are no TGBs).
/// Every TGB has the same grid and slice size, so the stream has one grid.
///
/// ```
/// use batchweave_manifest::testing::SyntheticHistory;
/// use batchweave_manifest::{DecodeLimits, validate};
///
/// let m = SyntheticHistory::new()
///     .idle("trainer-feed")
///     .writer("history", 100_000)
///     .retain(90)
///     .build();
/// validate(&m, &DecodeLimits::default())?;
/// assert_eq!((m.version, m.total_tgbs, m.tgbs.len()), (100_001, 100_000, 90));
/// # Ok::<(), batchweave_manifest::ManifestError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticHistory {
    idle: Vec<String>,
    writers: Vec<(String, u64)>,
    retain: Option<u64>,
    dp: u32,
    cp: u32,
    slice_bytes: u64,
    incarnation: u64,
    now_ms: u64,
}

impl Default for SyntheticHistory {
    fn default() -> Self {
        Self::new()
    }
}

impl SyntheticHistory {
    /// An empty history (its manifest is the genesis version 0) of 1 x 1 TGBs with
    /// 64-byte slices, incarnation 1 for every producer, committed at Unix
    /// millisecond 1,750,000,000,000.
    pub fn new() -> Self {
        Self {
            idle: Vec::new(),
            writers: Vec::new(),
            retain: None,
            dp: 1,
            cp: 1,
            slice_bytes: 64,
            incarnation: 1,
            now_ms: 1_750_000_000_000,
        }
    }

    /// Adds a producer that claimed `id` and committed no TGB.
    pub fn idle(mut self, id: impl Into<String>) -> Self {
        self.idle.push(id.into());
        self
    }

    /// Adds a producer that committed `tgbs` TGBs.
    pub fn writer(mut self, id: impl Into<String>, tgbs: u64) -> Self {
        self.writers.push((id.into(), tgbs));
        self
    }

    /// Keeps only the newest `tgbs` descriptors (default: all of them).
    pub fn retain(mut self, tgbs: u64) -> Self {
        self.retain = Some(tgbs);
        self
    }

    /// The slice grid and the bytes of every slice of every TGB (default 1 x 1, 64).
    /// Both degrees are at least 1.
    pub fn grid(mut self, dp: u32, cp: u32, slice_bytes: u64) -> Self {
        self.dp = dp.max(1);
        self.cp = cp.max(1);
        self.slice_bytes = slice_bytes;
        self
    }

    /// The incarnation every producer entry records (default 1).
    pub fn incarnation(mut self, incarnation: u64) -> Self {
        self.incarnation = incarnation;
        self
    }

    /// The Unix milliseconds recorded as every commit's time.
    pub fn committed_at_ms(mut self, now_ms: u64) -> Self {
        self.now_ms = now_ms;
        self
    }

    /// The TGBs of the history.
    fn total(&self) -> u64 {
        self.writers.iter().map(|(_, n)| n).sum()
    }

    /// The newest version.
    pub fn version(&self) -> u64 {
        self.idle.len() as u64 + self.total()
    }

    /// Builds the newest manifest version.
    ///
    /// # Panics
    ///
    /// If a producer id appears twice or is invalid (the manifest would not validate).
    pub fn build(&self) -> Manifest {
        let claims = self.idle.len() as u64;
        let total = self.total();
        let version = claims + total;
        let slices = u64::from(self.dp) * u64::from(self.cp);
        let payload = slices.saturating_mul(self.slice_bytes);
        let footer = tgb_footer_length(slices).unwrap_or(u64::MAX);
        let object_size = payload
            .saturating_add(footer)
            .saturating_add(TGB_TRAILER_LEN);
        let retained = self.retain.unwrap_or(total).min(total);
        let first_step = total - retained;

        let entry = |last_commit_version: u64, tgbs: u64| ProducerState {
            epoch: 1,
            incarnation: self.incarnation,
            source_offset: tgbs,
            last_sequence: tgbs,
            last_commit_version,
            tgbs_committed: tgbs,
            last_commit_ms: self.now_ms,
            max_commit_age_ms: 0,
        };
        let mut producers = BTreeMap::new();
        let mut insert = |id: &str, st: ProducerState| {
            assert!(
                producers.insert(id.to_owned(), st).is_none(),
                "producer id {id:?} appears twice in the synthetic history"
            );
        };
        for (i, id) in self.idle.iter().enumerate() {
            insert(id, entry(i as u64 + 1, 0));
        }

        // The round robin, one TGB per version from version claims + 1: descriptors
        // only for the retained tail.
        let mut left: Vec<u64> = self.writers.iter().map(|(_, n)| *n).collect();
        let mut done = vec![0u64; left.len()];
        let mut last_version = vec![0u64; left.len()];
        let mut tgbs = Vec::with_capacity(usize::try_from(retained).unwrap_or(0));
        let mut step = 0u64;
        while step < total {
            for w in 0..left.len() {
                if left[w] == 0 {
                    continue;
                }
                left[w] -= 1;
                done[w] += 1;
                let visible = claims + step + 1;
                last_version[w] = visible;
                if step >= first_step {
                    let id = &self.writers[w].0;
                    tgbs.push(TgbDescriptor {
                        key: tgb_key(id, 1, done[w]),
                        object_size,
                        dp: self.dp,
                        cp: self.cp,
                        footer_offset: payload,
                        footer_length: u32::try_from(footer).unwrap_or(u32::MAX),
                        footer_crc32: 0,
                        producer_id: id.clone(),
                        epoch: 1,
                        sequence: done[w],
                        visible_version: visible,
                        payload_bytes: payload,
                        source_offset: done[w],
                        slice_stride: 0,
                    });
                }
                step += 1;
            }
        }
        for (w, (id, n)) in self.writers.iter().enumerate() {
            insert(id, entry(last_version[w], *n));
        }
        let (grid_dp, grid_cp) = if total > 0 {
            (self.dp, self.cp)
        } else {
            (0, 0)
        };
        Manifest {
            version,
            first_step,
            retained_bytes: object_size * retained,
            total_tgbs: total,
            committed_at_ms: if version > 0 { self.now_ms } else { 0 },
            grid_dp,
            grid_cp,
            tgbs,
            producers,
            committer: String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{DecodeLimits, Pending, check_extends, rebase, validate};

    fn valid(h: &SyntheticHistory) -> Manifest {
        let m = h.build();
        validate(&m, &DecodeLimits::default()).unwrap_or_else(|e| panic!("{h:?}: {e}"));
        assert_eq!(m.version, h.version());
        m
    }

    #[test]
    fn every_shape_validates() {
        let shapes = [
            SyntheticHistory::new(),
            SyntheticHistory::new().idle("a"),
            SyntheticHistory::new().idle("a").idle("b"),
            SyntheticHistory::new().writer("w", 1),
            SyntheticHistory::new().writer("w", 10).retain(0),
            SyntheticHistory::new().writer("w", 10).retain(3),
            SyntheticHistory::new().writer("w", 10).retain(30),
            SyntheticHistory::new()
                .idle("i0")
                .idle("i1")
                .writer("a", 7)
                .writer("b", 3)
                .writer("c", 0)
                .writer("d", 12)
                .retain(9)
                .grid(4, 2, 100),
            SyntheticHistory::new()
                .writer("a", 5)
                .writer("b", 5)
                .idle("last"),
        ];
        for h in &shapes {
            valid(h);
        }
    }

    #[test]
    fn counts_trim_and_committer() {
        let m = valid(
            &SyntheticHistory::new()
                .idle("i")
                .writer("a", 3)
                .writer("b", 1)
                .retain(2),
        );
        // Versions: 1 claim by i; then a, b, a, a.
        assert_eq!((m.version, m.total_tgbs, m.first_step), (5, 4, 2));
        let ids: Vec<(&str, u64, u64)> = m
            .tgbs
            .iter()
            .map(|d| (d.producer_id.as_str(), d.sequence, d.visible_version))
            .collect();
        assert_eq!(ids, [("a", 2, 4), ("a", 3, 5)]);
        assert_eq!(m.producers["a"].last_commit_version, 5);
        assert_eq!(m.producers["b"].last_commit_version, 3);
        assert_eq!(m.producers["i"].last_commit_version, 1);
        assert_eq!(m.retained_bytes, 2 * (64 + 40 + 32));
        assert_eq!(SyntheticHistory::new().build(), Manifest::genesis());
    }

    #[test]
    fn a_producer_commits_on_top_through_rebase() {
        let base = valid(&SyntheticHistory::new().idle("me").writer("w", 50).retain(5));
        let mut d = base.tgbs[0].clone();
        d.key = tgb_key("me", 1, 1);
        d.producer_id = "me".into();
        d.sequence = 1;
        d.source_offset = 1;
        d.visible_version = 0;
        let next = rebase(
            &base,
            &Pending {
                producer_id: "me".into(),
                epoch: 1,
                incarnation: 1,
                tgbs: vec![d],
                source_offset: 1,
                now_ms: 1,
            },
            base.total_tgbs,
        )
        .unwrap();
        validate(&next, &DecodeLimits::default()).unwrap();
        check_extends(&base, &next).unwrap();
        assert_eq!(
            (next.version, next.total_tgbs, next.tgbs.len()),
            (52, 51, 1)
        );
    }

    #[test]
    #[should_panic(expected = "appears twice")]
    fn a_duplicate_id_panics() {
        let _ = SyntheticHistory::new().idle("x").writer("x", 1).build();
    }
}
