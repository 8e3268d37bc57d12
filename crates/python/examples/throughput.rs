//! The Rust side of the Python-vs-Rust throughput benchmark
//! (`examples/python/bench_throughput.py` runs both and reports the ratios).
//!
//! `throughput produce DIR SLICE_BYTES STEPS RANKS`: one producer appends STEPS TGBs of
//! RANKS x 1 slices and closes. `throughput consume DIR STEPS RANKS`: RANKS consumers (one
//! task each) read every step. Prints `{"seconds": S, "bytes": B}`.

use std::time::Instant;

use batchweave::{MeshConfig, RankConfig, Stream};
use bytes::Bytes;

fn arg(i: usize) -> String {
    std::env::args().nth(i).unwrap_or_default()
}

fn num(i: usize) -> u64 {
    arg(i)
        .parse()
        .unwrap_or_else(|_| panic!("argument {i} must be a number"))
}

#[tokio::main]
async fn main() -> Result<(), batchweave::Error> {
    let stream = Stream::open(&arg(2)).await?;
    let mut t0 = Instant::now();
    let bytes = match arg(1).as_str() {
        "produce" => {
            let (slice, steps, ranks) = (num(3) as usize, num(4), num(5) as u32);
            let data: Vec<Bytes> = (0..ranks)
                .map(|r| Bytes::from(vec![r as u8; slice]))
                .collect();
            // The clock starts after the slices exist, as in the Python script.
            t0 = Instant::now();
            let mut p = stream.producer("bench-rust").open().await?;
            for q in 1..=steps {
                p.append(ranks, 1, data.clone(), q).await?;
            }
            p.close().await?;
            steps * u64::from(ranks) * slice as u64
        }
        "consume" => {
            let (steps, ranks) = (num(3), num(4) as u32);
            let mut tasks = Vec::new();
            for rank in 0..ranks {
                let stream = stream.clone();
                tasks.push(tokio::spawn(async move {
                    let me =
                        RankConfig::new(rank, MeshConfig::new(ranks, ranks, 1, 1, 1), "bench-rust");
                    let mut c = stream.consumer(me).open().await?;
                    let mut n = 0u64;
                    for _ in 0..steps {
                        n += c
                            .next()
                            .await?
                            .data
                            .iter()
                            .map(|b| b.len() as u64)
                            .sum::<u64>();
                    }
                    Ok::<u64, batchweave::Error>(n)
                }));
            }
            let mut total = 0;
            for t in tasks {
                total += t
                    .await
                    .map_err(|e| batchweave::Error::invalid(e.to_string()))??;
            }
            total
        }
        other => panic!("unknown mode {other:?}: produce or consume"),
    };
    println!(
        "{{\"seconds\": {}, \"bytes\": {bytes}}}",
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
