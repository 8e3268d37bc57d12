//! `bench producers` (figure 6) and `bench dac` (figure 7).

use std::time::Duration;

use batchweave::PolicyKind;
use batchweave::dac::DacParams;
use serde_json::{Value, json};

use super::ingest::{Shape, cpu_s_per_gb, ingest, raw_put};
use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, ratio, round, size_label};

/// The policies compared, DAC first (CLI spelling).
const POLICIES: [&str; 6] = ["dac", "naive", "fixed:10", "fixed:100", "incr", "aimd"];

fn policies() -> anyhow::Result<Vec<(String, PolicyKind)>> {
    POLICIES
        .iter()
        .map(|p| Ok(((*p).to_owned(), p.parse::<PolicyKind>()?)))
        .collect()
}

/// DAC's expected gap at `n` producers with a fragile window `tau`
/// (equation 7 with epsilon = 0.05): every window must span several gaps,
/// or DAC has not committed yet when the window closes.
pub(crate) fn dac_gap(n: usize, tau: Duration) -> Duration {
    tau.mul_f64((n.saturating_sub(1)) as f64 / -(1.0f64 - 0.05).ln())
}

/// The fragile window the window rule assumes: what DAC measured at 32
/// producers on the simulator's default latency model (`tau_ms` in
/// `dac.json`: refresh GET + conditional create, about 100 ms), or 5 ms on a
/// real store on loopback.
pub(crate) fn assumed_tau(env: &Env) -> Duration {
    if env.sim {
        Duration::from_millis(100)
    } else {
        Duration::from_millis(5)
    }
}

/// Warmup (one DAC gap, at least a tenth of the window) and window (four
/// gaps, at least `base`, at most `cap`).
fn span(env: &Env, n: usize, base: Duration, cap: Duration) -> (Duration, Duration) {
    if env.quick {
        // A smoke test: shorter than DAC's gap at 32 producers (not representative).
        return (base / 10, base);
    }
    let gap = dac_gap(n, assumed_tau(env));
    let window = base.max(gap * 4).min(cap.max(base));
    (gap.max(window / 10), window)
}

/// Sweep points `(producers, payload)` and the base window per mode. At 32
/// producers DAC's gap is about 30 s of simulated time, so 128 producers or
/// 10 MB at 32 would move hundreds of GB through memory on two cores: the
/// sweep stops at 32 producers, and takes 10 MB at 8 producers only.
fn sweep(env: &Env) -> (Vec<(usize, usize)>, Duration) {
    match (env.sim, env.quick) {
        (true, false) => (
            vec![
                (8, 100_000),
                (32, 100_000),
                (8, 1_000_000),
                (32, 1_000_000),
                (8, 10_000_000),
            ],
            Duration::from_secs(20),
        ),
        (true, true) => (vec![(8, 100_000), (32, 100_000)], Duration::from_secs(4)),
        (false, false) => (
            vec![
                (8, 1_000_000),
                (32, 1_000_000),
                (8, 10_000_000),
                (32, 10_000_000),
            ],
            Duration::from_secs(4),
        ),
        (false, true) => (vec![(4, 100_000)], Duration::from_secs(1)),
    }
}

/// Producers x payload sweep.
pub(crate) async fn producers(env: Env) -> anyhow::Result<Outcome> {
    let (sweep_points, base) = sweep(&env);
    let mut sizes: Vec<usize> = sweep_points.iter().map(|p| p.1).collect();
    sizes.dedup();
    let pols = policies()?;
    let bar = env.meter((sweep_points.len() * (pols.len() + 1)) as u64, "producers");
    let mut points = Vec::new();
    let mut table = vec![format!(
        "   {:>4} {:>6} {:>9} | {}",
        "N",
        "size",
        "rawPUT",
        POLICIES
            .iter()
            .map(|p| format!("{p:>16}"))
            .collect::<Vec<_>>()
            .join(" ")
    )];
    let mut panels = Vec::new();
    for &size in &sizes {
        let mut lines: Vec<Series> = pols
            .iter()
            .map(|(n, _)| Series::new(n.clone(), vec![]))
            .collect();
        lines.push(Series::new("raw PUT", vec![]));
        for n in sweep_points.iter().filter(|p| p.1 == size).map(|p| p.0) {
            let (warmup, window) = span(&env, n, base, Duration::from_secs(40));
            let shape = Shape {
                producers: n,
                payload: size,
                window,
                warmup,
                buckets: 10,
                single_worker: false,
                observe: None,
                open_first: None,
                readers: &[],
                readers_window: Duration::ZERO,
                untrimmed: false,
            };
            bar.set_message(format!("N={n} {} raw PUT", size_label(size)));
            let put = raw_put(&env, shape).await?;
            let raw = put.bytes_per_sec;
            let raw_cpu = cpu_s_per_gb(put.cpu, put.bytes_total);
            bar.inc(1);
            let mut per = serde_json::Map::new();
            let mut cells = Vec::new();
            let mut dac = 0.0;
            let mut dac_cpu = None;
            let mut dac_timing = (None, Duration::ZERO);
            let mut best_base: f64 = 0.0;
            for (i, (name, kind)) in pols.iter().enumerate() {
                bar.set_message(format!("N={n} {} {name}", size_label(size)));
                let r = ingest(&env, shape, *kind).await?;
                bar.inc(1);
                let mb = r.bytes_per_sec / 1e6;
                let cpu = cpu_s_per_gb(r.cpu, r.bytes_total);
                if i == 0 {
                    dac = r.bytes_per_sec;
                    dac_cpu = cpu;
                    dac_timing = (r.tau, r.gap);
                } else {
                    best_base = best_base.max(r.bytes_per_sec);
                }
                cells.push(format!("{mb:>8.1}MB/s {:>4.0}%", r.success * 100.0));
                per.insert(
                    name.clone(),
                    json!({
                        "mb_per_s": round(mb, 2),
                        "commit_success": round(r.success, 4),
                        "attempts": r.attempts,
                        "ratio_vs_raw_put": round(ratio(r.bytes_per_sec, raw), 3),
                        "cpu_s_per_gb": cpu.map(|c| round(c, 3)),
                    }),
                );
                if let Some(s) = lines.get_mut(i) {
                    s.points.push((n as f64, mb));
                }
            }
            if let Some(s) = lines.last_mut() {
                s.points.push((n as f64, raw / 1e6));
            }
            table.push(format!(
                "   {n:>4} {:>6} {:>6.1}MB/s | {}",
                size_label(size),
                raw / 1e6,
                cells.join(" ")
            ));
            points.push(json!({
                "producers": n,
                "window_seconds": window.as_secs_f64(),
                "warmup_seconds": warmup.as_secs_f64(),
                "payload_bytes": size,
                "raw_put_mb_per_s": round(raw / 1e6, 2),
                "raw_put_cpu_s_per_gb": raw_cpu.map(|c| round(c, 3)),
                "policies": Value::Object(per),
                "ratio_ingest_vs_raw_put": round(ratio(dac, raw), 3),
                "dac_cpu_s_per_gb": dac_cpu.map(|c| round(c, 3)),
                "dac_tau_ms": dac_timing.0.map(|t| round(t * 1e3, 2)),
                "dac_gap_s": round(dac_timing.1.as_secs_f64(), 3),
                "ratio_cpu_per_gb_dac_vs_raw_put": match (dac_cpu, raw_cpu) {
                    (Some(d), Some(r)) => json!(round(ratio(d, r), 3)),
                    _ => Value::Null,
                },
                "ratio_dac_vs_best_baseline": round(ratio(dac, best_base), 3),
            }));
        }
        panels.push(Panel {
            title: format!("Ingestion, {} TGBs", size_label(size)),
            x_label: "producers".into(),
            y_label: "MB/s".into(),
            series: lines,
            ..Default::default()
        });
    }
    bar.finish();
    for p in &points {
        let cpu = match (
            p["dac_cpu_s_per_gb"].as_f64(),
            p["raw_put_cpu_s_per_gb"].as_f64(),
        ) {
            (Some(d), Some(r)) => format!(", CPU-s/GB DAC {d:.2} vs raw PUT {r:.2}"),
            _ => String::new(),
        };
        table.push(format!(
            "   N={} {}: DAC/raw PUT = {:.2}, DAC/best baseline = {:.2}{cpu}",
            p["producers"],
            size_label(p["payload_bytes"].as_u64().unwrap_or(0) as usize),
            p["ratio_ingest_vs_raw_put"].as_f64().unwrap_or(0.0),
            p["ratio_dac_vs_best_baseline"].as_f64().unwrap_or(0.0),
        ));
    }
    Ok(Outcome {
        json: json!({
            "window_rule": "warmup = one expected DAC gap, window = max(base, 4 gaps) capped at 40 s; gap = (N-1) tau / -ln(1 - 0.05) with tau = 100 ms (sim) or 5 ms (real store)",
            "trimming": "a caught-up consumer group is emulated: every second the GC boundary's low-water step moves to the head (logical trim, nothing deleted)",
            "tgb_shape": "one slice per TGB (dp = cp = 1); payload = slice size",
            "cpu_s_per_gb": "user + system CPU of the whole bench process (getrusage) over an arm's run, warmup included, per 10^9 bytes committed (raw PUT: written); on a real store the server's CPU is not in it",
            "raw_put_concurrency": "one PUT in flight per producer task, as many tasks as producers (a producer has one upload in flight)",
            "points": points,
        }),
        table,
        chart: Chart::of(panels),
    })
}

/// A run's `(seconds since start, MB/s, commit success)` per bucket.
type Buckets = Vec<(f64, f64, f64)>;

/// The untrimmed-manifest run of `bench dac` (the paper's regime, simulator only):
/// the paper's 300 s warmup, then a measured window.
const GROWING_WARMUP: Duration = Duration::from_secs(300);
const GROWING_WINDOW: Duration = Duration::from_secs(1800);
/// DAC's gap cap in the untrimmed regime: the paper's DAC has none, and there the
/// fragile window grows to seconds, so equation 7 asks for gaps of up to an hour
/// (about 603 tau at 32 producers); BatchWeave's default 60 s cap would bind from
/// tau = 0.1 s on and let DAC attempt more often than its conflict budget allows.
const GROWING_MAX_GAP_SECS: f64 = 4.0 * 3600.0;
/// The paper's figure 7: DAC 431.9 MB/s against INCR's 110.5 over five hours.
const PAPER_GROWING_RATIO: f64 = 431.9 / 110.5;
const GROWING_REGIME: &str = "the paper's figure 7: manifests are trimmed as usual (bounded CPU and memory), but the latency model charges every manifest GET and PUT for the untrimmed manifest's size: its own bytes plus its trimmed steps (first_step) times the encoded bytes of one descriptor, measured on the run's own manifest; 32 single-worker producers, 100 KB TGBs";

/// DAC's committed bytes since the warmup over the best baseline's, at the end of
/// every bucket after the warmup (`series`: DAC first, as [`ModelRuns::series`]).
fn cumulative_ratio(series: &[(String, Buckets)], warmup: Duration) -> Vec<(f64, f64)> {
    let cumulative = |s: &[(f64, f64, f64)]| -> Vec<(f64, f64)> {
        let mut acc = 0.0;
        let mut prev = 0.0;
        let mut out = Vec::with_capacity(s.len());
        for &(t, mb, _) in s {
            if t > warmup.as_secs_f64() + 1e-9 {
                acc += mb * (t - prev);
                out.push((t, acc));
            }
            prev = t;
        }
        out
    };
    let Some(((_, dac), rest)) = series.split_first() else {
        return Vec::new();
    };
    let dac = cumulative(dac);
    let others: Vec<Vec<(f64, f64)>> = rest.iter().map(|(_, s)| cumulative(s)).collect();
    dac.iter()
        .enumerate()
        .map(|(i, &(t, d))| {
            let best = others
                .iter()
                .filter_map(|o| o.get(i).map(|p| p.1))
                .fold(0.0, f64::max);
            (t, ratio(d, best))
        })
        .collect()
}

/// One producer model's runs of every policy in `bench dac`.
struct ModelRuns {
    per: serde_json::Map<String, Value>,
    rows: Vec<String>,
    tput: Vec<Series>,
    succ: Vec<Series>,
    dac_bps: f64,
    best: f64,
    best_name: String,
    dac_success: f64,
    dac_drift: f64,
    /// Every policy's series, in order (DAC first).
    series: Vec<(String, Buckets)>,
    /// DAC's run's [`Ingest::manifest_series`](super::ingest::Ingest::manifest_series).
    dac_manifest: Vec<(f64, f64, f64)>,
}

impl ModelRuns {
    fn ratio_best(&self) -> f64 {
        ratio(self.dac_bps, self.best)
    }

    fn summary(&self) -> Value {
        json!({
            "policies": Value::Object(self.per.clone()),
            "dac_commit_success": round(self.dac_success, 4),
            "ratio_dac_vs_best_baseline": round(self.ratio_best(), 3),
            "best_baseline": self.best_name,
            "dac_drift": round(self.dac_drift, 3),
        })
    }
}

/// Drift over the measured window: committed throughput of its last span
/// over its first, where a span is a tenth of the window but at least one
/// commit `gap` (a policy that commits every `gap` seconds delivers in lumps
/// of that size, so shorter spans measure the lumps, not a trend).
fn drift(series: &[(f64, f64, f64)], warmup: Duration, gap: Duration) -> f64 {
    let body: Vec<f64> = series
        .iter()
        .filter(|p| p.0 > warmup.as_secs_f64() + 1e-9)
        .map(|p| p.1)
        .collect();
    let bucket = match series {
        [a, b, ..] => (b.0 - a.0).max(1e-9),
        _ => 1.0,
    };
    let per_gap = (gap.as_secs_f64() / bucket).ceil() as usize;
    let span = (body.len() / 10)
        .max(per_gap)
        .clamp(1, (body.len() / 2).max(1));
    let first: f64 = body.iter().take(span).sum::<f64>();
    let last: f64 = body.iter().rev().take(span).sum::<f64>();
    ratio(last, first)
}

async fn dac_model(
    env: &Env,
    shape: Shape,
    pols: &[(String, PolicyKind)],
    bar: &dyn crate::progress::Meter,
) -> anyhow::Result<ModelRuns> {
    let model = if shape.untrimmed {
        "untrimmed"
    } else if shape.single_worker {
        "single worker"
    } else {
        "pipelined"
    };
    let mut m = ModelRuns {
        per: serde_json::Map::new(),
        rows: Vec::new(),
        tput: Vec::new(),
        succ: Vec::new(),
        dac_bps: 0.0,
        best: 0.0,
        best_name: String::new(),
        dac_success: 0.0,
        dac_drift: 0.0,
        series: Vec::new(),
        dac_manifest: Vec::new(),
    };
    for (i, (name, kind)) in pols.iter().enumerate() {
        bar.set_message(format!("{model}: {name}"));
        let r = ingest(env, shape, *kind).await?;
        bar.inc(1);
        let drift = drift(&r.series, shape.warmup, r.gap);
        if i == 0 {
            (m.dac_bps, m.dac_success, m.dac_drift) = (r.bytes_per_sec, r.success, drift);
            m.dac_manifest.clone_from(&r.manifest_series);
        } else if r.bytes_per_sec > m.best {
            m.best = r.bytes_per_sec;
            m.best_name = name.clone();
        }
        m.rows.push(format!(
            "   {model:>13} {name:>10} {:>10.1} {:>8.1}% {drift:>7.2} {:>9}",
            r.bytes_per_sec / 1e6,
            r.success * 100.0,
            r.tau.map_or("-".into(), |t| format!("{:.1}", t * 1e3)),
        ));
        m.per.insert(
            name.clone(),
            json!({
                "mb_per_s": round(r.bytes_per_sec / 1e6, 2),
                "commit_success": round(r.success, 4),
                "attempts": r.attempts,
                "attempts_per_tgb": round(ratio(r.attempts as f64, r.tgbs_in_window as f64), 4),
                "drift": round(drift, 3),
                "tau_ms": r.tau.map(|t| round(t * 1e3, 2)),
                "series": r.series.iter().map(|(t, mb, s)| json!([round(*t, 2), round(*mb, 2), round(*s, 4)])).collect::<Vec<_>>(),
            }),
        );
        m.series.push((name.clone(), r.series.clone()));
        m.tput.push(Series::new(
            name.clone(),
            r.series.iter().map(|(t, mb, _)| (*t, *mb)).collect(),
        ));
        m.succ.push(Series::new(
            name.clone(),
            r.series.iter().map(|(t, _, s)| (*t, s * 100.0)).collect(),
        ));
    }
    Ok(m)
}

/// Figure 7: 32 producers, throughput and success over a long run, per
/// policy, in two producer models: the paper's (one worker uploads and
/// commits, so failed attempts cost upload time) and BatchWeave's default
/// (uploads overlap commits).
pub(crate) async fn dac(env: Env) -> anyhow::Result<Outcome> {
    let (producers, base) = match (env.sim, env.quick) {
        (true, false) => (32, Duration::from_secs(100)),
        (true, true) => (32, Duration::from_secs(8)),
        (false, false) => (32, Duration::from_secs(20)),
        (false, true) => (8, Duration::from_secs(2)),
    };
    let (warmup, window) = span(&env, producers, base, base * 4);
    let payload = 100_000;
    let shape = Shape {
        producers,
        payload,
        window,
        warmup,
        buckets: 40,
        single_worker: true,
        observe: None,
        open_first: None,
        readers: &[],
        readers_window: Duration::ZERO,
        untrimmed: false,
    };
    let pols = policies()?;
    let arms = if env.sim { 3 } else { 2 };
    let bar = env.meter(arms * pols.len() as u64, "dac");
    let single = dac_model(&env, shape, &pols, bar.as_ref()).await?;
    let piped = dac_model(
        &env,
        Shape {
            single_worker: false,
            ..shape
        },
        &pols,
        bar.as_ref(),
    )
    .await?;
    // The paper's regime: untrimmed manifest I/O (simulator only).
    let growing = if env.sim {
        let (warmup, window) = if env.quick {
            (Duration::from_secs(2), Duration::from_secs(20))
        } else {
            (GROWING_WARMUP, GROWING_WINDOW)
        };
        let g = Shape {
            warmup,
            window,
            buckets: 60,
            untrimmed: true,
            ..shape
        };
        let uncapped: Vec<(String, PolicyKind)> = pols
            .iter()
            .map(|(name, kind)| match kind {
                PolicyKind::Dac(p) => (
                    name.clone(),
                    PolicyKind::Dac(DacParams {
                        max_gap_secs: GROWING_MAX_GAP_SECS,
                        ..*p
                    }),
                ),
                _ => (name.clone(), *kind),
            })
            .collect();
        Some((dac_model(&env, g, &uncapped, bar.as_ref()).await?, g))
    } else {
        None
    };
    bar.finish();
    let mut table = vec![format!(
        "   {:>13} {:>10} {:>10} {:>9} {:>7} {:>9}",
        "model", "policy", "MB/s", "success", "drift", "tau ms"
    )];
    for (label, m) in [("single worker", &single), ("pipelined", &piped)] {
        table.extend(m.rows.iter().cloned());
        table.push(format!(
            "   {label}: DAC/best baseline ({}) = {:.2}, DAC success = {:.1}%, DAC drift = {:.2}",
            m.best_name,
            m.ratio_best(),
            m.dac_success * 100.0,
            m.dac_drift
        ));
    }
    let panel = |title: String, y: &str, series: Vec<Series>| Panel {
        title,
        x_label: "seconds".into(),
        y_label: y.into(),
        series,
        ..Default::default()
    };
    let size = size_label(payload);
    let summary_single = single.summary();
    let summary_piped = piped.summary();
    let mut growing_panels = Vec::new();
    let growing_json = match &growing {
        None => json!({ "skipped": "the untrimmed-manifest regime runs on the simulator only" }),
        Some((g, gs)) => {
            let over_time = cumulative_ratio(&g.series, gs.warmup);
            let (mb_end, tau_end) = g.dac_manifest.last().map_or((0.0, 0.0), |p| (p.1, p.2));
            table.extend(g.rows.iter().cloned());
            table.push(format!(
                "   untrimmed manifest: DAC/best baseline ({}) = {:.2} (paper: 431.9 / 110.5 = 3.91), DAC success = {:.1}% (paper: 96.3%), manifest {mb_end:.1} MB and DAC tau {tau_end:.0} ms at the end",
                g.best_name,
                g.ratio_best(),
                g.dac_success * 100.0,
            ));
            growing_panels.push(panel(
                format!("untrimmed manifest (paper's regime), single worker, {producers} producers, {size}: throughput"),
                "MB/s",
                g.tput.clone(),
            ));
            growing_panels.push(panel(
                "untrimmed manifest: DAC / best baseline, bytes committed since the warmup".into(),
                "ratio",
                vec![
                    Series::new("DAC / best baseline", over_time.clone()),
                    Series::new(
                        "paper (431.9 / 110.5)",
                        over_time
                            .iter()
                            .map(|p| (p.0, PAPER_GROWING_RATIO))
                            .collect(),
                    ),
                ],
            ));
            growing_panels.push(panel(
                "untrimmed manifest: commit success".into(),
                "%",
                g.succ.clone(),
            ));
            growing_panels.push(panel(
                "untrimmed manifest: its size (MB) and DAC's mean fragile window (s)".into(),
                "MB / s",
                vec![
                    Series::new(
                        "manifest MB",
                        g.dac_manifest.iter().map(|p| (p.0, p.1)).collect(),
                    ),
                    Series::new(
                        "DAC tau s",
                        g.dac_manifest.iter().map(|p| (p.0, p.2 / 1e3)).collect(),
                    ),
                ],
            ));
            let mut summary = g.summary();
            if let Value::Object(o) = &mut summary {
                o.insert("regime".into(), json!(GROWING_REGIME));
                o.insert("model".into(), json!("single_worker"));
                o.insert("dac_max_gap_seconds".into(), json!(GROWING_MAX_GAP_SECS));
                o.insert("warmup_seconds".into(), json!(gs.warmup.as_secs_f64()));
                o.insert("window_seconds".into(), json!(gs.window.as_secs_f64()));
                o.insert(
                    "untrimmed_manifest_mb_at_end".into(),
                    json!(round(mb_end, 2)),
                );
                o.insert("dac_tau_ms_at_end".into(), json!(round(tau_end, 1)));
                o.insert(
                    "ratio_over_time_columns".into(),
                    json!(["seconds", "dac_bytes_over_best_baseline_bytes_since_warmup"]),
                );
                o.insert(
                    "ratio_over_time".into(),
                    json!(
                        over_time
                            .iter()
                            .map(|(t, r)| json!([round(*t, 1), round(*r, 3)]))
                            .collect::<Vec<_>>()
                    ),
                );
                o.insert(
                    "manifest_series_columns".into(),
                    json!(["seconds", "untrimmed_manifest_mb", "dac_mean_tau_ms"]),
                );
                o.insert(
                    "manifest_series".into(),
                    json!(
                        g.dac_manifest
                            .iter()
                            .map(|(t, mb, tau)| json!([
                                round(*t, 1),
                                round(*mb, 3),
                                round(*tau, 1)
                            ]))
                            .collect::<Vec<_>>()
                    ),
                );
                o.insert(
                    "paper".into(),
                    json!({
                        "dac_mb_per_s": 431.9,
                        "best_baseline": "incr",
                        "best_baseline_mb_per_s": 110.5,
                        "ratio_dac_vs_best_baseline": PAPER_GROWING_RATIO,
                        "dac_commit_success": 0.963,
                        "duration_seconds": 5.0 * 3600.0,
                    }),
                );
            }
            summary
        }
    };
    Ok(Outcome {
        json: json!({
            "producers": producers,
            "payload_bytes": payload,
            "window_seconds": window.as_secs_f64(),
            "warmup_seconds": shape.warmup.as_secs_f64(),
            "epsilon": 0.05,
            "series_columns": ["seconds", "mb_per_s", "commit_success"],
            "dac_drift_definition": "committed throughput of the last span of the window / first span; a span is a tenth of the window, at least one commit gap (the policy's gap at the end of the run)",
            "headline_model": "single_worker",
            "headline_model_why": "the paper's producers upload and commit on one worker, so commit attempts cost upload time; BatchWeave's default producer overlaps them (model pipelined)",
            "dac_commit_success": summary_single["dac_commit_success"],
            "ratio_dac_vs_best_baseline": summary_single["ratio_dac_vs_best_baseline"],
            "dac_drift": summary_single["dac_drift"],
            "models": {
                "single_worker": summary_single,
                "pipelined": summary_piped,
            },
            "growing": growing_json,
        }),
        table,
        chart: Chart::of(vec![
            panel(
                format!(
                    "single worker (paper's producer), {producers} producers, {size}: throughput"
                ),
                "MB/s",
                single.tput,
            ),
            panel("single worker: commit success".into(), "%", single.succ),
            panel(
                format!(
                    "pipelined (BatchWeave default), {producers} producers, {size}: throughput"
                ),
                "MB/s",
                piped.tput,
            ),
            panel("pipelined: commit success".into(), "%", piped.succ),
        ]
        .into_iter()
        .chain(growing_panels)
        .collect()),
    })
}
