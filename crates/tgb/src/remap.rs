//! Topology remap: which TGB slices a consumer reads when its `(DP, CP)` grid differs from
//! the grid the stream's TGBs were written with.
//!
//! # The rule
//!
//! Notation: the stream's grid is `(D_t, C_t)`, the consumer's `(D_c, C_c)`, the consumer is
//! at position `(d', c')` and runs step `k`. TGB index `t` is the TGB's position in the stream
//! (its step in the manifest).
//!
//! **DP axis (any ratio).** Flatten the DP slices of all TGBs into one sequence: DP-slice `g`
//! is replica `g % D_t` of TGB `g / D_t`. Consumer step `k`, replica `d'` reads
//! `g = k * D_c + d'`. So `D_c = 2 D_t` reads two consecutive TGBs per step, `D_c = D_t / 2`
//! serves one TGB over two steps (first half of the replicas, then the second), and any other
//! ratio works the same way. Every DP-slice is read by exactly one `(k, d')`.
//!
//! **CP axis (integer ratios).** Within the chosen replica `d`:
//! - `C_t == C_c`: read slice `d * C_t + c'`.
//! - `C_t = m * C_c`: read the `m` adjacent slices `d * C_t + c' * m ..+ m` (one range).
//! - `C_c = m * C_t`: read slice `d * C_t + c' / m` whole (to verify its CRC), then keep part
//!   `c' % m` of `m` (see [`part_range`]).
//! - otherwise: [`TgbError::CpRatio`].
//!
//! ```text
//! D_t = 2, D_c = 4: step k reads TGBs 2k (d' = 0, 1) and 2k+1 (d' = 2, 3)
//! D_t = 4, D_c = 2: TGB t serves step 2t (replicas 0, 1) and step 2t+1 (replicas 2, 3)
//! ```

use std::ops::{Range, RangeInclusive};

use bytes::Bytes;

use crate::layout::checked_slices;
use crate::{Position, TgbError};

/// A `(DP, CP)` grid: of the stream's TGBs, or of a consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grid {
    /// Data-parallel degree.
    pub dp: u32,
    /// Context-parallel degree.
    pub cp: u32,
}

impl Grid {
    /// A `dp x cp` grid.
    pub fn new(dp: u32, cp: u32) -> Self {
        Grid { dp, cp }
    }

    fn check(self) -> Result<Self, TgbError> {
        if self.dp == 0 || self.cp == 0 {
            return Err(TgbError::InvalidGrid {
                dp: self.dp,
                cp: self.cp,
                reason: "DP and CP must be at least 1",
            });
        }
        Ok(self)
    }
}

/// One read a consumer rank performs for one step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SliceRead {
    /// Index of the TGB in the stream (its step number in the manifest).
    pub tgb_index: u64,
    /// First slice id (`d * C_t + c`) to read.
    pub first_slice: u32,
    /// Number of contiguous slices to read (one ranged GET; see
    /// [`SliceIndex::range_of`](crate::SliceIndex::range_of)).
    pub slice_count: u32,
    /// `Some((index, parts))`: after verifying the single slice, keep only part `index` of
    /// `parts` (see [`part_range`]). `None`: use the bytes as read.
    pub part: Option<(u32, u32)>,
}

fn check_pair(tgb: Grid, consumer: Grid) -> Result<(), TgbError> {
    // TGB grids obey the encoder's limit, so slice ids below fit in u32.
    checked_slices(tgb.dp, tgb.cp)?;
    consumer.check()?;
    if !tgb.cp.is_multiple_of(consumer.cp) && !consumer.cp.is_multiple_of(tgb.cp) {
        return Err(TgbError::CpRatio {
            tgb_cp: tgb.cp,
            consumer_cp: consumer.cp,
        });
    }
    Ok(())
}

/// The reads consumer rank `pos` of grid `consumer` performs at `consumer_step`, given that
/// the stream's TGBs have grid `tgb`. Under the current rule this is always exactly one read;
/// callers should still process every element in order.
pub fn plan(
    tgb: Grid,
    consumer: Grid,
    pos: Position,
    consumer_step: u64,
) -> Result<Vec<SliceRead>, TgbError> {
    check_pair(tgb, consumer)?;
    if pos.d >= consumer.dp || pos.c >= consumer.cp {
        return Err(TgbError::PositionOutOfGrid {
            d: pos.d,
            c: pos.c,
            dp: consumer.dp,
            cp: consumer.cp,
        });
    }
    let g = consumer_step
        .checked_mul(u64::from(consumer.dp))
        .and_then(|v| v.checked_add(u64::from(pos.d)))
        .ok_or(TgbError::Overflow {
            what: "DP-slice index (step * D_c + d)",
        })?;
    let tgb_index = g / u64::from(tgb.dp);
    // g % D_t < D_t fits in u32, and d * C_t + C_t <= D_t * C_t <= MAX_SLICES (check_pair).
    let d = (g % u64::from(tgb.dp)) as u32;
    let base = d * tgb.cp;
    let read = if tgb.cp >= consumer.cp {
        let m = tgb.cp / consumer.cp;
        SliceRead {
            tgb_index,
            first_slice: base + pos.c * m,
            slice_count: m,
            part: None,
        }
    } else {
        let m = consumer.cp / tgb.cp;
        SliceRead {
            tgb_index,
            first_slice: base + pos.c / m,
            slice_count: 1,
            part: Some((pos.c % m, m)),
        }
    };
    Ok(vec![read])
}

/// The TGB indices that consumer step `consumer_step` touches (over all its replicas).
pub fn tgbs_of_step(
    tgb: Grid,
    consumer: Grid,
    consumer_step: u64,
) -> Result<RangeInclusive<u64>, TgbError> {
    check_pair(tgb, consumer)?;
    let first = consumer_step
        .checked_mul(u64::from(consumer.dp))
        .ok_or(TgbError::Overflow {
            what: "DP-slice index (step * D_c)",
        })?;
    let last = first
        .checked_add(u64::from(consumer.dp) - 1)
        .ok_or(TgbError::Overflow {
            what: "DP-slice index",
        })?;
    Ok(first / u64::from(tgb.dp)..=last / u64::from(tgb.dp))
}

/// The highest TGB index consumer step `consumer_step` needs: the stream must hold TGBs
/// `0..=tgbs_needed_through(..)` (by index) before that step can run in full.
pub fn tgbs_needed_through(tgb: Grid, consumer: Grid, consumer_step: u64) -> Result<u64, TgbError> {
    Ok(*tgbs_of_step(tgb, consumer, consumer_step)?.end())
}

/// How many consumer steps (counted from step 0) are fully covered by the first `tgb_count`
/// TGBs of the stream: `tgb_count * D_t / D_c`, saturating.
pub fn steps_covered(tgb: Grid, consumer: Grid, tgb_count: u64) -> Result<u64, TgbError> {
    check_pair(tgb, consumer)?;
    let slices = u128::from(tgb_count) * u128::from(tgb.dp);
    Ok(u64::try_from(slices / u128::from(consumer.dp)).unwrap_or(u64::MAX))
}

/// Converts a consumer step counted at DP degree `from_dp` to the same point of the stream
/// at DP degree `to_dp` (restoring a checkpoint with a new DP). The point is
/// `step * from_dp` DP-slices; it must be a whole number of steps at `to_dp`, otherwise
/// [`TgbError::StepNotAligned`].
pub fn convert_step(step: u64, from_dp: u32, to_dp: u32) -> Result<u64, TgbError> {
    if from_dp == 0 || to_dp == 0 {
        return Err(TgbError::InvalidGrid {
            dp: from_dp.min(to_dp),
            cp: 1,
            reason: "DP must be at least 1",
        });
    }
    let slices = u128::from(step) * u128::from(from_dp);
    if !slices.is_multiple_of(u128::from(to_dp)) {
        return Err(TgbError::StepNotAligned {
            step,
            from_dp,
            to_dp,
        });
    }
    u64::try_from(slices / u128::from(to_dp)).map_err(|_| TgbError::Overflow {
        what: "converted step",
    })
}

/// Byte range of part `index` of `parts` in a slice of `len` bytes.
///
/// The slice is split at multiples of `token_bytes` (use 1 for plain bytes): with
/// `units = len / token_bytes` and `q = units / parts`, part `i < parts - 1` is
/// `[i*q*token_bytes, (i+1)*q*token_bytes)` and the last part runs to `len` (it takes the
/// remainder). Errors if `index >= parts`, `parts == 0`, `token_bytes == 0` or `len` is not a
/// multiple of `token_bytes`.
pub fn part_range(
    len: u64,
    index: u32,
    parts: u32,
    token_bytes: u32,
) -> Result<Range<u64>, TgbError> {
    let bad = |reason| TgbError::BadPart {
        index,
        parts,
        len,
        reason,
    };
    if parts == 0 || index >= parts {
        return Err(bad("index must be below parts"));
    }
    if token_bytes == 0 {
        return Err(bad("token_bytes must be at least 1"));
    }
    let tb = u64::from(token_bytes);
    if !len.is_multiple_of(tb) {
        return Err(bad("slice length is not a multiple of token_bytes"));
    }
    let step = (len / tb / u64::from(parts)) * tb;
    // index * step <= (parts - 1) * len / parts < len: no overflow.
    let start = u64::from(index) * step;
    let end = if index + 1 == parts {
        len
    } else {
        start + step
    };
    Ok(start..end)
}

/// Cuts part `index` of `parts` out of an already verified slice (zero-copy);
/// see [`part_range`].
pub fn cut_part(
    slice: &Bytes,
    index: u32,
    parts: u32,
    token_bytes: u32,
) -> Result<Bytes, TgbError> {
    let r = part_range(slice.len() as u64, index, parts, token_bytes)?;
    // Both ends are <= slice.len(), so they fit in usize.
    Ok(slice.slice(r.start as usize..r.end as usize))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_ranges_cover_the_slice() {
        assert_eq!(part_range(10, 0, 3, 1).unwrap(), 0..3);
        assert_eq!(part_range(10, 1, 3, 1).unwrap(), 3..6);
        assert_eq!(part_range(10, 2, 3, 1).unwrap(), 6..10);
        assert_eq!(part_range(2, 0, 4, 1).unwrap(), 0..0);
        assert_eq!(part_range(2, 3, 4, 1).unwrap(), 0..2);
        // token alignment: 5 tokens of 4 bytes into 2 parts -> 2 tokens, then 3.
        assert_eq!(part_range(20, 0, 2, 4).unwrap(), 0..8);
        assert_eq!(part_range(20, 1, 2, 4).unwrap(), 8..20);
        assert!(part_range(21, 0, 2, 4).is_err());
        assert!(part_range(20, 2, 2, 1).is_err());
        assert!(part_range(20, 0, 0, 1).is_err());
        assert!(part_range(20, 0, 1, 0).is_err());
        let s = Bytes::from_static(b"abcdefgh");
        assert_eq!(cut_part(&s, 1, 2, 1).unwrap(), Bytes::from_static(b"efgh"));
    }

    #[test]
    fn convert_step_examples() {
        assert_eq!(convert_step(10, 4, 2).unwrap(), 20);
        assert_eq!(convert_step(10, 2, 4).unwrap(), 5);
        assert_eq!(convert_step(3, 2, 3).unwrap(), 2);
        assert_eq!(convert_step(0, 7, 5).unwrap(), 0);
        assert!(matches!(
            convert_step(11, 2, 4),
            Err(TgbError::StepNotAligned { .. })
        ));
        assert!(convert_step(1, 0, 1).is_err());
        assert!(matches!(
            convert_step(u64::MAX, 2, 1),
            Err(TgbError::Overflow { .. })
        ));
    }

    #[test]
    fn rejects_bad_inputs() {
        let g = Grid::new(2, 2);
        let p = Position { d: 0, c: 0 };
        assert!(matches!(
            plan(g, Grid::new(2, 3), p, 0),
            Err(TgbError::CpRatio { .. })
        ));
        assert!(matches!(
            plan(Grid::new(0, 1), g, p, 0),
            Err(TgbError::InvalidGrid { .. })
        ));
        assert!(matches!(
            plan(g, g, Position { d: 2, c: 0 }, 0),
            Err(TgbError::PositionOutOfGrid { .. })
        ));
        assert!(matches!(
            plan(g, g, p, u64::MAX),
            Err(TgbError::Overflow { .. })
        ));
        assert!(matches!(
            tgbs_of_step(g, g, u64::MAX),
            Err(TgbError::Overflow { .. })
        ));
        assert_eq!(
            steps_covered(Grid::new(1, 1), Grid::new(3, 1), 7).unwrap(),
            2
        );
    }
}
