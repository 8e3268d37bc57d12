//! `bench visibility` (issue #16): how long after its append returned a TGB is listed
//! in a manifest version, against the number of producers, per commit policy, side by
//! side in one run; with the ingestion rate, commit success and store requests per
//! committed TGB of the same runs.

use std::time::Duration;

use batchweave::PolicyKind;
use serde_json::{Value, json};

use super::ingest::{Ingest, Shape, ingest};
use super::plot::{Chart, Panel, Series};
use super::producers::{assumed_tau, dac_gap};
use super::{Env, Outcome, ratio, round, size_label};
use crate::visibility::VisibilityReport;

/// The policies compared unless the caller names others (CLI spelling). A name that
/// does not parse (`coop` before the cooperative policy exists) is skipped with a note.
pub(crate) const DEFAULT_POLICIES: [&str; 2] = ["dac", "coop"];

/// The observer's poll interval: the resolution of every latency here.
const POLL: Duration = Duration::from_millis(20);

/// How long the producers may take to open (claim their epochs, one conditional
/// create each, all contending) before the run starts, on the simulator (virtual time)
/// and on a real store; producers not open by then sit the run out
/// (`producers_opened` says how many did).
fn open_limit(env: &Env) -> Duration {
    Duration::from_secs(if env.sim { 900 } else { 60 })
}

/// Payload per TGB: small, so that 1024 producers on the simulator stay cheap.
const PAYLOAD: usize = 16_000;

/// Producer counts and the measured window per count.
fn sweep(env: &Env) -> Vec<(usize, Duration)> {
    let secs = Duration::from_secs;
    // At least three expected DAC gaps where that fits (DAC commits several times),
    // else the cap: at 1024 producers DAC's gap is about 33 minutes of simulated time
    // at tau = 100 ms, so within the window most of its TGBs never become visible (the
    // points say how many).
    let window =
        |n: usize, lo: Duration, hi: Duration| (dac_gap(n, assumed_tau(env)) * 3).clamp(lo, hi);
    match (env.sim, env.quick) {
        (true, false) => [8, 32, 128, 1024]
            .into_iter()
            .map(|n| (n, window(n, secs(30), secs(120))))
            .collect(),
        (true, true) => vec![(8, secs(4)), (32, secs(4)), (128, secs(4))],
        (false, false) => [8, 32, 128, 1024]
            .into_iter()
            .map(|n| (n, window(n, secs(5), secs(15))))
            .collect(),
        (false, true) => vec![(8, secs(2)), (32, secs(2))],
    }
}

/// Policy names with what they parsed to.
type Parsed = Vec<(String, PolicyKind)>;

/// Policy names that did not parse, with why.
type Skipped = Vec<(String, String)>;

/// The policies to run, parsed, and the names that did not parse with why.
fn policies(env: &Env) -> (Parsed, Skipped) {
    let names: Vec<String> = match &env.policies {
        Some(n) => n.clone(),
        None => DEFAULT_POLICIES.iter().map(|s| (*s).to_owned()).collect(),
    };
    let (mut ok, mut skipped) = (Vec::new(), Vec::new());
    for name in names {
        match name.parse::<PolicyKind>() {
            Ok(k) => ok.push((name, k)),
            Err(e) => skipped.push((name, e.to_string())),
        }
    }
    (ok, skipped)
}

/// Seconds, or null without samples.
fn secs_or_null(v: &VisibilityReport, d: Duration) -> Value {
    if v.samples == 0 {
        Value::Null
    } else {
        json!(round(d.as_secs_f64(), 4))
    }
}

fn ms_cell(v: &VisibilityReport, d: Duration) -> String {
    if v.samples == 0 {
        "-".into()
    } else {
        format!("{:.0}", d.as_secs_f64() * 1e3)
    }
}

fn point_json(name: &str, n: usize, shape: &Shape, r: &Ingest, v: &VisibilityReport) -> Value {
    json!({
        "policy": name,
        "producers": n,
        "producers_opened": r.opened,
        "open_seconds": r.open_time.map(|d| round(d.as_secs_f64(), 3)),
        "payload_bytes": shape.payload,
        "window_seconds": round(shape.window.as_secs_f64(), 3),
        "warmup_seconds": round(shape.warmup.as_secs_f64(), 3),
        "visibility_p50_s": secs_or_null(v, v.p50),
        "visibility_p95_s": secs_or_null(v, v.p95),
        "visibility_max_s": secs_or_null(v, v.max),
        "visibility_mean_s": secs_or_null(v, v.mean),
        "visibility_samples": v.samples,
        "sampled_uploads": v.uploads,
        "never_visible": v.pending,
        "visible_fraction": round(v.visible_fraction(), 4),
        "oldest_never_visible_age_s": round(
            r.end.map_or(0.0, |e| v.oldest_pending_age(e).as_secs_f64()),
            3
        ),
        "unobserved_trimmed": v.unobserved,
        "visible_unsampled": v.seen_unrecorded,
        "mb_per_s": round(r.bytes_per_sec / 1e6, 3),
        "commit_success": round(r.success, 4),
        "attempts": r.attempts,
        "tgbs_committed": r.tgbs_committed,
        "producer_requests": r.requests,
        "requests_per_tgb": if r.tgbs_committed == 0 {
            Value::Null
        } else {
            json!(round(ratio(r.requests as f64, r.tgbs_committed as f64), 3))
        },
        "observer": {
            "polls": v.polls,
            "versions_read": v.versions_read,
            "requests": v.requests,
            "poll_errors": v.poll_errors,
            "manifest_bytes_read": v.manifest_bytes,
            "manifest_bytes_per_visible_byte": round(v.manifest_bytes_per_visible_byte(), 4),
        },
    })
}

/// Every policy at every producer count, each run with a visibility observer.
pub(crate) async fn run(env: Env) -> anyhow::Result<Outcome> {
    let points_nw = sweep(&env);
    let (pols, skipped) = policies(&env);
    let bar = env.meter((points_nw.len() * pols.len()) as u64, "visibility");
    let mut table = Vec::new();
    for (name, why) in &skipped {
        table.push(format!("   note: policy {name:?} skipped: {why}"));
    }
    table.push(format!(
        "   {:>10} {:>5} {:>6} {:>6} {:>8} {:>8} {:>8} | {:>8} {:>8} {:>8} {:>8} {:>13}",
        "policy",
        "N",
        "opened",
        "window",
        "MB/s",
        "success",
        "req/TGB",
        "p50 ms",
        "p95 ms",
        "max ms",
        "samples",
        "never visible"
    ));
    let mut p50s: Vec<Series> = Vec::new();
    let mut p95s: Vec<Series> = Vec::new();
    let mut reqs: Vec<Series> = Vec::new();
    for (name, _) in &pols {
        p50s.push(Series::new(format!("{name} P50"), vec![]));
        p95s.push(Series::new(format!("{name} P95"), vec![]));
        reqs.push(Series::new(name.clone(), vec![]));
    }
    let mut points = Vec::new();
    for &(n, window) in &points_nw {
        let shape = Shape {
            producers: n,
            payload: PAYLOAD,
            window,
            warmup: window / 10,
            // A bucket boundary inside the warmup, so that the window's success rate
            // leaves the warmup's attempts out.
            buckets: 20,
            single_worker: false,
            observe: Some(POLL),
            open_first: Some(open_limit(&env)),
        };
        for (i, (name, kind)) in pols.iter().enumerate() {
            bar.set_message(format!("N={n} {name}"));
            let wall = std::time::Instant::now();
            let r = ingest(&env, shape, *kind).await?;
            let wall = wall.elapsed();
            bar.inc(1);
            let v = r.visibility.clone().unwrap_or_default();
            let per_tgb = ratio(r.requests as f64, r.tgbs_committed as f64);
            table.push(format!(
                "   {name:>10} {n:>5} {:>6} {:>5.0}s {:>8.2} {:>7.1}% {:>8} | {:>8} {:>8} {:>8} {:>8} {:>6} ({:>4.1}%)",
                r.opened,
                window.as_secs_f64(),
                r.bytes_per_sec / 1e6,
                r.success * 100.0,
                if r.tgbs_committed == 0 {
                    "-".to_owned()
                } else {
                    format!("{per_tgb:.2}")
                },
                ms_cell(&v, v.p50),
                ms_cell(&v, v.p95),
                ms_cell(&v, v.max),
                v.samples,
                v.pending,
                100.0 * (1.0 - v.visible_fraction()),
            ));
            if v.samples > 0 {
                p50s[i].points.push((n as f64, v.p50.as_secs_f64()));
                p95s[i].points.push((n as f64, v.p95.as_secs_f64()));
            }
            if r.tgbs_committed > 0 {
                reqs[i].points.push((n as f64, per_tgb));
            }
            let mut p = point_json(name, n, &shape, &r, &v);
            p["wall_seconds"] = json!(round(wall.as_secs_f64(), 1));
            points.push(p);
        }
    }
    bar.finish();
    table.push(format!(
        "   visibility = append returned -> first manifest version listing the TGB, as seen by an observer polling every {} ms: each sample is late by up to that plus one manifest read; uploads of the warmup and of the window's last tenth are not sampled; 'never visible' = sampled uploads not listed when the window closed; 'opened' = producers open when the run started (opened one by one before it)",
        POLL.as_millis()
    ));
    let mut series = p50s;
    series.extend(p95s);
    Ok(Outcome {
        json: json!({
            "payload_bytes": PAYLOAD,
            "poll_interval_ms": POLL.as_secs_f64() * 1e3,
            "resolution": "a sample is the time from the append's return to the return of the first manifest read that listed the TGB: late by at most one poll interval plus one manifest read (more if the observer falls behind)",
            "sampled": "TGBs whose append returned after the warmup (a tenth of the window) and before the window's last tenth",
            "window_rule": "window = 3 expected DAC gaps, clamped to [30 s, 120 s] on the simulator and [5 s, 15 s] on a real store (quick: 4 s and 2 s); gap = (N-1) tau / -ln(1 - 0.05), tau = 100 ms (sim) or 5 ms",
            "requests_per_tgb_definition": "every store request of the producers over the whole run (warmup included) / TGBs committed over the whole run; the observer, the trimmer and the simulator's reaper use handles of their own",
            "trimming": "a caught-up consumer group is emulated: every second the GC boundary's low-water step moves to the head (logical trim, nothing deleted)",
            "policies": pols.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
            "skipped_policies": skipped.iter().map(|(n, e)| json!({"name": n, "error": e})).collect::<Vec<_>>(),
            "points": points,
        }),
        table,
        chart: Chart::of(vec![
            Panel {
                title: format!("Visibility latency, {} TGBs", size_label(PAYLOAD)),
                x_label: "producers".into(),
                y_label: "seconds (P50, P95)".into(),
                series,
                log_x: true,
                log_y: true,
            },
            Panel {
                title: "Store requests per committed TGB".into(),
                x_label: "producers".into(),
                y_label: "requests / TGB".into(),
                series: reqs,
                log_x: true,
                log_y: true,
            },
        ]),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_does_not_parse_is_skipped() {
        let env = Env::new(false, true, None, 1).unwrap().with_policies(vec![
            "dac".into(),
            "no-such-policy".into(),
            "fixed:10".into(),
        ]);
        let (ok, skipped) = policies(&env);
        let names: Vec<&str> = ok.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["dac", "fixed:10"]);
        assert_eq!(skipped.len(), 1);
        assert_eq!(skipped[0].0, "no-such-policy");
    }

    #[test]
    fn every_sweep_is_bounded() {
        for (sim, quick) in [(true, false), (true, true), (false, false), (false, true)] {
            let mut env = Env::new(false, quick, None, 1).unwrap();
            env.sim = sim; // the sweep only reads the mode
            let s = sweep(&env);
            assert!(!s.is_empty());
            assert!(
                s.iter().all(|(_, w)| *w <= Duration::from_secs(120)),
                "{s:?}"
            );
        }
    }

    /// One small run on a local directory: the point carries the promised fields.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_quick_local_run_reports_every_field() {
        let env = Env::new(false, true, None, 3)
            .unwrap()
            .with_policies(vec!["fixed:1".into(), "not-a-policy".into()]);
        let shape = Shape {
            producers: 2,
            payload: 1000,
            window: Duration::from_millis(600),
            warmup: Duration::from_millis(60),
            buckets: 2,
            single_worker: false,
            observe: Some(Duration::from_millis(10)),
            open_first: Some(Duration::from_secs(30)),
        };
        let r = ingest(&env, shape, "fixed:1".parse().unwrap())
            .await
            .unwrap();
        let v = r.visibility.clone().unwrap();
        assert_eq!(v.uploads, v.samples + v.pending, "{v:?}");
        assert_eq!(v.poll_errors, 0, "{v:?}");
        let p = point_json("fixed:1", 2, &shape, &r, &v);
        for f in [
            "policy",
            "producers",
            "visibility_p50_s",
            "visibility_p95_s",
            "visibility_max_s",
            "mb_per_s",
            "commit_success",
            "requests_per_tgb",
        ] {
            assert!(p.get(f).is_some(), "{f} missing in {p}");
        }
    }
}
