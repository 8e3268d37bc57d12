//! Shared checks for the producer tests.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, BTreeSet};

use batchweave_manifest::{
    DecodeLimits, MANIFEST_DIR, Manifest, decode_manifest, manifest_key, parse_manifest_key,
};
use batchweave_store::StreamStore;
use bytes::Bytes;

/// Deterministic slice payloads of one TGB of `producer` at source offset `offset`.
pub fn slices(producer: &str, offset: u64, n: usize) -> Vec<Bytes> {
    (0..n)
        .map(|s| Bytes::from(format!("{producer}/{offset}/{s}")))
        .collect()
}

/// Reads every version in the chain and checks the one-order invariant:
/// versions are contiguous from the oldest present to the newest and each
/// version's TGB list extends the previous one (no trimming in these tests).
/// Returns the newest version.
pub async fn check_chain(store: &StreamStore) -> Manifest {
    let limits = DecodeLimits::default();
    let mut versions: Vec<u64> = store
        .list(MANIFEST_DIR.trim_end_matches('/'))
        .await
        .unwrap()
        .iter()
        .filter_map(|o| parse_manifest_key(&o.key))
        .collect();
    versions.sort_unstable();
    assert!(!versions.is_empty(), "no manifest versions");
    let mut prev: Option<Manifest> = None;
    for w in versions.windows(2) {
        assert_eq!(w[1], w[0] + 1, "version gap between {} and {}", w[0], w[1]);
    }
    for v in &versions {
        let m = decode_manifest(
            &store.get(&manifest_key(*v), 1 << 30).await.unwrap(),
            &limits,
        )
        .unwrap();
        assert_eq!(m.version, *v);
        if let Some(p) = &prev {
            assert!(m.tgbs.len() >= p.tgbs.len(), "version {v} lost TGBs");
            assert_eq!(
                &m.tgbs[..p.tgbs.len()],
                &p.tgbs[..],
                "version {v} does not extend version {}",
                p.version
            );
            for d in &m.tgbs[p.tgbs.len()..] {
                assert_eq!(
                    d.visible_version, *v,
                    "new TGB in {v} has visible_version {}",
                    d.visible_version
                );
            }
        }
        prev = Some(m);
    }
    prev.unwrap()
}

/// Checks exactly-once: every (producer, source offset) appears once, each
/// producer's TGBs are in ascending sequence and offset order, and every
/// object exists. Returns producer -> committed source offsets.
pub async fn check_exactly_once(store: &StreamStore, m: &Manifest) -> BTreeMap<String, Vec<u64>> {
    let mut seen: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut seqs: BTreeSet<(String, u64)> = BTreeSet::new();
    let mut per: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut last_seq: BTreeMap<String, u64> = BTreeMap::new();
    for d in &m.tgbs {
        assert!(
            seen.insert((d.producer_id.clone(), d.source_offset)),
            "duplicate: {} offset {}",
            d.producer_id,
            d.source_offset
        );
        assert!(
            seqs.insert((d.producer_id.clone(), d.sequence)),
            "duplicate sequence: {} {}",
            d.producer_id,
            d.sequence
        );
        let ls = last_seq.entry(d.producer_id.clone()).or_insert(0);
        assert!(
            d.sequence > *ls,
            "{}: sequence {} after {}",
            d.producer_id,
            d.sequence,
            ls
        );
        *ls = d.sequence;
        let offs = per.entry(d.producer_id.clone()).or_default();
        if let Some(&prev) = offs.last() {
            assert!(
                d.source_offset > prev,
                "{}: offset {} after {}",
                d.producer_id,
                d.source_offset,
                prev
            );
        }
        offs.push(d.source_offset);
        let head = store
            .head(&d.key)
            .await
            .unwrap_or_else(|e| panic!("visible TGB {} missing: {e}", d.key));
        assert_eq!(head.size, d.object_size);
    }
    for (id, offs) in &per {
        let entry = &m.producers[id];
        assert_eq!(
            entry.source_offset,
            *offs.last().unwrap(),
            "{id}: state map offset"
        );
    }
    per
}

/// A memory store on a paused tokio clock where every request takes exactly `latency` of
/// virtual time (no bandwidth term, no jitter, no rate limits; `seed` for the model's RNG).
pub fn fixed_latency_store(latency: std::time::Duration, seed: u64) -> StreamStore {
    use std::sync::Arc;

    use batchweave_store::{Clock, LatencyModel, LatencyStore, TokioClock};
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::with_base(1_700_000_000_000));
    let model = LatencyModel {
        first_byte: latency,
        bandwidth: 0.0,
        jitter: std::time::Duration::ZERO,
        put_rate: 0.0,
        get_rate: 0.0,
    };
    let mem = Arc::new(batchweave_store::object_store::memory::InMemory::new());
    let lat = LatencyStore::new(mem, model, seed, clock.clone());
    StreamStore::from_object_store(Arc::new(lat), "", "sim://").with_clock(clock)
}
