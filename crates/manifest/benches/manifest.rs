//! What one commit attempt costs in CPU at scale (issue #17, section 4): encoding, decoding
//! (with every reader rule) and rebasing the newest manifest of a stream with 1,024
//! producer entries and 10,000 retained TGBs, and the three together, which is what a
//! producer's attempt does besides its requests (decode the base, rebase, encode).
//!
//! `cargo bench -p batchweave-manifest --features test-util`

use std::hint::black_box;

use batchweave_manifest::testing::SyntheticHistory;
use batchweave_manifest::{
    DecodeLimits, Manifest, Pending, decode_manifest, described_tgb_key, encode_manifest, rebase,
    validate,
};
use criterion::{Criterion, criterion_group, criterion_main};

const PRODUCERS: usize = 1024;
const RETAINED: u64 = 10_000;

/// The newest version of a stream of `PRODUCERS` writers of 10 TGBs each (4 x 2 grid,
/// 2 KiB slices), trimmed to `RETAINED` descriptors, under self-describing keys.
fn stream() -> Manifest {
    let mut h = SyntheticHistory::new().grid(4, 2, 2048).retain(RETAINED);
    for i in 0..PRODUCERS {
        h = h.writer(format!("prep-{i:04}"), 10);
    }
    let mut m = h.build();
    // Self-describing keys (form 2), as every current producer names its TGBs.
    for d in &mut m.tgbs {
        d.key = described_tgb_key(d);
    }
    m
}

/// The next TGB of the first writer, as its producer would commit it.
fn next_commit(m: &Manifest) -> Pending {
    let id = "prep-0000";
    let last = m
        .tgbs
        .iter()
        .rev()
        .find(|d| d.producer_id == id)
        .expect("the writer retains a TGB")
        .clone();
    let sequence = last.sequence + 1;
    let mut d = batchweave_manifest::TgbDescriptor {
        sequence,
        source_offset: sequence,
        visible_version: 0,
        ..last
    };
    d.key = described_tgb_key(&d);
    Pending {
        producer_id: id.to_owned(),
        epoch: d.epoch,
        incarnation: m.producers[id].incarnation,
        source_offset: sequence,
        tgbs: vec![d],
        now_ms: m.committed_at_ms + 1,
    }
}

fn manifest(c: &mut Criterion) {
    let m = stream();
    let limits = DecodeLimits::default();
    let bytes = encode_manifest(&m);
    let pending = next_commit(&m);
    let trim = m.first_step;
    assert_eq!(
        (m.producers.len(), m.tgbs.len()),
        (PRODUCERS, RETAINED as usize)
    );
    assert_eq!(decode_manifest(&bytes, &limits).unwrap(), m);
    rebase(&m, &pending, trim).unwrap();
    eprintln!(
        "manifest: {PRODUCERS} producers, {RETAINED} retained TGBs, {} bytes encoded",
        bytes.len()
    );

    let mut g = c.benchmark_group("manifest_1024_producers_10000_tgbs");
    g.sample_size(20);
    g.bench_function("encode", |b| b.iter(|| encode_manifest(black_box(&m))));
    g.bench_function("decode_and_validate", |b| {
        b.iter(|| decode_manifest(black_box(&bytes), &limits).unwrap())
    });
    g.bench_function("validate", |b| {
        b.iter(|| validate(black_box(&m), &limits).unwrap())
    });
    g.bench_function("rebase_one_tgb", |b| {
        b.iter(|| rebase(black_box(&m), &pending, trim).unwrap())
    });
    g.bench_function("attempt_decode_rebase_encode", |b| {
        b.iter(|| {
            let base = decode_manifest(black_box(&bytes), &limits).unwrap();
            let candidate = rebase(&base, &pending, trim).unwrap();
            encode_manifest(&candidate)
        })
    });
    g.finish();
}

criterion_group!(benches, manifest);
criterion_main!(benches);
