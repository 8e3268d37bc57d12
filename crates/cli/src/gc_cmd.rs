//! `batchweave gc`: one reclamation pass, or a dry run that reports what it
//! would delete.

use std::time::Duration;

use anyhow::{Context, bail};
use batchweave::GcSettings;

use crate::inspect::{open_stream, print_out};

/// Arguments of `batchweave gc`.
#[derive(Debug, clap::Args)]
pub(crate) struct GcArgs {
    /// Stream URL: a directory, `file:///dir`, `s3://bucket/prefix`, `gs://...`, `az://...`.
    #[arg(long)]
    store: String,
    /// Compute and report what would be deleted; write and delete nothing.
    #[arg(long)]
    dry_run: bool,
    /// Delete uncommitted (orphan) TGB objects older than this many seconds. Must exceed
    /// the longest max_commit_age the stream's producers recorded plus a minute (the pass
    /// is refused otherwise), unless --producers-stopped.
    #[arg(long, default_value_t = 3600)]
    orphan_grace_secs: u64,
    /// No producer of the stream is running (the job ended): do not check the orphan
    /// grace against the producers' max_commit_age, so `--orphan-grace-secs 0` sweeps
    /// every orphan.
    #[arg(long)]
    producers_stopped: bool,
    /// Treat groups whose watermarks were all last written this many seconds ago as dead
    /// (default: groups live until retired).
    #[arg(long)]
    dead_group_after_secs: Option<u64>,
    /// Retire this consumer group (delete its layout and watermarks) before the pass;
    /// may be repeated.
    #[arg(long, value_name = "GROUP")]
    retire: Vec<String>,
}

/// Runs `batchweave gc`.
pub(crate) async fn run(args: GcArgs) -> anyhow::Result<()> {
    if args.dry_run && !args.retire.is_empty() {
        bail!("--retire deletes the group's watermarks and cannot be combined with --dry-run");
    }
    let stream = open_stream(&args.store).await?;
    let gc = stream.reclaimer(GcSettings {
        orphan_grace: Some(Duration::from_secs(args.orphan_grace_secs)),
        dead_group_after: args.dead_group_after_secs.map(Duration::from_secs),
        dry_run: args.dry_run,
        producers_stopped: args.producers_stopped,
        ..Default::default()
    });
    for group in &args.retire {
        let n = gc
            .retire_group(group)
            .await
            .with_context(|| format!("retiring consumer group {group:?}"))?;
        print_out(&format!(
            "gc: retired group {group} ({n} objects deleted)\n"
        ))?;
    }
    let r = gc
        .run_once()
        .await
        .with_context(|| format!("gc pass on {}", args.store))?;
    let b0 = r.boundary_before;
    let b = r.boundary;
    for (group, step, version) in &r.groups {
        print_out(&format!(
            "gc: group {group} holds the mark at step {step}, version {version}\n"
        ))?;
    }
    let (label, verb) = if r.dry_run {
        ("gc (dry run)", "would delete")
    } else {
        ("gc", "deleted")
    };
    print_out(&format!(
        "{label}: {verb} {} TGBs, {} orphans, {} epoch claims, {} manifest versions, {} bytes freed; \
         newest version {}; boundary min live version {} -> {}, low-water step {} -> {}\n",
        r.tgbs_deleted,
        r.orphans_deleted,
        r.claims_deleted,
        r.manifests_deleted,
        r.bytes_freed,
        r.newest_version,
        b0.min_live_version,
        b.min_live_version,
        b0.low_water_step,
        b.low_water_step
    ))?;
    Ok(())
}
