//! Reading the manifest chain: the newest version, one version, the GC boundary.

use std::time::Duration;

use batchweave_manifest::{
    DecodeLimits, GC_BOUNDARY_KEY, GcBoundary, MANIFEST_DIR, Manifest, decode_gc_boundary,
    decode_manifest, manifest_key, parse_manifest_key,
};
use batchweave_store::{StoreError, StreamStore};

use crate::ProducerError;

/// Largest GC boundary object accepted.
const BOUNDARY_LIMIT: u64 = 64 * 1024;

/// Reads `gc/boundary`; a stream GC never touched has the zero boundary.
pub(crate) async fn read_boundary(
    store: &StreamStore,
    limits: &DecodeLimits,
) -> Result<GcBoundary, ProducerError> {
    match store.get_opt(GC_BOUNDARY_KEY, BOUNDARY_LIMIT).await? {
        Some(b) => Ok(decode_gc_boundary(&b, limits)?),
        None => Ok(GcBoundary::default()),
    }
}

/// Reads version `v`; `Ok(None)` if it does not exist (not yet, or deleted).
pub(crate) async fn read_version(
    store: &StreamStore,
    v: u64,
    limits: &DecodeLimits,
) -> Result<Option<Manifest>, ProducerError> {
    match store
        .get_opt(&manifest_key(v), limits.max_bytes.saturating_add(64))
        .await?
    {
        Some(bytes) => {
            let m = decode_manifest(&bytes, limits)?;
            if m.version != v {
                return Err(ProducerError::Manifest(
                    batchweave_manifest::ManifestError::Inconsistent {
                        reason: format!("object {} holds version {}", manifest_key(v), m.version),
                    },
                ));
            }
            Ok(Some(m))
        }
        None => Ok(None),
    }
}

/// The newest readable version at or after `from` (`from` = 0 or 1 scans
/// from the start), by one listing that starts after `from - 1`; `None` if
/// the listing shows nothing there. Retries a few times when a listed
/// version cannot be read (deleted concurrently or a stale view).
pub(crate) async fn newest_from(
    store: &StreamStore,
    from: u64,
    limits: &DecodeLimits,
) -> Result<Option<Manifest>, ProducerError> {
    for attempt in 0..5u32 {
        let after = manifest_key(from.saturating_sub(1));
        let listed = match store
            .list_after(MANIFEST_DIR.trim_end_matches('/'), &after)
            .await
        {
            Ok(l) => l,
            Err(StoreError::NotFound { .. }) => Vec::new(),
            Err(e) => return Err(e.into()),
        };
        let Some(max) = listed
            .iter()
            .filter_map(|o| parse_manifest_key(&o.key))
            .max()
        else {
            return Ok(None);
        };
        if let Some(m) = read_version(store, max, limits).await? {
            return Ok(Some(m));
        }
        store
            .clock()
            .sleep(Duration::from_millis(5 << attempt))
            .await;
    }
    Ok(None)
}

/// The newest version of the stream (genesis if it has none), found from the
/// GC boundary so that deleted history is never listed.
pub(crate) async fn newest(
    store: &StreamStore,
    limits: &DecodeLimits,
) -> Result<Manifest, ProducerError> {
    let b = read_boundary(store, limits).await?;
    Ok(newest_from(store, b.min_live_version.max(1), limits)
        .await?
        .unwrap_or_else(Manifest::genesis))
}
