//! `batchweave inspect`: a stream's versions, steps, producers, GC boundary,
//! watermarks and low-water mark, as an aligned table or one JSON object.

use std::io::Write;

use anyhow::Context;
use batchweave::gc::{GroupMark, PositionMark};
use batchweave::{Stream, StreamInfo};
use serde::Serialize;

/// Arguments of `batchweave inspect`.
#[derive(Debug, clap::Args)]
pub(crate) struct InspectArgs {
    /// Stream URL: a directory, `file:///dir`, `s3://bucket/prefix`, `gs://...`, `az://...`.
    #[arg(long)]
    store: String,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Opens the stream at `url` for one of the commands ([`Stream::open`]: it checks that
/// the store honours conditional create).
pub(crate) async fn open_stream(url: &str) -> anyhow::Result<Stream> {
    Stream::open(url)
        .await
        .with_context(|| format!("opening stream {url}"))
}

/// Writes `text` to stdout; a closed pipe (`| head`) is not an error.
pub(crate) fn print_out(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e).context("writing to stdout"),
        _ => Ok(()),
    }
}

/// Runs `batchweave inspect`.
pub(crate) async fn run(args: InspectArgs) -> anyhow::Result<()> {
    let stream = open_stream(&args.store).await?;
    let info = stream
        .inspect()
        .await
        .with_context(|| format!("reading the state of {}", args.store))?;
    if args.json {
        let text =
            serde_json::to_string_pretty(&to_json(&args.store, &info)).context("encoding JSON")?;
        print_out(&(text + "\n"))
    } else {
        print_out(&to_table(&args.store, &info))
    }
}

/// One position's watermark in the JSON form (`null`s when it has none).
#[derive(Serialize)]
struct PositionOut<'a> {
    position: &'a str,
    present: bool,
    version: Option<u64>,
    step: Option<u64>,
    updated_at_ms: Option<u64>,
}

/// One consumer group in the JSON form.
#[derive(Serialize)]
struct GroupOut<'a> {
    group: &'a str,
    step: u64,
    version: u64,
    dead: bool,
    positions: Vec<PositionOut<'a>>,
}

/// One producer entry in the JSON form.
#[derive(Serialize)]
struct ProducerOut<'a> {
    id: &'a str,
    epoch: u64,
    source_offset: u64,
    last_sequence: u64,
    last_commit_version: u64,
    tgbs_committed: u64,
    last_commit_ms: u64,
}

/// The GC boundary in the JSON form.
#[derive(Serialize)]
struct BoundaryOut {
    min_live_version: u64,
    low_water_step: u64,
    updated_at_ms: u64,
}

/// The low-water mark in the JSON form (`null` without live groups).
#[derive(Serialize)]
struct LowWaterOut {
    step: Option<u64>,
    version: Option<u64>,
}

/// The JSON form of `batchweave inspect`, in this field order.
#[derive(Serialize)]
struct InfoOut<'a> {
    store: &'a str,
    version: u64,
    first_step: u64,
    end_step: u64,
    retained_tgbs: u64,
    retained_bytes: u64,
    producers: Vec<ProducerOut<'a>>,
    gc_boundary: BoundaryOut,
    groups: Vec<GroupOut<'a>>,
    low_water: LowWaterOut,
}

fn position_out(p: &PositionMark) -> PositionOut<'_> {
    let some = |v: u64| p.present.then_some(v);
    PositionOut {
        position: &p.position,
        present: p.present,
        version: some(p.version),
        step: some(p.step),
        updated_at_ms: some(p.updated_at_ms),
    }
}

fn group_out(g: &GroupMark) -> GroupOut<'_> {
    GroupOut {
        group: &g.group,
        step: g.step,
        version: g.version,
        dead: g.dead,
        positions: g.positions.iter().map(position_out).collect(),
    }
}

/// The JSON form: one object, `null` where there is no value.
fn to_json<'a>(url: &'a str, info: &'a StreamInfo) -> InfoOut<'a> {
    InfoOut {
        store: url,
        version: info.version,
        first_step: info.first_step,
        end_step: info.end_step,
        retained_tgbs: info.retained_tgbs,
        retained_bytes: info.retained_bytes,
        producers: info
            .producers
            .iter()
            .map(|(id, p)| ProducerOut {
                id,
                epoch: p.epoch,
                source_offset: p.source_offset,
                last_sequence: p.last_sequence,
                last_commit_version: p.last_commit_version,
                tgbs_committed: p.tgbs_committed,
                last_commit_ms: p.last_commit_ms,
            })
            .collect(),
        gc_boundary: BoundaryOut {
            min_live_version: info.boundary.min_live_version,
            low_water_step: info.boundary.low_water_step,
            updated_at_ms: info.boundary.updated_at_ms,
        },
        groups: info.low_water.groups.iter().map(group_out).collect(),
        low_water: LowWaterOut {
            step: info.low_water.step,
            version: info.low_water.version,
        },
    }
}

/// Columns padded to their widest cell, two spaces apart, each line indented.
fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    let mut out = String::new();
    let header_row: Vec<String> = headers.iter().map(|h| (*h).to_string()).collect();
    for row in std::iter::once(&header_row).chain(rows) {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str("  ");
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(|| "none".to_string(), |v| v.to_string())
}

/// The human-readable form.
fn to_table(url: &str, info: &StreamInfo) -> String {
    let lw = &info.low_water;
    let mut out = format!(
        "stream          {url}\n\
         newest version  {}\n\
         steps           [{}, {})\n\
         retained        {} TGBs, {} bytes\n\
         gc boundary     min live version {}, low-water step {}\n\
         low-water mark  step {}, version {}\n",
        info.version,
        info.first_step,
        info.end_step,
        info.retained_tgbs,
        info.retained_bytes,
        info.boundary.min_live_version,
        info.boundary.low_water_step,
        opt(lw.step),
        opt(lw.version),
    );
    out.push_str(&format!("\nproducers ({})\n", info.producers.len()));
    let rows: Vec<Vec<String>> = info
        .producers
        .iter()
        .map(|(id, p)| {
            vec![
                id.clone(),
                p.epoch.to_string(),
                p.source_offset.to_string(),
                p.last_sequence.to_string(),
                p.last_commit_version.to_string(),
                p.tgbs_committed.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "ID",
            "EPOCH",
            "SOURCE OFFSET",
            "LAST SEQ",
            "LAST COMMIT V",
            "TGBS",
        ],
        &rows,
    ));
    out.push_str(&format!("\nwatermarks (groups: {})\n", lw.groups.len()));
    let mut rows = Vec::new();
    for g in &lw.groups {
        let state = if g.dead { "dead" } else { "live" };
        for p in &g.positions {
            let (v, s) = if p.present {
                (p.version.to_string(), p.step.to_string())
            } else {
                ("none".to_string(), "none".to_string())
            };
            rows.push(vec![
                g.group.clone(),
                state.to_string(),
                p.position.clone(),
                v,
                s,
            ]);
        }
        rows.push(vec![
            g.group.clone(),
            state.to_string(),
            "(group min)".to_string(),
            g.version.to_string(),
            g.step.to_string(),
        ]);
    }
    out.push_str(&table(
        &["GROUP", "STATE", "POSITION", "VERSION", "STEP"],
        &rows,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_aligns_columns() {
        let t = table(
            &["A", "BB"],
            &[
                vec!["long".into(), "x".into()],
                vec!["y".into(), "zzz".into()],
            ],
        );
        assert_eq!(t, "  A     BB\n  long  x\n  y     zzz\n");
    }
}
