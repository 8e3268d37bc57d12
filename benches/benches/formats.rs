//! Criterion benchmarks of the on-store formats and the per-step math:
//!
//! * manifest encode / decode / rebase at 1k and 100k TGB descriptors (32 producers,
//!   `dp = 8`, `cp = 2`, keys like `tgb/p17/0000000001-00000000000000000042.tgb`);
//! * TGB footer encode (`encode_tgb` of 64-byte slices) and decode at 8, 128 and 1024 slices;
//! * `encode_tgb` and whole-object decode + verify of 1 MiB in 128 slices;
//! * DAC `optimal_gap`, mesh `position` and `remap::plan`.
//!
//! Run with `cargo bench -p batchweave-benches -- --quick` (short measurement times; the
//! whole suite takes a couple of minutes on two cores).

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::Duration;

use batchweave_dac::{DacParams, optimal_gap};
use batchweave_manifest::{
    DecodeLimits, Manifest, Pending, ProducerState, TgbDescriptor, check_extends, decode_manifest,
    encode_manifest, rebase, tgb_key, validate,
};
use batchweave_tgb::{
    FooterCheck, Grid, MeshConfig, decode_footer, decode_object, encode_tgb, footer_len, plan,
};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const PRODUCERS: u64 = 32;
const DP: u32 = 8;
const CP: u32 = 2;
/// Payload of one benchmark TGB: 16 slices of 64 KiB.
const TGB_PAYLOAD: u64 = 16 * 64 * 1024;

fn producer(p: u64) -> String {
    format!("p{p}")
}

/// Descriptor of global step `step`: producer `step % 32`, its sequence `step / 32 + 1`.
fn descriptor(step: u64) -> TgbDescriptor {
    let p = step % PRODUCERS;
    let sequence = step / PRODUCERS + 1;
    let footer_length = footer_len(DP * CP) as u32;
    TgbDescriptor {
        key: tgb_key(&producer(p), 1, sequence),
        object_size: TGB_PAYLOAD + u64::from(footer_length) + 32,
        dp: DP,
        cp: CP,
        footer_offset: TGB_PAYLOAD,
        footer_length,
        footer_crc32: (step as u32).wrapping_mul(0x9e37_79b9),
        producer_id: producer(p),
        epoch: 1,
        sequence,
        visible_version: step + 1,
        payload_bytes: TGB_PAYLOAD,
        source_offset: sequence * 1_000,
        slice_stride: 0,
    }
}

/// A valid manifest retaining `n` TGBs written round-robin by 32 producers, one commit per
/// TGB.
fn manifest(n: u64) -> Manifest {
    let tgbs: Vec<TgbDescriptor> = (0..n).map(descriptor).collect();
    let version = n.max(1);
    let producers: BTreeMap<String, ProducerState> = (0..PRODUCERS)
        .map(|p| {
            let last_sequence = (n + PRODUCERS - 1 - p) / PRODUCERS;
            let state = ProducerState {
                epoch: 1,
                incarnation: 0xfeed_0000 + p,
                source_offset: last_sequence * 1_000,
                last_sequence,
                // The version that made its last TGB (step p + 32 (seq - 1)) visible.
                last_commit_version: if last_sequence == 0 {
                    0
                } else {
                    p + PRODUCERS * (last_sequence - 1) + 1
                },
                tgbs_committed: last_sequence,
                last_commit_ms: 1_700_000_000_000 + last_sequence,
                max_commit_age_ms: 0,
            };
            (producer(p), state)
        })
        .collect();
    Manifest {
        version,
        first_step: 0,
        retained_bytes: tgbs.iter().map(|d| d.object_size).sum(),
        total_tgbs: n,
        tgbs,
        producers,
        committed_at_ms: 1_700_000_000_000,
        grid_dp: DP,
        grid_cp: CP,
        committer: String::new(),
    }
}

/// Producer 17's next commit of one TGB on top of `base`.
fn pending(base: &Manifest) -> Pending {
    let id = producer(17);
    let state = base.producers[&id];
    let sequence = state.last_sequence + 1;
    let mut tgb = descriptor(17);
    tgb.key = tgb_key(&id, 1, sequence);
    tgb.sequence = sequence;
    tgb.source_offset = sequence * 1_000;
    tgb.visible_version = 0;
    Pending {
        producer_id: id,
        epoch: state.epoch,
        incarnation: state.incarnation,
        tgbs: vec![tgb],
        source_offset: sequence * 1_000,
        now_ms: 1_800_000_000_000,
    }
}

fn manifest_benches(c: &mut Criterion) {
    let limits = DecodeLimits::default();
    let mut g = c.benchmark_group("manifest");
    for n in [1_000u64, 100_000] {
        let m = manifest(n);
        let bytes = encode_manifest(&m);
        assert_eq!(decode_manifest(&bytes, &limits).expect("valid manifest"), m);
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_with_input(BenchmarkId::new("encode", n), &m, |b, m| {
            b.iter(|| encode_manifest(black_box(m)));
        });
        g.bench_with_input(BenchmarkId::new("decode", n), &bytes, |b, bytes| {
            b.iter(|| decode_manifest(black_box(bytes), &limits));
        });
        let p = pending(&m);
        if let Err(e) = rebase(&m, &p, 0) {
            panic!("benchmark rebase must succeed: {e}");
        }
        // The reader rules alone (decode runs them after the envelope checks), and the
        // extension check a follower runs on every version it adopts.
        g.bench_with_input(BenchmarkId::new("validate", n), &m, |b, m| {
            b.iter(|| validate(black_box(m), &limits));
        });
        let next = rebase(&m, &p, 0).expect("benchmark rebase");
        g.bench_with_input(
            BenchmarkId::new("check_extends", n),
            &(m.clone(), next),
            |b, (m, next)| {
                b.iter(|| check_extends(black_box(m), black_box(next)));
            },
        );
        g.bench_with_input(BenchmarkId::new("rebase", n), &(m, p), |b, (m, p)| {
            b.iter(|| rebase(black_box(m), black_box(p), 0));
        });
    }
    g.finish();
}

fn slices(count: u32, len: usize) -> Vec<Bytes> {
    (0..count)
        .map(|i| Bytes::from(vec![i as u8; len]))
        .collect()
}

fn footer_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("footer");
    for n in [8u32, 128, 1024] {
        let parts = slices(n, 64);
        let tgb = encode_tgb(n / 2, 2, parts.clone()).expect("valid grid");
        let footer = tgb.footer();
        let check = FooterCheck::new(tgb.footer_offset, tgb.footer_crc32);
        g.throughput(Throughput::Bytes(footer.len() as u64));
        g.bench_with_input(BenchmarkId::new("encode", n), &parts, |b, parts| {
            b.iter(|| encode_tgb(n / 2, 2, black_box(parts.clone())));
        });
        g.bench_with_input(BenchmarkId::new("decode", n), &footer, |b, footer| {
            b.iter(|| decode_footer(black_box(footer), check));
        });
    }
    g.finish();

    let mut g = c.benchmark_group("tgb_1MiB_128_slices");
    let parts = slices(128, 8 * 1024);
    let object = encode_tgb(64, 2, parts.clone())
        .expect("valid grid")
        .to_bytes();
    g.throughput(Throughput::Bytes(1 << 20));
    g.bench_function("encode_tgb", |b| {
        b.iter(|| encode_tgb(64, 2, black_box(parts.clone())));
    });
    g.bench_function("decode_object_and_verify", |b| {
        b.iter(|| {
            let index = decode_object(black_box(&object)).expect("valid object");
            let payload = object.slice(..index.footer_offset() as usize);
            index.split_run(0, 128, &payload).expect("slices verify")
        });
    });
    g.finish();
}

fn math_benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("math");
    let params = DacParams::default();
    for n in [2usize, 32, 1024] {
        g.bench_with_input(BenchmarkId::new("dac_optimal_gap", n), &n, |b, &n| {
            b.iter(|| optimal_gap(black_box(n), black_box(0.05), &params));
        });
    }
    // 4096 GPUs: DP 64 x CP 2 x TP 8 x PP 4.
    let mesh = MeshConfig::new(4096, 64, 2, 8, 4);
    let mut rank = 0u32;
    g.bench_function("mesh_position", |b| {
        b.iter(|| {
            rank = (rank + 1_237) % 4096;
            mesh.position(black_box(rank))
        });
    });
    let (tgb, consumer) = (Grid::new(DP, CP), Grid::new(16, 1));
    let pos = MeshConfig::new(128, 16, 1, 8, 1)
        .position(77)
        .expect("valid mesh");
    let mut step = 0u64;
    g.bench_function("remap_plan_8x2_to_16x1", |b| {
        b.iter(|| {
            step += 1;
            plan(tgb, consumer, pos, black_box(step))
        });
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20)
}

criterion_group! {
    name = formats;
    config = config();
    targets = manifest_benches, footer_benches, math_benches
}
criterion_main!(formats);
