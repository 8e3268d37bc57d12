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
use crate::readers::ReadersReport;
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

/// Consumer ranks following the stream at a point of `n` producers, by group size (each
/// group on a store handle of its own, started at the head after the warmup). W = 8
/// everywhere (the ranks do not interact below the rate limit, so a group of W' < 5,500
/// GET/s / ~100 requests per rank-second costs W'/8 times what it does) and W = 1024,
/// where the ranks share one 5,500 GET/s gate, at N = 1024 only: 1024 ranks decoding
/// every version cost minutes of wall time at N = 128 too. The simulator only: on a real
/// store they would be that many pollers of a local directory or server.
fn reader_groups(env: &Env, n: usize) -> &'static [usize] {
    match (env.sim, env.quick) {
        (true, false) if n >= 1024 => &[8, 1024],
        (true, _) => &[8],
        (false, _) => &[],
    }
}

/// How long the reader groups follow the stream, from the end of the warmup: about ten
/// versions at every point (N = 1024 commits about 1.2 versions a second under both
/// policies), short enough that 1024 ranks decoding every version they read (about 1 MB
/// each under `coop` at N = 1024) cost a minute or two of wall time, not ten.
fn readers_window(n: usize) -> Duration {
    Duration::from_secs(if n >= 1024 { 6 } else { 10 })
}

/// The stream grid assumed for `w` ranks (DP x CP = W, every rank one slice of each TGB):
/// CP 8 from 128 ranks on, CP 2 below, as long-context jobs of that size run.
fn grid_for(w: usize) -> (u32, u32) {
    let w = u32::try_from(w).unwrap_or(u32::MAX).max(1);
    let cp = if w >= 128 {
        8
    } else if w >= 2 {
        2
    } else {
        1
    };
    (w / cp, cp)
}

/// The footer length of a [`PAYLOAD`] TGB cut into `dp * cp` slices: what a rank's one
/// footer read per TGB fetches.
fn footer_len(dp: u32, cp: u32) -> anyhow::Result<u32> {
    let n = (dp * cp) as usize;
    let slices = (0..n)
        .map(|i| bytes::Bytes::from(vec![0u8; PAYLOAD / n + usize::from(i < PAYLOAD % n)]))
        .collect();
    Ok(batchweave::tgb::encode_tgb(dp, cp, slices)?.footer_length)
}

/// One reader group's figures: measured chain reads, computed slice reads.
fn readers_json(r: &ReadersReport) -> anyhow::Result<Value> {
    let w = usize::try_from(r.w).unwrap_or(usize::MAX).max(1);
    let (dp, cp) = grid_for(w);
    let footer = u64::from(footer_len(dp, cp)?);
    // Each rank delivers its 1/W of every TGB it saw become visible.
    let delivered = r.tgbs_delivered as f64 * PAYLOAD as f64 / w as f64;
    let chain_bytes = (r.manifest_bytes + r.boundary_bytes) as f64;
    // Per TGB and rank: one footer read (cached per TGB) and one slice read.
    let slice_gets = 2 * r.tgbs_delivered;
    let s = r.elapsed.as_secs_f64().max(1e-9);
    let per_s = |n: f64| round(n / s, 1);
    Ok(json!({
        "w": r.w,
        "grid_dp": dp,
        "grid_cp": cp,
        "seconds": round(s, 3),
        "tgbs_committed": r.head_tgbs,
        "tgbs_delivered_per_rank": round(ratio(r.tgbs_delivered as f64, r.w as f64), 1),
        "max_behind_tgbs": r.max_behind_tgbs,
        "delivered_bytes": round(delivered, 0),
        "manifest_bytes": r.manifest_bytes,
        "boundary_bytes": r.boundary_bytes,
        "manifest_bytes_per_delivered_byte": round(ratio(chain_bytes, delivered), 4),
        "manifest_bytes_per_rank_per_s": per_s(chain_bytes / w as f64),
        "versions_read_per_rank_per_s": round(ratio(r.versions_read as f64, r.w as f64) / s, 3),
        "manifest_gets_per_s": per_s(r.manifest_gets as f64),
        "manifests_found_per_s": per_s(r.manifests_read as f64),
        "boundary_gets_per_s": per_s(r.boundary_gets as f64),
        "listings_per_s": per_s((r.manifest_lists + r.boundary_lists) as f64),
        "manifest_listings_per_s": per_s(r.manifest_lists as f64),
        "chain_requests_per_s": per_s(r.requests() as f64),
        "slice_range_gets_per_s": per_s(slice_gets as f64),
        "footer_bytes_per_tgb_per_rank": footer,
        "footer_bytes_per_delivered_byte": round(
            ratio((footer * r.tgbs_delivered) as f64, delivered),
            4
        ),
        "requests_per_s": per_s((r.requests() + slice_gets) as f64),
        "errors": r.errors,
    }))
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

fn point_json(
    name: &str,
    n: usize,
    shape: &Shape,
    r: &Ingest,
    v: &VisibilityReport,
) -> anyhow::Result<Value> {
    let readers = r
        .readers
        .iter()
        .map(readers_json)
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(json!({
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
        "readers": readers,
    }))
}

/// One table row of a reader group.
fn reader_row(name: &str, n: usize, g: &ReadersReport) -> anyhow::Result<String> {
    let j = readers_json(g)?;
    let f = |k: &str| j[k].as_f64().unwrap_or(0.0);
    Ok(format!(
        "   {name:>10} {n:>5} {:>5} {:>8} | {:>10.3} {:>10.1} {:>9.2} | {:>10.0} {:>9.0} {:>9.0} {:>9.0} {:>11.0} | {:>6}",
        g.w,
        format!("{}x{}", f("grid_dp"), f("grid_cp")),
        f("manifest_bytes_per_delivered_byte"),
        f("manifest_bytes_per_rank_per_s") / 1e3,
        f("versions_read_per_rank_per_s"),
        f("manifest_gets_per_s"),
        f("boundary_gets_per_s"),
        f("listings_per_s"),
        f("chain_requests_per_s"),
        f("slice_range_gets_per_s"),
        g.max_behind_tgbs,
    ))
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
    let mut reader_rows = Vec::new();
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
            readers: reader_groups(&env, n),
            readers_window: readers_window(n),
            untrimmed: false,
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
            for g in &r.readers {
                reader_rows.push(reader_row(name, n, g)?);
            }
            let mut p = point_json(name, n, &shape, &r, &v)?;
            p["wall_seconds"] = json!(round(wall.as_secs_f64(), 1));
            points.push(p);
        }
    }
    bar.finish();
    table.push(format!(
        "   visibility = append returned -> first manifest version listing the TGB, as seen by an observer polling every {} ms: each sample is late by up to that plus one manifest read; uploads of the warmup and of the window's last tenth are not sampled; 'never visible' = sampled uploads not listed when the window closed; 'opened' = producers open when the run started (opened one by one before it)",
        POLL.as_millis()
    ));
    if !reader_rows.is_empty() {
        table.push(String::new());
        table.push(format!(
            "   {:>10} {:>5} {:>5} {:>8} | {:>10} {:>10} {:>9} | {:>10} {:>9} {:>9} {:>9} {:>11} | {:>6}",
            "readers",
            "N",
            "W",
            "grid",
            "mf B/dlv B",
            "mf KB/rk/s",
            "ver/rk/s",
            "mf GET/s",
            "bnd GET/s",
            "lists/s",
            "chain r/s",
            "slice GET/s",
            "behind"
        ));
        table.extend(reader_rows);
        table.push(format!(
            "   readers = W consumer ranks started at the head after the warmup, each following the chain with the consumer's own polling loop (default settings: {}-{} ms backoff) and taking no time per step; 'mf B/dlv B' = manifest + boundary bytes read by all ranks / bytes delivered to them (each rank 1/W of every {} TGB it saw); slice GETs computed (footer + slice per TGB per rank, not made); 'behind' = most TGBs a rank was behind the head at the end; each group has its own latency model and rate gates ({} GET/s)",
            batchweave::ConsumerSettings::default().poll_min.as_millis(),
            batchweave::ConsumerSettings::default().poll_max.as_millis(),
            size_label(PAYLOAD),
            batchweave::store::LatencyModel::default().get_rate,
        ));
    }
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
            "readers_definition": "per point, readers[]: groups of W consumer ranks (the consumer's own manifest tracker, default settings, no time per step) started at the head after the warmup for a few seconds, each group on a latency model of its own (simulator); manifest and boundary bytes and chain requests measured; delivered bytes (1/W of each TGB a rank saw), slice and footer range GETs computed for a stream grid of DP x CP = W, not made; see docs/benchmarks.md",
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
            readers: &[2],
            readers_window: Duration::from_secs(1),
            untrimmed: false,
        };
        let r = ingest(&env, shape, "fixed:1".parse().unwrap())
            .await
            .unwrap();
        let v = r.visibility.clone().unwrap();
        assert_eq!(v.uploads, v.samples + v.pending, "{v:?}");
        assert_eq!(v.poll_errors, 0, "{v:?}");
        let p = point_json("fixed:1", 2, &shape, &r, &v).unwrap();
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
        let g = &p["readers"][0];
        assert_eq!(g["w"], 2, "{p}");
        assert_eq!(g["errors"], 0, "{p}");
        for f in [
            "manifest_bytes_per_delivered_byte",
            "requests_per_s",
            "manifest_gets_per_s",
            "listings_per_s",
            "slice_range_gets_per_s",
        ] {
            assert!(g.get(f).is_some(), "{f} missing in {g}");
        }
    }
}
