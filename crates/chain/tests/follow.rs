//! The producer's cheap jump ([`Follower::jump_from_cached`]): it lands on the newest
//! version without reading the boundary when the version held is live, and when the
//! version held is a ghost that the cached boundary did not reveal, it reads the
//! boundary and lands on the live chain instead of failing or keeping the ghost.

use batchweave_chain::{Chain, ChainError, Follower};
use batchweave_manifest::testing::SyntheticHistory;
use batchweave_manifest::{DecodeLimits, GcBoundary, Manifest, encode_manifest, manifest_key};
use batchweave_store::StreamStore;

/// Version `v` of a stream that one producer `a` writes, a TGB per version.
fn version(v: u64) -> Manifest {
    SyntheticHistory::new().writer("a", v).build()
}

async fn write(store: &StreamStore, m: &Manifest) {
    store
        .put(&manifest_key(m.version), encode_manifest(m))
        .await
        .unwrap();
}

async fn stream_of(versions: u64) -> (StreamStore, Chain) {
    let store = StreamStore::in_memory();
    for v in 1..=versions {
        write(&store, &version(v)).await;
    }
    let chain = Chain::new(store.clone(), DecodeLimits::default());
    (store, chain)
}

#[tokio::test]
async fn a_cached_jump_from_a_live_version_reads_no_boundary() {
    let (_store, chain) = stream_of(6).await;
    let mut f = Follower::new(chain.clone());
    assert!(f.adopt(version(2)).unwrap());
    let before = chain.stats().boundary_reads;
    assert!(f.jump_from_cached(3).await.unwrap());
    assert_eq!(f.current().version, 6, "not the newest version");
    assert_eq!(
        chain.stats().boundary_reads,
        before,
        "the cached jump read the boundary"
    );
    // Nothing newer: it stays, still without a boundary read.
    assert!(!f.jump_from_cached(7).await.unwrap());
    assert_eq!(chain.stats().boundary_reads, before);
}

#[tokio::test]
async fn a_cached_jump_from_a_ghost_lands_on_the_live_chain() {
    let (store, chain) = stream_of(6).await;
    // GC made versions below 4 deleted; a stalled writer then filled slot 2 with a
    // ghost that the live chain does not extend.
    chain
        .advance_boundary(GcBoundary {
            min_live_version: 4,
            low_water_step: 0,
            updated_at_ms: 0,
        })
        .await
        .unwrap();
    for v in 1..4 {
        store.delete(&manifest_key(v)).await.unwrap();
    }
    let ghost = SyntheticHistory::new().writer("zombie", 2).build();
    write(&store, &ghost).await;
    // A producer whose cached boundary predates GC adopted the ghost as its base.
    let mut f = Follower::new(chain.clone());
    assert!(f.adopt(ghost.clone()).unwrap());
    assert_eq!(f.boundary().min_live_version, 0);
    assert!(f.jump_from_cached(3).await.unwrap());
    assert_eq!(f.current().version, 6);
    assert_eq!(
        f.current().as_ref(),
        &version(6),
        "not the live newest version"
    );
    assert_eq!(
        f.boundary().min_live_version,
        4,
        "the boundary was not re-read"
    );
    // Without the fallback the extension check would refuse the jump: the ghost is
    // not extended by the live chain.
    let mut plain = Follower::new(chain.clone());
    plain.adopt(ghost).unwrap();
    assert!(matches!(
        plain.adopt(version(6)),
        Err(ChainError::Diverged { .. })
    ));
}
