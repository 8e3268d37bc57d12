//! Watermarks and the low-water mark (paper eq. 11).

use std::collections::BTreeMap;
use std::time::Duration;

use batchweave_manifest::{
    DecodeLimits, WATERMARK_DIR, decode_group_layout, decode_watermark, group_layout_key,
    layout_mark_names, parse_watermark_key, watermark_key,
};
use batchweave_store::StreamStore;

use crate::GcError;

const SMALL_OBJECT_LIMIT: u64 = 64 * 1024;

/// The mark of one position of a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionMark {
    /// Position name, `d{d}-c{c}`.
    pub position: String,
    /// Manifest version of its last checkpoint (0 if it has none yet).
    pub version: u64,
    /// Next TGB step it needs after restoring its last checkpoint (0 if none).
    pub step: u64,
    /// When it was written (Unix ms; 0 if none).
    pub updated_at_ms: u64,
    /// False if the position has not written a watermark yet.
    pub present: bool,
}

/// The mark of one consumer group: the minimum over its positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMark {
    /// Group name.
    pub group: String,
    /// Minimum step over positions.
    pub step: u64,
    /// Minimum version over positions.
    pub version: u64,
    /// Every position of the group's layout (or, without a layout, every
    /// position that wrote a watermark).
    pub positions: Vec<PositionMark>,
    /// True if every position is older than the dead-group timeout.
    pub dead: bool,
}

/// The stream's low-water mark: the minimum over live groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LowWater {
    /// Global TGB step below which no live checkpoint needs data, if any group exists.
    pub step: Option<u64>,
    /// Manifest version below which no live checkpoint needs a version.
    pub version: Option<u64>,
    /// Per-group detail.
    pub groups: Vec<GroupMark>,
}

/// Reads every group's layout and watermarks and computes the low-water mark.
pub(crate) async fn low_water(
    store: &StreamStore,
    limits: &DecodeLimits,
    dead_after: Option<Duration>,
) -> Result<LowWater, GcError> {
    let listed = store.list(WATERMARK_DIR.trim_end_matches('/')).await?;
    // group -> (layout present?, positions with watermark objects)
    let mut groups: BTreeMap<String, (bool, Vec<String>)> = BTreeMap::new();
    for o in &listed {
        if let Some((g, p)) = parse_watermark_key(&o.key) {
            groups
                .entry(g.to_string())
                .or_default()
                .1
                .push(p.to_string());
        } else if let Some(g) = o
            .key
            .strip_prefix(WATERMARK_DIR)
            .and_then(|r| r.strip_suffix("/_layout"))
        {
            groups.entry(g.to_string()).or_default().0 = true;
        }
    }
    let now = store.clock().unix_millis();
    let mut out = Vec::new();
    for (group, (has_layout, written)) in groups {
        // With a layout, exactly its positions count (watermarks of positions
        // of an older layout are ignored); without one, every written position.
        let mut names: Vec<String> = written;
        if has_layout {
            let key = group_layout_key(&group)?;
            if let Some(b) = store.get_opt(&key, SMALL_OBJECT_LIMIT).await? {
                let l = decode_group_layout(&b, limits)?;
                names = layout_mark_names(l.dp, l.cp, l.tp, l.pp);
            }
        }
        names.sort();
        names.dedup();
        let mut positions = Vec::with_capacity(names.len());
        for p in names {
            let key = watermark_key(&group, &p)?;
            let mark = match store.get_opt(&key, SMALL_OBJECT_LIMIT).await? {
                Some(b) => {
                    let w = decode_watermark(&b, limits)?;
                    PositionMark {
                        position: p,
                        version: w.version,
                        step: w.step,
                        updated_at_ms: w.updated_at_ms,
                        present: true,
                    }
                }
                None => PositionMark {
                    position: p,
                    version: 0,
                    step: 0,
                    updated_at_ms: 0,
                    present: false,
                },
            };
            positions.push(mark);
        }
        let step = positions.iter().map(|p| p.step).min().unwrap_or(0);
        let version = positions.iter().map(|p| p.version).min().unwrap_or(0);
        let dead = match dead_after {
            Some(d) => {
                let cutoff = now.saturating_sub(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
                !positions.is_empty()
                    && positions
                        .iter()
                        .all(|p| p.present && p.updated_at_ms < cutoff)
            }
            None => false,
        };
        out.push(GroupMark {
            group,
            step,
            version,
            positions,
            dead,
        });
    }
    let live = out.iter().filter(|g| !g.dead);
    Ok(LowWater {
        step: live.clone().map(|g| g.step).min(),
        version: live.map(|g| g.version).min(),
        groups: out,
    })
}
