//! The one error type of this crate: a failed simulation run.

use crate::{PlantedBug, SimConfig};

/// Why a simulation run failed. Every variant carries the seed; the
/// `Display` output ends with the command that replays the run.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SimFailure {
    /// A protocol invariant was violated.
    #[error("seed {seed}: invariant `{invariant}` violated: {detail}\n{replay}")]
    Violation {
        /// The root seed of the run.
        seed: u64,
        /// Short name of the invariant (e.g. `ranks-agree`, `no-ghost-commit`).
        invariant: &'static str,
        /// What was observed.
        detail: String,
        /// The last events of the run before the violation.
        trace: Vec<String>,
        /// The command that replays the run.
        replay: String,
    },
    /// The run did not finish within the configured virtual deadline (a
    /// liveness failure: something waits forever).
    #[error("seed {seed}: stuck: {detail}\n{replay}")]
    Stuck {
        /// The root seed of the run.
        seed: u64,
        /// What was still running.
        detail: String,
        /// The last events of the run.
        trace: Vec<String>,
        /// The command that replays the run.
        replay: String,
    },
    /// The simulation itself could not be set up (bad configuration, no runtime).
    #[error("seed {seed}: cannot run the simulation: {detail}")]
    Setup {
        /// The root seed of the run.
        seed: u64,
        /// What went wrong.
        detail: String,
    },
}

/// The command line that replays `seed` under `cfg` bit for bit (the
/// `sim` binary's flags for the settings it exposes).
pub fn replay_hint(seed: u64, cfg: &SimConfig) -> String {
    let d = SimConfig::default();
    let mut flags = String::new();
    if cfg.strict {
        flags.push_str(" --strict");
    }
    if !cfg.gc_stale_reads {
        flags.push_str(" --gc-fresh-reads");
    }
    if cfg.small_buffers {
        flags.push_str(" --small-buffers");
    }
    if cfg.stale_listings {
        flags.push_str(" --stale-listings");
    }
    if cfg.check_max_lag {
        flags.push_str(" --check-max-lag");
    }
    if cfg.max_commit_age != d.max_commit_age {
        flags.push_str(&format!(
            " --max-commit-age-ms {}",
            cfg.max_commit_age.as_millis()
        ));
    }
    if cfg.orphan_grace != d.orphan_grace
        && let Some(g) = cfg.orphan_grace
    {
        flags.push_str(&format!(" --orphan-grace-ms {}", g.as_millis()));
    }
    if let Some(name) = cfg.plant.as_ref().and_then(PlantedBug::name) {
        flags.push_str(&format!(" --plant {name}"));
    }
    if let Some(p) = &cfg.policy {
        flags.push_str(&format!(" --policy {p}"));
    }
    let pre = SimConfig::without_coop();
    let coop_fields = |c: &SimConfig| {
        (
            c.coop_share,
            c.all_coop_rate,
            c.coop_crash_rate,
            c.listing_stall_rate,
            c.short_age_rate,
            c.long_down_rate,
            c.zombie_uploads.clone(),
            c.tgb_stale_listings,
        )
    };
    let without_coop = coop_fields(cfg) == coop_fields(&pre);
    if without_coop {
        flags.push_str(" --without-coop");
    }
    let mut same = cfg.clone();
    if without_coop {
        same.coop_share = d.coop_share;
        same.all_coop_rate = d.all_coop_rate;
        same.coop_crash_rate = d.coop_crash_rate;
        same.listing_stall_rate = d.listing_stall_rate;
        same.short_age_rate = d.short_age_rate;
        same.long_down_rate = d.long_down_rate;
        same.zombie_uploads = d.zombie_uploads.clone();
        same.tgb_stale_listings = d.tgb_stale_listings;
    }
    // `--policy` parses `coop` to the default cadence; the run draws its own anyway.
    same.policy = match cfg.policy {
        Some(p) if p.to_string().parse::<batchweave_producer::PolicyKind>() == Ok(p) => d.policy,
        Some(batchweave_producer::PolicyKind::Coop(_)) => d.policy,
        other => other,
    };
    same.strict = d.strict;
    same.small_buffers = d.small_buffers;
    same.gc_stale_reads = d.gc_stale_reads;
    same.stale_listings = d.stale_listings;
    same.check_max_lag = d.check_max_lag;
    same.max_commit_age = d.max_commit_age;
    same.orphan_grace = if cfg.orphan_grace.is_some() {
        d.orphan_grace
    } else {
        None
    };
    if cfg.plant.as_ref().and_then(PlantedBug::name).is_some() {
        same.plant = None;
    }
    let note = if same == d {
        ""
    } else {
        " (and the same SimConfig: only some settings have flags)"
    };
    format!(
        "replay with: cargo run -p batchweave-sim --release --bin sim -- --seed {seed}{flags} --trace{note}"
    )
}

impl SimFailure {
    /// The root seed of the failed run.
    pub fn seed(&self) -> u64 {
        match self {
            Self::Violation { seed, .. } | Self::Stuck { seed, .. } | Self::Setup { seed, .. } => {
                *seed
            }
        }
    }

    /// The invariant that broke, if this is a violation.
    pub fn invariant(&self) -> Option<&'static str> {
        match self {
            Self::Violation { invariant, .. } => Some(invariant),
            Self::Stuck { .. } | Self::Setup { .. } => None,
        }
    }

    /// The last events of the run (empty for setup failures).
    pub fn trace(&self) -> &[String] {
        match self {
            Self::Violation { trace, .. } | Self::Stuck { trace, .. } => trace,
            Self::Setup { .. } => &[],
        }
    }
}
