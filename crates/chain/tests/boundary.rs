//! The GC boundary is monotone with any number of concurrent reclaimers, on every store
//! target (memory, local directory, and the loopback S3 and Azure servers when
//! configured): it ends at the maximum of everything proposed, and no reader ever sees
//! it move back.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use batchweave_chain::{BOUNDARY_DIR, BOUNDARY_KEEP, Chain, parse_boundary_key};
use batchweave_manifest::{
    DecodeLimits, GC_BOUNDARY_KEY, GcBoundary, decode_gc_boundary, encode_gc_boundary,
};
use batchweave_store::StreamStore;

fn b(min_live: u64, low_water: u64) -> GcBoundary {
    GcBoundary {
        min_live_version: min_live,
        low_water_step: low_water,
        updated_at_ms: 0,
    }
}

/// Proposals of writer `w`: a zig-zag, so that writers often propose less than what
/// another already made durable.
fn proposals(w: u64) -> Vec<GcBoundary> {
    (0..12u64)
        .map(|i| b((i * 7 + w * 13) % 50 + i, (i * 11 + w * 5) % 40 + i))
        .collect()
}

async fn race(store: StreamStore, writers: u64) -> (GcBoundary, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    // A reader that checks every boundary it sees against the one before.
    let reader = {
        let chain = Chain::new(store.clone(), DecodeLimits::default());
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut seen = GcBoundary::default();
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) || reads == 0 {
                let now = chain.boundary().await.unwrap();
                assert!(
                    now.min_live_version >= seen.min_live_version
                        && now.low_water_step >= seen.low_water_step,
                    "the boundary moved back: {seen:?} then {now:?}"
                );
                seen = now;
                reads += 1;
            }
            reads
        })
    };
    let mut tasks = Vec::new();
    for w in 0..writers {
        let chain = Chain::new(store.clone(), DecodeLimits::default());
        tasks.push(tokio::spawn(async move {
            for p in proposals(w) {
                let durable = chain.advance_boundary(p).await.unwrap();
                assert!(
                    durable.min_live_version >= p.min_live_version
                        && durable.low_water_step >= p.low_water_step,
                    "advance_boundary returned {durable:?}, below its proposal {p:?}"
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let reads = reader.await.unwrap();
    let end = Chain::new(store, DecodeLimits::default())
        .boundary()
        .await
        .unwrap();
    (end, reads)
}

fn expected(writers: u64) -> (u64, u64) {
    let all: Vec<GcBoundary> = (0..writers).flat_map(proposals).collect();
    (
        all.iter().map(|p| p.min_live_version).max().unwrap(),
        all.iter().map(|p| p.low_water_step).max().unwrap(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_reclaimers_never_lower_the_boundary() {
    for t in batchweave_store::testing::all_targets() {
        let store = t.open_fresh("boundary-race").await.unwrap();
        let (end, reads) = race(store.clone(), 4).await;
        assert_eq!(
            (end.min_live_version, end.low_water_step),
            expected(4),
            "{}",
            t.name
        );
        assert!(reads > 0);
        // The writers raced for the same log entries: some creates lost.
        assert!(store.stats().conflicts > 0, "{}: no race happened", t.name);
        println!("{}: boundary race of 4 writers ended at {end:?}", t.name);
    }
}

/// The rule this replaces, planted: read the boundary, write max(read, proposal) with a
/// plain overwrite. Two reclaimers interleaved (A reads, B reads, B writes, A writes)
/// lower it; the log cannot be lowered by the same interleaving.
#[tokio::test]
async fn the_old_overwrite_rule_lowers_the_boundary_and_the_log_does_not() {
    let store = StreamStore::in_memory();
    let limits = DecodeLimits::default();
    let read = |s: StreamStore| async move {
        s.get_opt(GC_BOUNDARY_KEY, 1 << 16)
            .await
            .unwrap()
            .map(|x| decode_gc_boundary(&x, &DecodeLimits::default()).unwrap())
            .unwrap_or_default()
    };
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&b(5, 5)))
        .await
        .unwrap();
    let a0 = read(store.clone()).await;
    let b0 = read(store.clone()).await;
    let bw = b(b0.min_live_version.max(9), b0.low_water_step.max(9));
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&bw))
        .await
        .unwrap();
    let aw = b(a0.min_live_version.max(7), a0.low_water_step.max(7));
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&aw))
        .await
        .unwrap();
    assert_eq!(
        read(store.clone()).await.min_live_version,
        7,
        "planted rule lowered 9 to 7"
    );

    // The same interleaving on the log: A and B both read entry 0 (the legacy object),
    // B lands 9, A's create of the same entry conflicts and it merges again.
    let a = Chain::new(store.clone(), limits);
    let bc = Chain::new(store.clone(), limits);
    assert_eq!(a.read_boundary().await.unwrap().index, 0);
    assert_eq!(bc.read_boundary().await.unwrap().index, 0);
    bc.advance_boundary(b(9, 9)).await.unwrap();
    let durable = a.advance_boundary(b(7, 7)).await.unwrap();
    assert_eq!((durable.min_live_version, durable.low_water_step), (9, 9));
    assert_eq!(a.boundary().await.unwrap().min_live_version, 9);
}

#[tokio::test]
async fn a_legacy_boundary_is_merged_and_the_log_is_pruned() {
    let store = StreamStore::in_memory();
    store
        .put(GC_BOUNDARY_KEY, encode_gc_boundary(&b(6, 3)))
        .await
        .unwrap();
    let chain = Chain::new(store.clone(), DecodeLimits::default());
    assert_eq!(chain.boundary().await.unwrap().min_live_version, 6);
    // A proposal below the legacy value in one field keeps the legacy value there.
    let d = chain.advance_boundary(b(2, 8)).await.unwrap();
    assert_eq!((d.min_live_version, d.low_water_step), (6, 8));
    for i in 0..30 {
        chain.advance_boundary(b(10 + i, 10 + i)).await.unwrap();
    }
    assert_eq!(chain.read_boundary().await.unwrap().index, 31);
    chain.prune_boundaries().await.unwrap();
    let left: Vec<u64> = store
        .list(BOUNDARY_DIR.trim_end_matches('/'))
        .await
        .unwrap()
        .iter()
        .filter_map(|o| parse_boundary_key(&o.key))
        .collect();
    assert_eq!(left.len() as u64, BOUNDARY_KEEP + 1, "{left:?}");
    assert_eq!(*left.last().unwrap(), 31);
    // A fresh reader (no cached index) still finds the newest.
    let fresh = Chain::new(store, DecodeLimits::default());
    assert_eq!(fresh.boundary().await.unwrap().min_live_version, 39);
}

/// A reader whose last read found the newest entry pays one listing for the next read,
/// not a listing and a GET: entries are create-only, so the value of an index once read
/// is known. A new entry (another reclaimer's) is read with its GET.
#[tokio::test]
async fn an_unchanged_boundary_costs_one_listing() {
    let store = StreamStore::in_memory();
    let gc = Chain::new(store.clone(), DecodeLimits::default());
    gc.advance_boundary(b(4, 2)).await.unwrap();
    let reader = Chain::new(store.clone(), DecodeLimits::default());
    assert_eq!(reader.boundary().await.unwrap(), b(4, 2));
    assert_eq!(reader.stats().boundary_gets, 1);
    let gets_before = store.stats().gets;
    for _ in 0..10 {
        assert_eq!(reader.boundary().await.unwrap(), b(4, 2));
    }
    let s = reader.stats();
    assert_eq!((s.boundary_reads, s.boundary_gets), (11, 1), "{s:?}");
    assert_eq!(
        store.stats().gets,
        gets_before,
        "reads of a known newest entry made GETs"
    );
    gc.advance_boundary(b(9, 7)).await.unwrap();
    assert_eq!(reader.boundary().await.unwrap(), b(9, 7));
    assert_eq!(reader.stats().boundary_gets, 2);
    // The writer knows what it created: its own read after the advance needs no GET.
    let writer_gets = gc.stats().boundary_gets;
    assert_eq!(gc.boundary().await.unwrap(), b(9, 7));
    assert_eq!(gc.stats().boundary_gets, writer_gets);
}

/// The remembered entry is never taken for the newest once newer entries exist, even
/// when its index is pruned and then created again by a stale writer with an older
/// value (the only way one index can hold two values).
#[tokio::test]
async fn a_remembered_entry_pruned_and_rewritten_is_not_taken_for_the_newest() {
    let store = StreamStore::in_memory();
    let gc = Chain::new(store.clone(), DecodeLimits::default());
    gc.advance_boundary(b(3, 3)).await.unwrap();
    let reader = Chain::new(store.clone(), DecodeLimits::default());
    let first = reader.read_boundary().await.unwrap();
    assert_eq!(first.index, 1);
    for i in 0..20 {
        gc.advance_boundary(b(10 + i, 10 + i)).await.unwrap();
    }
    gc.prune_boundaries().await.unwrap();
    assert!(
        store
            .get_opt(&batchweave_chain::boundary_key(1), 1 << 16)
            .await
            .unwrap()
            .is_none(),
        "entry 1 should be pruned"
    );
    // A stale writer that read entry 0 creates entry 1 again, lower than the newest.
    store
        .create(
            &batchweave_chain::boundary_key(1),
            encode_gc_boundary(&b(5, 5)),
        )
        .await
        .unwrap();
    let now = reader.read_boundary().await.unwrap();
    assert_eq!((now.index, now.value), (21, b(29, 29)));
    assert_eq!(reader.boundary().await.unwrap(), b(29, 29));
}
