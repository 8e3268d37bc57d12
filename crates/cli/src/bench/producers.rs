//! `bench producers` (figure 6) and `bench dac` (figure 7).

use std::time::Duration;

use batchweave::PolicyKind;
use serde_json::{Value, json};

use super::ingest::{Shape, ingest, raw_put};
use super::plot::{Chart, Panel, Series};
use super::{Env, Outcome, progress, ratio, round, size_label};

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
fn dac_gap(n: usize, tau: Duration) -> Duration {
    tau.mul_f64((n.saturating_sub(1)) as f64 / -(1.0f64 - 0.05).ln())
}

/// Warmup (one DAC gap, at least a tenth of the window) and window (four
/// gaps, at least `base`, at most `cap`).
fn span(env: &Env, n: usize, base: Duration, cap: Duration) -> (Duration, Duration) {
    let tau = if env.sim {
        Duration::from_millis(50)
    } else {
        Duration::from_millis(5)
    };
    if env.quick {
        // A smoke test: shorter than DAC's gap at 32 producers (not representative).
        return (base / 10, base);
    }
    let gap = dac_gap(n, tau);
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
            vec![(4, 100_000), (16, 100_000), (4, 1_000_000), (16, 1_000_000)],
            Duration::from_secs(3),
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
    let bar = progress((sweep_points.len() * (pols.len() + 1)) as u64, "producers");
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
            };
            bar.set_message(format!("N={n} {} raw PUT", size_label(size)));
            let raw = raw_put(&env, shape).await?;
            bar.inc(1);
            let mut per = serde_json::Map::new();
            let mut cells = Vec::new();
            let mut dac = 0.0;
            let mut best_base: f64 = 0.0;
            for (i, (name, kind)) in pols.iter().enumerate() {
                bar.set_message(format!("N={n} {} {name}", size_label(size)));
                let r = ingest(&env, shape, *kind).await?;
                bar.inc(1);
                let mb = r.bytes_per_sec / 1e6;
                if i == 0 {
                    dac = r.bytes_per_sec;
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
                "policies": Value::Object(per),
                "ratio_ingest_vs_raw_put": round(ratio(dac, raw), 3),
                "ratio_dac_vs_best_baseline": round(ratio(dac, best_base), 3),
            }));
        }
        panels.push(Panel {
            title: format!("Ingestion, {} TGBs", size_label(size)),
            x_label: "producers".into(),
            y_label: "MB/s".into(),
            series: lines,
        });
    }
    bar.finish_and_clear();
    for p in &points {
        table.push(format!(
            "   N={} {}: DAC/raw PUT = {:.2}, DAC/best baseline = {:.2}",
            p["producers"],
            size_label(p["payload_bytes"].as_u64().unwrap_or(0) as usize),
            p["ratio_ingest_vs_raw_put"].as_f64().unwrap_or(0.0),
            p["ratio_dac_vs_best_baseline"].as_f64().unwrap_or(0.0),
        ));
    }
    Ok(Outcome {
        json: json!({
            "window_rule": "warmup = one expected DAC gap, window = max(base, 4 gaps) capped at 40 s; gap = (N-1) tau / -ln(1 - 0.05) with tau = 50 ms (sim) or 5 ms (real store)",
            "trimming": "a caught-up consumer group is emulated: every second the GC boundary's low-water step moves to the head (logical trim, nothing deleted)",
            "tgb_shape": "one slice per TGB (dp = cp = 1); payload = slice size",
            "points": points,
        }),
        table,
        chart: Chart::of(panels),
    })
}

/// Figure 7: 32 producers, throughput and success over a long run.
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
        buckets: 20,
    };
    let pols = policies()?;
    let bar = progress(pols.len() as u64, "dac");
    let mut per = serde_json::Map::new();
    let mut tput = Vec::new();
    let mut succ = Vec::new();
    let mut table = vec![format!(
        "   {:>10} {:>10} {:>9} {:>7} {:>9}",
        "policy", "MB/s", "success", "drift", "tau ms"
    )];
    let (mut dac_bps, mut best, mut dac_success, mut dac_drift) = (0.0, 0.0f64, 0.0, 0.0);
    for (i, (name, kind)) in pols.iter().enumerate() {
        bar.set_message(name.clone());
        let r = ingest(&env, shape, *kind).await?;
        bar.inc(1);
        // Drift over the measured window only (buckets after the warmup).
        let body: Vec<f64> = r
            .series
            .iter()
            .filter(|p| p.0 > warmup.as_secs_f64() + 1e-9)
            .map(|p| p.1)
            .collect();
        let tenth = (body.len() / 10).max(1);
        let first: f64 = body.iter().take(tenth).sum::<f64>();
        let last: f64 = body.iter().rev().take(tenth).sum::<f64>();
        let drift = ratio(last, first);
        if i == 0 {
            (dac_bps, dac_success, dac_drift) = (r.bytes_per_sec, r.success, drift);
        } else {
            best = best.max(r.bytes_per_sec);
        }
        table.push(format!(
            "   {name:>10} {:>10.1} {:>8.1}% {drift:>7.2} {:>9}",
            r.bytes_per_sec / 1e6,
            r.success * 100.0,
            r.tau.map_or("-".into(), |t| format!("{:.1}", t * 1e3)),
        ));
        per.insert(
            name.clone(),
            json!({
                "mb_per_s": round(r.bytes_per_sec / 1e6, 2),
                "commit_success": round(r.success, 4),
                "attempts": r.attempts,
                "drift": round(drift, 3),
                "tau_ms": r.tau.map(|t| round(t * 1e3, 2)),
                "series": r.series.iter().map(|(t, mb, s)| json!([round(*t, 2), round(*mb, 2), round(*s, 4)])).collect::<Vec<_>>(),
            }),
        );
        tput.push(Series::new(
            name.clone(),
            r.series.iter().map(|(t, mb, _)| (*t, *mb)).collect(),
        ));
        succ.push(Series::new(
            name.clone(),
            r.series.iter().map(|(t, _, s)| (*t, s * 100.0)).collect(),
        ));
    }
    bar.finish_and_clear();
    let ratio_best = ratio(dac_bps, best);
    table.push(format!(
        "   DAC/best baseline = {ratio_best:.2}, DAC success = {:.1}%, DAC drift = {dac_drift:.2}",
        dac_success * 100.0
    ));
    Ok(Outcome {
        json: json!({
            "producers": producers,
            "payload_bytes": payload,
            "window_seconds": window.as_secs_f64(),
            "warmup_seconds": shape.warmup.as_secs_f64(),
            "epsilon": 0.05,
            "policies": Value::Object(per),
            "series_columns": ["seconds", "mb_per_s", "commit_success"],
            "dac_commit_success": round(dac_success, 4),
            "ratio_dac_vs_best_baseline": round(ratio_best, 3),
            "dac_drift": round(dac_drift, 3),
            "dac_drift_definition": "throughput of the last tenth of the buckets / first tenth",
        }),
        table,
        chart: Chart::of(vec![
            Panel {
                title: format!(
                    "{producers} producers, {} TGBs: throughput",
                    size_label(payload)
                ),
                x_label: "seconds".into(),
                y_label: "MB/s".into(),
                series: tput,
            },
            Panel {
                title: "commit success".into(),
                x_label: "seconds".into(),
                y_label: "%".into(),
                series: succ,
            },
        ]),
    })
}
