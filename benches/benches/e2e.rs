//! End to end: P producers ingest S global batches, W ranks consume them, on
//! InMemory and on a local directory. Throughput is payload bytes per second
//! of the whole pipeline (ingest + commit + consume with ranged reads).

use std::time::Duration;

use batchweave::{MeshConfig, ProducerSettings, RankConfig, Stream};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

const PRODUCERS: u64 = 4;
const STEPS: u64 = 32;
const DP: u32 = 4;
const SLICE: usize = 64 * 1024;

async fn pipeline(stream: Stream) {
    let mut tasks = Vec::new();
    for p in 0..PRODUCERS {
        let stream = stream.clone();
        tasks.push(tokio::spawn(async move {
            let mut prod = stream
                .producer(format!("p{p}"))
                .settings(ProducerSettings::default())
                .open()
                .await
                .unwrap();
            for seq in 1..=STEPS / PRODUCERS {
                let slices = (0..DP)
                    .map(|d| Bytes::from(vec![(seq as u8) ^ (d as u8); SLICE]))
                    .collect();
                prod.append(DP, 1, slices, seq).await.unwrap();
            }
            prod.close().await.unwrap();
        }));
    }
    for r in 0..DP {
        let stream = stream.clone();
        tasks.push(tokio::spawn(async move {
            let mut c = stream
                .consumer(RankConfig::new(
                    r,
                    MeshConfig::new(DP, DP, 1, 1, 1),
                    "bench",
                ))
                .open()
                .await
                .unwrap();
            for _ in 0..STEPS {
                let b = c.next().await.unwrap();
                assert_eq!(b.data[0].len(), SLICE);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

fn e2e(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut g = c.benchmark_group("e2e_ingest_consume");
    g.sample_size(10)
        .measurement_time(Duration::from_secs(5))
        .warm_up_time(Duration::from_secs(1));
    g.throughput(Throughput::Bytes(STEPS * u64::from(DP) * SLICE as u64));
    g.bench_function(
        BenchmarkId::new("memory", format!("{PRODUCERS}p-{DP}r-{STEPS}steps")),
        |b| {
            b.to_async(&rt)
                .iter(|| async { pipeline(Stream::open("memory:///").await.unwrap()).await })
        },
    );
    g.bench_function(
        BenchmarkId::new("local_dir", format!("{PRODUCERS}p-{DP}r-{STEPS}steps")),
        |b| {
            b.to_async(&rt).iter(|| async {
                let dir = tempfile::tempdir().unwrap();
                pipeline(Stream::open(dir.path().to_str().unwrap()).await.unwrap()).await
            })
        },
    );
    g.finish();
}

criterion_group!(benches, e2e);
criterion_main!(benches);
