//! Runs many simulation seeds; exits non-zero on the first failure.
//!
//! ```text
//! sim [--seeds N] [--start S] [--seed S] [--trace] [--verbose] [--plant NAME] [--policy POLICY]
//!     [--without-coop] [--footer-lookahead N] [--sealed]
//! ```
//! `NAME` is one of `overwrite`, `false-success`, `stale-boundary`, `skip-state-map-check`,
//! `skip-boundary-check`, `lower-boundary`, `skip-extension-check`, `shared-rank-mark`,
//! `publish-gap`, `publish-stale-epoch`, `skip-others-age-check`, `record-old-claims`,
//! `record-same-epoch-claims` (see `PlantedBug`).
//! `--policy POLICY` (`coop`, `dac`, `naive`, `fixed:K`, `incr`, `aimd`) forces every
//! producer to that commit policy (`coop` with the run's drawn cadence);
//! `--without-coop` runs the world before cooperative commits (`SimConfig::without_coop`).
//! `--sealed` makes every producer write sealed TGBs (`SimConfig::slice_layout`).
//! `--seed S` runs one seed (with `--trace` it prints the run's last events
//! on failure); `--seeds N --start S` runs seeds `S..S+N` with a progress line.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use batchweave_producer::{PolicyKind, SliceLayout};
use batchweave_sim::{PlantedBug, SimConfig, run};

/// Prints every `tracing` event of the libraries, with the fields of its
/// explicit parent span (`BATCHWEAVE_SIM_LOG=2`).
#[derive(Default)]
struct Echo {
    spans: std::sync::Mutex<Vec<String>>,
}

struct Fields<'a>(&'a mut String);

impl tracing::field::Visit for Fields<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push_str(&format!("{}={value:?} ", field.name()));
    }
}

impl tracing::Subscriber for Echo {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut line = format!("{}{{", attrs.metadata().name());
        attrs.record(&mut Fields(&mut line));
        line.push('}');
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        spans.push(line);
        tracing::span::Id::from_u64(spans.len() as u64)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut line = String::new();
        if let Some(id) = event.parent() {
            let spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
            let i = usize::try_from(id.into_u64()).unwrap_or(0);
            if let Some(s) = i.checked_sub(1).and_then(|i| spans.get(i)) {
                line.push_str(s);
                line.push(' ');
            }
        }
        event.record(&mut Fields(&mut line));
        eprintln!("           [{}] {line}", event.metadata().target());
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

struct Args {
    start: u64,
    seeds: u64,
    trace: bool,
    verbose: bool,
    plant: Option<PlantedBug>,
    cfg: SimConfig,
}

fn plant_names() -> String {
    PlantedBug::NAMED
        .iter()
        .map(|(n, _)| *n)
        .collect::<Vec<_>>()
        .join("|")
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        start: 0,
        seeds: 1000,
        trace: false,
        verbose: false,
        plant: None,
        cfg: SimConfig::default(),
    };
    let mut it = std::env::args().skip(1);
    let num = |v: Option<String>, what: &str| -> Result<u64, String> {
        v.ok_or(format!("{what} needs a value"))?
            .parse()
            .map_err(|e| format!("{what}: {e}"))
    };
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--seeds" => a.seeds = num(it.next(), "--seeds")?,
            "--start" => a.start = num(it.next(), "--start")?,
            "--seed" => {
                a.start = num(it.next(), "--seed")?;
                a.seeds = 1;
            }
            "--trace" => a.trace = true,
            "--strict" => a.cfg.strict = true,
            "--small-buffers" => a.cfg.small_buffers = true,
            "--gc-stale-reads" => a.cfg.gc_stale_reads = true,
            "--gc-fresh-reads" => a.cfg.gc_stale_reads = false,
            "--stale-listings" => a.cfg.stale_listings = true,
            "--check-max-lag" => a.cfg.check_max_lag = true,
            "--max-commit-age-ms" => {
                a.cfg.max_commit_age = Duration::from_millis(num(it.next(), "--max-commit-age-ms")?)
            }
            "--orphan-grace-ms" => {
                a.cfg.orphan_grace =
                    Some(Duration::from_millis(num(it.next(), "--orphan-grace-ms")?))
            }
            "--footer-lookahead" => {
                let n = num(it.next(), "--footer-lookahead")?;
                a.cfg.footer_lookahead =
                    usize::try_from(n).map_err(|_| "--footer-lookahead is too large")?;
            }
            "--sealed" => a.cfg.slice_layout = SliceLayout::Sealed,
            "--verbose" | "-v" => a.verbose = true,
            "--policy" => {
                let name = it.next().ok_or("--policy needs a value")?;
                let p: PolicyKind = name.parse().map_err(|e| format!("--policy: {e}"))?;
                a.cfg.policy = Some(p);
            }
            "--without-coop" => {
                let w = SimConfig::without_coop();
                a.cfg.coop_share = w.coop_share;
                a.cfg.all_coop_rate = w.all_coop_rate;
                a.cfg.coop_crash_rate = w.coop_crash_rate;
                a.cfg.listing_stall_rate = w.listing_stall_rate;
                a.cfg.short_age_rate = w.short_age_rate;
                a.cfg.long_down_rate = w.long_down_rate;
                a.cfg.zombie_uploads = w.zombie_uploads;
                a.cfg.tgb_stale_listings = w.tgb_stale_listings;
            }
            "--plant" => {
                let name = it.next();
                a.plant = Some(
                    name.as_deref()
                        .and_then(PlantedBug::from_name)
                        .ok_or_else(|| format!("--plant {}, not {name:?}", plant_names()))?,
                )
            }
            "-h" | "--help" => {
                return Err(format!(
                    "usage: sim [--seeds N] [--start S] [--seed S] [--trace] [--verbose] [--strict] [--gc-stale-reads] [--gc-fresh-reads] [--small-buffers] [--stale-listings] [--check-max-lag] \
                     [--max-commit-age-ms MS] [--orphan-grace-ms MS] [--plant {}] [--policy coop|dac|naive|fixed:K|incr|aimd] [--without-coop]",
                    plant_names()
                ));
            }
            other => return Err(format!("unknown argument {other:?} (try --help)")),
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    if std::env::var("BATCHWEAVE_SIM_LOG").is_ok_and(|v| v == "2") {
        let _ = tracing::subscriber::set_global_default(Echo::default());
    }
    let cfg = SimConfig {
        plant: args.plant,
        ..args.cfg.clone()
    };
    let t0 = Instant::now();
    let end = args.start.saturating_add(args.seeds);
    let mut steps = 0u64;
    for (i, seed) in (args.start..end).enumerate() {
        match run(seed, &cfg) {
            Ok(r) => {
                steps += r.steps;
                if args.seeds == 1 {
                    println!("{r:#?}");
                } else if args.verbose {
                    println!(
                        "seed {seed} digest {:016x} steps {} versions {} grid {:?} groups {:?} incarnations {} crashes {} zombies {} suspends {} \
                         restores {} probes {:?} retired {} conflicts {} ambiguous {} lost-replies {} ghosts {}/{} delayed {} \
                         gc {}/{} deletes-checked {} storage-checks {} reclaimed {:?} faults {:?} virtual {}ms \
                         coop {}/{} versions {} published {} claims-recorded {} crash-after-claim-object {} crash-after-listing {} fenced-while-published {} fenced-with-uploads {} \
                         long-downs {} listing-stalls {} zombie-uploads {:?} swept-while-held {} stale-tgb-listings {:?} deleted-listed {} short-ages {:?}",
                        r.digest,
                        r.steps,
                        r.versions,
                        r.tgb_grid,
                        r.groups,
                        r.incarnations,
                        r.producer_crashes,
                        r.zombies,
                        r.suspends,
                        r.consumer_restores,
                        r.probes,
                        r.retired,
                        r.conflicts,
                        r.ambiguous,
                        r.lost_replies_recovered,
                        r.ghosts_prevented,
                        r.ghosts_written,
                        r.delayed_creates,
                        r.gc_interrupted,
                        r.gc_passes,
                        r.gc_deletes_checked,
                        r.storage_checks,
                        r.reclaimed,
                        r.faults,
                        r.virtual_ms,
                        r.coop.incarnations,
                        r.incarnations,
                        r.coop.versions,
                        r.coop.published_for_others,
                        r.coop.claims_recorded,
                        r.coop.crashes_after_claim_object,
                        r.coop.crashes_after_listing,
                        r.coop.fenced_while_published,
                        r.coop.fenced_with_uploads,
                        r.coop.long_downs,
                        r.coop.listing_stalls,
                        r.coop.zombie_uploads,
                        r.coop.swept_while_held,
                        r.coop.stale_listings,
                        r.coop.deleted_listed,
                        r.coop.short_ages
                    );
                }
            }
            Err(f) => {
                eprintln!();
                if args.trace {
                    for line in f.trace() {
                        eprintln!("  {line}");
                    }
                }
                eprintln!("FAILED {f}");
                return ExitCode::FAILURE;
            }
        }
        let done = i as u64 + 1;
        if done.is_multiple_of(50) || done == args.seeds {
            let secs = t0.elapsed().as_secs_f64();
            eprint!(
                "\r{done}/{} seeds ok ({steps} steps), {:.1} seeds/s   ",
                args.seeds,
                done as f64 / secs.max(1e-9)
            );
        }
    }
    eprintln!();
    ExitCode::SUCCESS
}
