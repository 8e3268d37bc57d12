//! `bench peers` (issue #17, section 2): BatchWeave side by side with a Kafka-protocol
//! broker and NATS JetStream on one machine, the way the paper compares itself with Kafka
//! under strict TGB semantics (one message = one complete TGB, the same producer count).
//!
//! ```text
//!  ingestion, per (producers N, TGB size):     reads, per (W = 8 ranks, slice size):
//!   raw PUT          N tasks, one PUT each      BatchWeave  range reads of each rank's slice
//!   BatchWeave dac   N producers, same store    Kafka       every rank fetches every message
//!   BatchWeave coop  N producers, same store    NATS        every rank fetches every message
//!   Kafka protocol   N clients, acks = all,
//!                    one topic, one partition
//!   NATS JetStream   N clients, publish + ack,
//!                    one stream, file storage
//! ```
//!
//! A Kafka topic keeps one global order only within a partition, so the topic has one
//! partition, as a global TGB order needs. Each client has one message in flight and
//! counts it once the broker acknowledged it (Kafka: `acks = all`; JetStream: the
//! publish ack, after the stream stored it), as a BatchWeave producer counts a TGB once a
//! manifest version lists it. Every address must be a loopback address, and every
//! request runs under the arm's deadline.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs as _};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use batchweave::{PolicyKind, SliceLayout, Stream};
use bytes::Bytes;
use serde_json::{Value, json};

use super::consumers::{Reads, measured, read_ranks, write_stream};
use super::ingest::{Shape, cpu_s_per_gb, ingest, raw_put};
use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, ratio, round, size_label};
use crate::rusage;

/// The peer brokers to measure, as `host:port` loopback addresses, and what each stores to
/// (reported in the JSON).
#[derive(Debug, Clone, Default)]
pub struct Peers {
    /// A Kafka-protocol broker (Tansu), or `None` to leave it out.
    pub kafka: Option<String>,
    /// What the Kafka-protocol broker stores to (for example `s3://tansu/ on SeaweedFS`).
    pub kafka_storage: String,
    /// A NATS server with JetStream, or `None` to leave it out.
    pub nats: Option<String>,
    /// What the NATS server stores to (for example `file storage in DIR`).
    pub nats_storage: String,
    /// Measured window of each ingestion arm (after a warmup of a quarter of it, at
    /// least 2 s).
    pub window: Duration,
}

/// The loopback socket address `addr` names (`host:port`), or an error saying why not.
pub fn loopback(addr: &str) -> anyhow::Result<SocketAddr> {
    let a = addr
        .to_socket_addrs()
        .with_context(|| format!("resolving {addr:?} (expected host:port)"))?
        .next()
        .with_context(|| format!("{addr:?} names no address"))?;
    let ip: IpAddr = a.ip();
    if !ip.is_loopback() {
        bail!("{addr} is not a loopback address: benchmarks talk to 127.0.0.1 or ::1 only");
    }
    Ok(a)
}

/// One peer ingestion arm's result.
#[derive(Debug, Clone, Copy, Default)]
struct PeerIngest {
    bytes_per_sec: f64,
    bytes_total: u64,
    messages: u64,
    cpu: Option<Duration>,
}

/// Counts acknowledged bytes inside the measured window.
#[derive(Debug)]
struct Window {
    from: Instant,
    end: Instant,
    counted: AtomicU64,
    all: AtomicU64,
    messages: AtomicU64,
}

impl Window {
    fn new(warmup: Duration, window: Duration) -> Arc<Self> {
        Self::starting(Instant::now(), warmup, window)
    }

    fn starting(start: Instant, warmup: Duration, window: Duration) -> Arc<Self> {
        let from = start + warmup;
        Arc::new(Self {
            from,
            end: from + window,
            counted: AtomicU64::new(0),
            all: AtomicU64::new(0),
            messages: AtomicU64::new(0),
        })
    }

    fn left(&self) -> Duration {
        self.end.saturating_duration_since(Instant::now())
    }

    fn acked(&self, bytes: u64) {
        self.acked_at(bytes, Instant::now());
    }

    fn acked_at(&self, bytes: u64, now: Instant) {
        self.all.fetch_add(bytes, Ordering::Relaxed);
        if now >= self.from && now <= self.end {
            self.counted.fetch_add(bytes, Ordering::Relaxed);
            self.messages.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn result(&self, window: Duration, cpu: Option<Duration>) -> PeerIngest {
        PeerIngest {
            bytes_per_sec: self.counted.load(Ordering::Relaxed) as f64
                / window.as_secs_f64().max(1e-9),
            bytes_total: self.all.load(Ordering::Relaxed),
            messages: self.messages.load(Ordering::Relaxed),
            cpu,
        }
    }
}

/// Runs `n` producer loops of `size`-byte messages over a warmup and a measured window;
/// each loop's `publish` sends one message and returns once it is acknowledged. Measures
/// the process's CPU over the run.
async fn drive<F, Fut>(
    n: usize,
    size: usize,
    (warmup, window): (Duration, Duration),
    publish: F,
) -> anyhow::Result<PeerIngest>
where
    F: Fn(usize, Bytes) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let usage0 = rusage::now();
    let w = &Window::new(warmup, window);
    let publish = Arc::new(publish);
    let body = Bytes::from(vec![0x5a; size]);
    let mut tasks = Vec::new();
    for i in 0..n {
        let (w, publish, body) = (w.clone(), publish.clone(), body.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let left = w.left();
                if left.is_zero() {
                    return anyhow::Ok(());
                }
                match tokio::time::timeout(left, publish(i, body.clone())).await {
                    Ok(r) => r?,
                    Err(_) => return Ok(()),
                }
                w.acked(body.len() as u64);
            }
        }));
    }
    for t in tasks {
        t.await.context("publisher task")??;
    }
    let cpu = rusage::now().zip(usage0).map(|(b, a)| b.cpu_since(&a));
    Ok(w.result(window, cpu))
}

/// A name per arm, unique within the brokers' lifetime (topics and streams are never
/// reused between arms; `cargo xtask peers` starts fresh brokers).
fn arm_name(what: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "bw{what}{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

mod kafka {
    //! The Kafka-protocol arms, with the pure-Rust `rskafka` client.

    use std::collections::BTreeMap;
    use std::net::SocketAddr;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use anyhow::Context;
    use bytes::Bytes;
    use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
    use rskafka::client::{Client, ClientBuilder};
    use rskafka::record::Record;

    /// Largest message either arm sends, plus framing.
    const MAX_MESSAGE: usize = 64 << 20;

    pub(super) async fn client(addr: SocketAddr) -> anyhow::Result<Client> {
        ClientBuilder::new(vec![addr.to_string()])
            .max_message_size(MAX_MESSAGE)
            .build()
            .await
            .with_context(|| format!("connecting to the Kafka-protocol broker at {addr}"))
    }

    /// Creates `topic` with one partition (one global order) and returns a client of it.
    pub(super) async fn topic(addr: SocketAddr, topic: &str) -> anyhow::Result<PartitionClient> {
        let c = client(addr).await?;
        c.controller_client()?
            .create_topic(topic, 1, 1, 10_000)
            .await
            .with_context(|| format!("creating topic {topic}"))?;
        partition(&c, topic).await
    }

    pub(super) async fn partition(c: &Client, topic: &str) -> anyhow::Result<PartitionClient> {
        c.partition_client(topic.to_owned(), 0, UnknownTopicHandling::Retry)
            .await
            .with_context(|| format!("opening partition 0 of {topic}"))
    }

    /// Produces one message (`acks = all`, no compression) and waits for its ack.
    pub(super) async fn produce(p: &PartitionClient, body: Bytes) -> anyhow::Result<()> {
        let record = Record {
            key: None,
            value: Some(body.to_vec()),
            headers: BTreeMap::new(),
            timestamp: rskafka::chrono::Utc::now(),
        };
        p.produce(vec![record], Compression::NoCompression)
            .await
            .context("produce")?;
        Ok(())
    }

    /// Fetches messages `0..count` in order; returns the payload bytes received (each
    /// message's value; the protocol's own framing is not counted) and the time the
    /// fetches took.
    pub(super) async fn fetch_all(
        p: &PartitionClient,
        count: i64,
        max_bytes: i32,
        deadline: Instant,
    ) -> anyhow::Result<(u64, u64, Duration)> {
        let t0 = Instant::now();
        let (mut next, mut bytes, mut got) = (0i64, 0u64, 0u64);
        while next < count {
            let left = deadline.saturating_duration_since(Instant::now());
            anyhow::ensure!(
                !left.is_zero(),
                "fetching: {got} of {count} messages by the deadline"
            );
            let (records, _hw) =
                tokio::time::timeout(left, p.fetch_records(next, 1..max_bytes, 500))
                    .await
                    .context("fetch timed out")?
                    .context("fetch")?;
            for r in records {
                if r.offset < next {
                    continue;
                }
                next = r.offset + 1;
                bytes += r.record.value.map_or(0, |v| v.len() as u64);
                got += 1;
            }
        }
        Ok((bytes, got, t0.elapsed()))
    }

    /// Deletes `topic` (best effort: a bench must not fill the broker's storage).
    pub(super) async fn drop_topic(addr: SocketAddr, topic: &str) {
        if let Ok(c) = client(addr).await
            && let Ok(cc) = c.controller_client()
        {
            let _ =
                tokio::time::timeout(Duration::from_secs(30), cc.delete_topic(topic, 10_000)).await;
        }
    }

    pub(super) type Shared = Arc<PartitionClient>;
}

mod nats {
    //! The NATS JetStream arms, with the `async-nats` client.

    use std::net::SocketAddr;
    use std::time::{Duration, Instant};

    use anyhow::Context;
    use async_nats::jetstream::{self, consumer, stream};
    use bytes::Bytes;
    use futures::StreamExt as _;

    pub(super) async fn context(addr: SocketAddr) -> anyhow::Result<jetstream::Context> {
        let c = async_nats::ConnectOptions::new()
            .connection_timeout(Duration::from_secs(10))
            .connect(addr.to_string())
            .await
            .with_context(|| format!("connecting to NATS at {addr}"))?;
        Ok(jetstream::new(c))
    }

    /// Creates stream `name` on subject `name` with file storage.
    pub(super) async fn create(js: &jetstream::Context, name: &str) -> anyhow::Result<()> {
        js.create_stream(stream::Config {
            name: name.to_owned(),
            subjects: vec![name.to_owned()],
            storage: stream::StorageType::File,
            max_message_size: 64 << 20,
            ..Default::default()
        })
        .await
        .with_context(|| format!("creating JetStream stream {name} (file storage)"))?;
        Ok(())
    }

    /// Deletes stream `name` (best effort: a bench must not fill the server's disk).
    pub(super) async fn drop_stream(addr: SocketAddr, name: &str) {
        if let Ok(js) = context(addr).await {
            let _ = tokio::time::timeout(Duration::from_secs(30), js.delete_stream(name)).await;
        }
    }

    /// Publishes one message and waits for the stream's ack.
    pub(super) async fn publish(
        js: &jetstream::Context,
        subject: &str,
        body: Bytes,
    ) -> anyhow::Result<()> {
        js.publish(subject.to_owned(), body)
            .await
            .context("publish")?
            .await
            .context("publish ack")?;
        Ok(())
    }

    /// Reads messages `1..=count` of stream `name` with an ordered consumer; returns the
    /// payload bytes received and the time it took.
    pub(super) async fn fetch_all(
        js: &jetstream::Context,
        name: &str,
        count: u64,
        deadline: Instant,
    ) -> anyhow::Result<(u64, u64, Duration)> {
        let t0 = Instant::now();
        let s = js.get_stream(name).await.context("opening the stream")?;
        let c = s
            .create_consumer(consumer::pull::OrderedConfig {
                deliver_policy: consumer::DeliverPolicy::All,
                ..Default::default()
            })
            .await
            .context("creating an ordered consumer")?;
        let mut msgs = c.messages().await.context("consumer messages")?;
        let (mut bytes, mut got) = (0u64, 0u64);
        while got < count {
            let left = deadline.saturating_duration_since(Instant::now());
            let m = tokio::time::timeout(left, msgs.next())
                .await
                .map_err(|_| {
                    anyhow::anyhow!("fetching: {got} of {count} messages by the deadline")
                })?
                .context("the consumer ended")?
                .context("consumer message")?;
            bytes += m.payload.len() as u64;
            got += 1;
        }
        Ok((bytes, got, t0.elapsed()))
    }
}

async fn kafka_ingest(
    addr: SocketAddr,
    n: usize,
    size: usize,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<PeerIngest> {
    let topic = arm_name("p");
    kafka::topic(addr, &topic).await?;
    // One client (one connection) per producer, as N separate workers would have.
    let mut clients: Vec<kafka::Shared> = Vec::with_capacity(n);
    for _ in 0..n {
        let c = kafka::client(addr).await?;
        clients.push(Arc::new(kafka::partition(&c, &topic).await?));
    }
    let clients = Arc::new(clients);
    let r = drive(n, size, (warmup, window), move |i, body| {
        let c = clients[i].clone();
        async move { kafka::produce(&c, body).await }
    })
    .await;
    kafka::drop_topic(addr, &topic).await;
    r
}

async fn nats_ingest(
    addr: SocketAddr,
    n: usize,
    size: usize,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<PeerIngest> {
    let name = arm_name("p");
    let first = nats::context(addr).await?;
    nats::create(&first, &name).await?;
    let mut clients = vec![first];
    for _ in 1..n {
        clients.push(nats::context(addr).await?);
    }
    let clients = Arc::new(clients);
    let subject: Arc<str> = name.as_str().into();
    let r = drive(n, size, (warmup, window), move |i, body| {
        let (js, subject) = (clients[i].clone(), subject.clone());
        async move { nats::publish(&js, &subject, body).await }
    })
    .await;
    nats::drop_stream(addr, &name).await;
    r
}

/// `world` ranks, each reading every one of `steps` messages of `world * size` bytes and
/// keeping its `size`-byte slice, as a Kafka or NATS consumer of strict TGBs must.
#[derive(Debug, Clone, Copy)]
enum Broker {
    Kafka(SocketAddr),
    Nats(SocketAddr),
}

async fn broker_reads(b: Broker, world: u32, size: usize, steps: u64) -> anyhow::Result<Reads> {
    let name = arm_name("c");
    let r = broker_reads_in(b, &name, world, size, steps).await;
    match b {
        Broker::Kafka(addr) => kafka::drop_topic(addr, &name).await,
        Broker::Nats(addr) => nats::drop_stream(addr, &name).await,
    }
    r
}

async fn broker_reads_in(
    b: Broker,
    name: &str,
    world: u32,
    size: usize,
    steps: u64,
) -> anyhow::Result<Reads> {
    let tgb = Bytes::from(vec![0x3c; size * world as usize]);
    let deadline = Instant::now() + Duration::from_secs(300);
    match b {
        Broker::Kafka(addr) => {
            let p = kafka::topic(addr, name).await?;
            for _ in 0..steps {
                kafka::produce(&p, tgb.clone()).await?;
            }
        }
        Broker::Nats(addr) => {
            let js = nats::context(addr).await?;
            nats::create(&js, name).await?;
            for _ in 0..steps {
                nats::publish(&js, name, tgb.clone()).await?;
            }
        }
    }
    let mut tasks = Vec::new();
    for _ in 0..world {
        let name = name.to_owned();
        let max_bytes = i32::try_from((tgb.len() + 4096) * 4).unwrap_or(i32::MAX);
        tasks.push(tokio::spawn(async move {
            match b {
                Broker::Kafka(addr) => {
                    let c = kafka::client(addr).await?;
                    let p = kafka::partition(&c, &name).await?;
                    kafka::fetch_all(&p, i64::try_from(steps)?, max_bytes, deadline).await
                }
                Broker::Nats(addr) => {
                    let js = nats::context(addr).await?;
                    nats::fetch_all(&js, &name, steps, deadline).await
                }
            }
        }));
    }
    let (mut fetched, mut rates) = (0u64, Vec::new());
    for t in tasks {
        let (bytes, got, el) = t.await.context("rank task")??;
        anyhow::ensure!(got == steps, "a rank got {got} of {steps} messages");
        fetched += bytes;
        rates.push(ratio((got * size as u64) as f64, el.as_secs_f64()) / 1e6);
    }
    let delivered = steps * u64::from(world) * size as u64;
    Ok(Reads {
        amplification: ratio(fetched as f64, delivered as f64),
        amplification_all: ratio(fetched as f64, delivered as f64),
        rank_mb_per_s: rates.iter().sum::<f64>() / rates.len().max(1) as f64,
        requests_per_step: 0.0,
        delivered,
        ..Reads::default()
    })
}

fn ingest_json(mb: f64, raw: f64, cpu: Option<f64>, extra: Value) -> Value {
    let mut v = json!({
        "mb_per_s": round(mb, 2),
        "ratio_vs_raw_put": round(ratio(mb, raw), 3),
        "cpu_s_per_gb": cpu.map(|c| round(c, 3)),
    });
    if let (Value::Object(m), Value::Object(e)) = (&mut v, extra) {
        m.extend(e);
    }
    v
}

/// Runs the peers bench on `env` (a real store: BatchWeave's arms and raw PUT run there)
/// against the brokers in `peers`.
pub async fn run(env: &Env, peers: &Peers) -> anyhow::Result<Outcome> {
    if env.sim {
        bail!("bench peers runs on a real store (the brokers are real processes): pass --store");
    }
    let t_all = Instant::now();
    let kafka = peers.kafka.as_deref().map(loopback).transpose()?;
    let nats = peers.nats.as_deref().map(loopback).transpose()?;
    let (points_in, sizes): (Vec<usize>, Vec<usize>) = if env.quick {
        (vec![8], vec![100_000])
    } else {
        (vec![8, 32], vec![100_000, 1_000_000])
    };
    let window = if env.quick {
        Duration::from_secs(3)
    } else {
        peers.window
    };
    let warmup = (window / 4).max(Duration::from_secs(2));
    let arms = 3 + usize::from(kafka.is_some()) + usize::from(nats.is_some());
    let bar = env.meter((points_in.len() * sizes.len() * (arms + 1)) as u64, "peers");
    let mut table = vec![format!(
        "   {:>4} {:>6} | {:>9} {:>9} {:>9} {:>9} {:>9} | bw/kafka bw/nats",
        "N", "size", "rawPUT", "bw dac", "bw coop", "kafka", "nats"
    )];
    let mut ingest_points = Vec::new();
    let mut panels = Vec::new();
    for &size in &sizes {
        let names = [
            "raw PUT",
            "BatchWeave dac",
            "BatchWeave coop",
            "Kafka protocol (Tansu)",
            "NATS JetStream",
        ];
        let mut lines: Vec<Series> = names.iter().map(|n| Series::new(*n, vec![])).collect();
        for &n in &points_in {
            let shape = Shape {
                producers: n,
                payload: size,
                window,
                warmup,
                buckets: 4,
                single_worker: false,
                observe: None,
                open_first: None,
                readers: &[],
                readers_window: Duration::ZERO,
                untrimmed: false,
            };
            let label = format!("N={n} {}", size_label(size));
            bar.set_message(format!("{label} raw PUT"));
            let put = raw_put(env, shape).await?;
            bar.inc(1);
            let raw = put.bytes_per_sec / 1e6;
            let mut mbs = vec![Some(raw)];
            let mut systems = serde_json::Map::new();
            systems.insert(
                "raw_put".into(),
                ingest_json(raw, raw, cpu_s_per_gb(put.cpu, put.bytes_total), json!({})),
            );
            let mut best_bw: f64 = 0.0;
            for (key, policy) in [("batchweave_dac", "dac"), ("batchweave_coop", "coop")] {
                bar.set_message(format!("{label} BatchWeave {policy}"));
                let kind: PolicyKind = policy.parse().map_err(|e| anyhow::anyhow!("{e}"))?;
                let r = ingest(env, shape, kind).await?;
                bar.inc(1);
                let mb = r.bytes_per_sec / 1e6;
                best_bw = best_bw.max(mb);
                mbs.push(Some(mb));
                systems.insert(
                    key.into(),
                    ingest_json(
                        mb,
                        raw,
                        cpu_s_per_gb(r.cpu, r.bytes_total),
                        json!({ "commit_success": round(r.success, 4), "attempts": r.attempts }),
                    ),
                );
            }
            let mut peer_mb = [None, None];
            for (slot, (key, addr)) in [("kafka", kafka), ("nats", nats)].into_iter().enumerate() {
                let Some(addr) = addr else {
                    mbs.push(None);
                    continue;
                };
                bar.set_message(format!("{label} {key}"));
                let r = if slot == 0 {
                    kafka_ingest(addr, n, size, warmup, window).await
                } else {
                    nats_ingest(addr, n, size, warmup, window).await
                }
                .with_context(|| format!("{key} ingestion at {label}"))?;
                bar.inc(1);
                let mb = r.bytes_per_sec / 1e6;
                peer_mb[slot] = Some(mb);
                mbs.push(Some(mb));
                systems.insert(
                    key.into(),
                    ingest_json(
                        mb,
                        raw,
                        cpu_s_per_gb(r.cpu, r.bytes_total),
                        json!({ "messages_in_window": r.messages }),
                    ),
                );
            }
            for (s, mb) in lines.iter_mut().zip(&mbs) {
                if let Some(mb) = mb {
                    s.points.push((n as f64, *mb));
                }
            }
            let cell = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.1}"));
            table.push(format!(
                "   {n:>4} {:>6} | {:>9} {:>9} {:>9} {:>9} {:>9} | {:>8} {:>7}",
                size_label(size),
                cell(mbs.first().copied().flatten()),
                cell(mbs.get(1).copied().flatten()),
                cell(mbs.get(2).copied().flatten()),
                cell(mbs.get(3).copied().flatten()),
                cell(mbs.get(4).copied().flatten()),
                cell(peer_mb[0].map(|k| ratio(best_bw, k))),
                cell(peer_mb[1].map(|k| ratio(best_bw, k))),
            ));
            ingest_points.push(json!({
                "producers": n,
                "tgb_bytes": size,
                "window_seconds": window.as_secs_f64(),
                "warmup_seconds": warmup.as_secs_f64(),
                "systems": Value::Object(systems),
                "ratio_batchweave_vs_kafka": peer_mb[0].map(|k| round(ratio(best_bw, k), 3)),
                "ratio_batchweave_vs_nats": peer_mb[1].map(|k| round(ratio(best_bw, k), 3)),
            }));
        }
        lines.retain(|s| !s.points.is_empty());
        panels.push(Panel {
            title: format!("Ingestion, {} TGBs", size_label(size)),
            x_label: "producers".into(),
            y_label: "MB/s".into(),
            series: lines,
            ..Default::default()
        });
    }

    // Reads: W = 8 ranks, each taking its slice of every TGB.
    let world = 8u32;
    let mut read_points = Vec::new();
    let mut amp = vec![
        Series::new("BatchWeave range reads", vec![]),
        Series::new("Kafka protocol (Tansu)", vec![]),
        Series::new("NATS JetStream", vec![]),
    ];
    table.push(format!(
        "   reads, W = {world}: {:>6} {:>5} | amplification (MB/s per rank): BatchWeave / kafka / nats",
        "slice", "steps"
    ));
    for &size in &sizes {
        let budget = if env.quick { 2e7 } else { 4e8 };
        let steps = (budget / (f64::from(world) * size as f64)).clamp(4.0, 100.0) as u64;
        bar.set_message(format!("reads W={world} {}", size_label(size)));
        let fresh = env.fresh("peers-reads").await?;
        let stream = Stream::from_store(fresh.store.clone());
        write_stream(&stream, env.seed, world, size, steps, SliceLayout::Auto).await?;
        let bw = measured(read_ranks(
            &stream,
            world,
            steps,
            batchweave::ReadMode::Range,
        ))
        .await?;
        env.discard(fresh).await;
        let mut cells = vec![format!(
            "{:.3} ({:.1})",
            bw.amplification_all, bw.rank_mb_per_s
        )];
        let mut per = serde_json::Map::new();
        per.insert(
            "batchweave".into(),
            json!({
                "bytes_fetched_per_delivered": round(bw.amplification_all, 4),
                "tgb_bytes_fetched_per_delivered": round(bw.amplification, 4),
                "rank_mb_per_s": round(bw.rank_mb_per_s, 2),
                "cpu_s_per_gb": bw.cpu_s_per_gb.map(|c| round(c, 3)),
            }),
        );
        amp[0]
            .points
            .push((size as f64 / 1e3, bw.amplification_all));
        for (slot, (key, b)) in [
            ("kafka", kafka.map(Broker::Kafka)),
            ("nats", nats.map(Broker::Nats)),
        ]
        .into_iter()
        .enumerate()
        {
            let Some(b) = b else {
                cells.push("-".into());
                continue;
            };
            let r = measured(broker_reads(b, world, size, steps))
                .await
                .with_context(|| format!("{key} reads at W = {world}, {}", size_label(size)))?;
            cells.push(format!("{:.3} ({:.1})", r.amplification, r.rank_mb_per_s));
            per.insert(
                key.into(),
                json!({
                    "bytes_fetched_per_delivered": round(r.amplification, 4),
                    "rank_mb_per_s": round(r.rank_mb_per_s, 2),
                    "cpu_s_per_gb": r.cpu_s_per_gb.map(|c| round(c, 3)),
                }),
            );
            if let Some(s) = amp.get_mut(slot + 1) {
                s.points.push((size as f64 / 1e3, r.amplification));
            }
        }
        bar.inc(1);
        table.push(format!(
            "   {:>27} {steps:>5} | {}",
            size_label(size),
            cells.join(" / ")
        ));
        read_points.push(json!({
            "world_size": world,
            "slice_bytes": size,
            "steps": steps,
            "systems": Value::Object(per),
        }));
    }
    bar.finish();
    amp.retain(|s| !s.points.is_empty());
    panels.push(Panel {
        title: format!("Bytes fetched per byte delivered, W = {world}"),
        x_label: "slice KB".into(),
        y_label: "fetched / delivered".into(),
        series: amp,
        log_x: true,
        log_y: true,
    });
    Ok(Outcome {
        json: json!({
            "semantics": "strict TGBs: one message = one complete TGB; one Kafka partition (one global order); one client and one message in flight per producer; a message counts once acknowledged (Kafka acks = all, JetStream publish ack), a TGB once a manifest version lists it",
            "kafka": peers.kafka.as_ref().map(|a| json!({ "address": a, "storage": peers.kafka_storage, "client": "rskafka 0.6 (pure Rust), no compression" })),
            "nats": peers.nats.as_ref().map(|a| json!({ "address": a, "storage": peers.nats_storage, "client": "async-nats 0.52" })),
            "cpu_s_per_gb": "user + system CPU of the bench process (the clients) per 10^9 bytes; the servers' CPU (SeaweedFS, the brokers) is not in it",
            "read_amplification_definition": "bytes received by all ranks / bytes delivered to them: BatchWeave counts every store byte (manifests, footers, slices); a broker rank receives every whole message (payload bytes only, the protocol's framing not counted)",
            "paper": { "kafka_ingestion_ratio_100kb_128_producers": 6.00, "kafka_read_amplification": "about W" },
            "ingestion": ingest_points,
            "reads": read_points,
            "peers_wall_seconds": round(t_all.elapsed().as_secs_f64(), 1),
        }),
        table,
        chart: Chart::of(panels),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_addresses_are_accepted() {
        assert!(loopback("127.0.0.1:9092").is_ok());
        assert!(loopback("[::1]:4222").is_ok());
        let e = loopback("10.1.2.3:9092").unwrap_err().to_string();
        assert!(e.contains("not a loopback address"), "{e}");
        assert!(loopback("127.0.0.1").is_err(), "a port is required");
    }

    #[test]
    fn a_window_counts_only_acks_inside_it() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let w = Window::starting(t0, ms(30), ms(60));
        w.acked_at(5, t0 + ms(10)); // warmup: in the total only
        w.acked_at(7, t0 + ms(45));
        w.acked_at(11, t0 + ms(91)); // after the end
        let r = w.result(ms(60), None);
        assert_eq!(r.bytes_total, 23);
        assert_eq!(r.messages, 1);
        assert!((r.bytes_per_sec - 7.0 / 0.06).abs() < 1e-6);
    }
}
