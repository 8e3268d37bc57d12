//! Target `rebase`: the commit merge on an arbitrary small base and pending batch.

use std::collections::BTreeMap;

use batchweave_manifest::{
    CommitStatus, DecodeLimits, HEADER_LEN, MANIFEST_MAGIC, Manifest, Pending, ProducerState,
    TgbDescriptor, commit_status, decode_manifest, rebase as merge, tgb_key, try_encode_manifest,
    validate,
};
use batchweave_tgb::footer_len;

use super::input::Input;
use super::manifest::{SMALL_LIMITS, fix_header};

/// Limits that only reject what cannot be encoded: the merge itself accepts any grid.
const LENIENT: DecodeLimits = DecodeLimits {
    max_bytes: u32::MAX as u64,
    max_tgbs: u64::MAX,
    max_producers: u64::MAX,
    max_grid: u64::MAX,
};

/// Producer ids the builder draws from (all valid), so that bases and pendings meet.
const IDS: [&str; 6] = ["p0", "p1", "prep-0", "prep-1", "producer-17", "x"];

/// Builds a base manifest and a pending batch from `data` and merges them.
///
/// The base is either a manifest envelope at the start of `data` (when it begins with
/// `BWMF`; its CRC32 is recomputed; the bytes after the envelope describe the pending batch) or built field by field,
/// mostly consistent and sometimes not. The merge must never panic. When the base is valid
/// and the merge succeeds, the result must validate, re-encode with `try_encode_manifest`
/// and decode back; its version is the base's plus one; other producers' entries are
/// untouched; the caller's entry and the appended descriptors match the pending batch;
/// `commit_status` reports the last pending sequence as committed; and replaying the same
/// batch on the result (a lost reply) succeeds and appends nothing.
pub fn rebase(data: &[u8]) -> bool {
    let (base, rest) = match split_envelope(data) {
        Some((envelope, rest)) => match fix_header(envelope)
            .ok_or(())
            .and_then(|e| decode_manifest(&e, &SMALL_LIMITS).map_err(|_| ()))
        {
            Ok(m) => (m, rest),
            Err(_) => return false,
        },
        None => {
            let mut input = Input::new(data);
            let m = build_manifest(&mut input);
            (m, input.rest())
        }
    };
    let mut input = Input::new(rest);
    let pending = build_pending(&mut input, &base);
    let trim = input.u64();
    let result = merge(&base, &pending, trim);
    let Ok(out) = result else {
        return false;
    };
    if validate(&base, &LENIENT).is_err() {
        return false;
    }
    check_result(&base, &pending, &out);
    true
}

fn split_envelope(data: &[u8]) -> Option<(&[u8], &[u8])> {
    if data.get(..4)? != MANIFEST_MAGIC {
        return None;
    }
    let len = u32::from_le_bytes(data.get(8..12)?.try_into().ok()?) as usize;
    let total = HEADER_LEN.checked_add(len)?;
    (total <= data.len()).then(|| data.split_at(total))
}

fn id(input: &mut Input<'_>) -> String {
    match input.byte() {
        250..=255 => {
            let len = usize::from(input.byte() % 12);
            String::from_utf8_lossy(input.bytes(len)).into_owned()
        }
        b => IDS[usize::from(b % 6)].to_owned(),
    }
}

/// A descriptor of `producer`'s TGB `(epoch, sequence)`, consistent unless the input says
/// otherwise.
fn descriptor(input: &mut Input<'_>, producer: &str, epoch: u64, sequence: u64) -> TgbDescriptor {
    let flags = input.byte();
    let (dp, cp) = if flags & 1 == 0 {
        (
            u32::from(input.byte() % 8) + 1,
            u32::from(input.byte() % 4) + 1,
        )
    } else {
        (input.u32(), input.u32())
    };
    let payload_bytes = input.u64();
    let footer_length = if flags & 2 == 0 {
        u32::try_from(footer_len(dp.saturating_mul(cp))).unwrap_or(u32::MAX)
    } else {
        input.u32()
    };
    let object_size = if flags & 4 == 0 {
        payload_bytes
            .saturating_add(u64::from(footer_length))
            .saturating_add(32)
    } else {
        input.u64()
    };
    TgbDescriptor {
        key: if flags & 8 == 0 {
            tgb_key(producer, epoch, sequence)
        } else {
            let len = usize::from(input.byte() % 40);
            String::from_utf8_lossy(input.bytes(len)).into_owned()
        },
        object_size,
        dp,
        cp,
        footer_offset: if flags & 16 == 0 {
            payload_bytes
        } else {
            input.u64()
        },
        footer_length,
        footer_crc32: input.u32_le(),
        producer_id: producer.to_owned(),
        epoch,
        sequence,
        visible_version: if flags & 32 == 0 { 0 } else { input.u64() },
        payload_bytes,
        source_offset: input.u64(),
        slice_stride: 0,
    }
}

fn build_manifest(input: &mut Input<'_>) -> Manifest {
    let version = input.u64();
    let first_step = input.u64();
    let mut producers = BTreeMap::new();
    for _ in 0..input.byte() % 5 {
        let key = id(input);
        let last_commit_version = input.u64();
        let state = ProducerState {
            epoch: input.u64(),
            incarnation: input.u64(),
            source_offset: input.u64(),
            last_sequence: input.u64(),
            last_commit_version: if input.bool() {
                last_commit_version
            } else {
                last_commit_version.min(version)
            },
            tgbs_committed: input.u64(),
            last_commit_ms: input.u64(),
            max_commit_age_ms: 0,
        };
        producers.insert(key, state);
    }
    let mut tgbs = Vec::new();
    for _ in 0..input.byte() % 9 {
        let producer = id(input);
        let (epoch, sequence) = (input.u64(), input.u64());
        let mut d = descriptor(input, &producer, epoch, sequence);
        d.visible_version = d.visible_version.min(version);
        tgbs.push(d);
    }
    let flags = input.byte();
    let count = tgbs.len() as u64;
    let total_tgbs = if flags & 1 == 0 {
        first_step.saturating_add(count)
    } else {
        input.u64()
    };
    let retained_bytes = if flags & 2 == 0 {
        tgbs.iter()
            .fold(0u64, |s, d| s.saturating_add(d.object_size))
    } else {
        input.u64()
    };
    Manifest {
        version,
        first_step,
        tgbs,
        producers,
        committed_at_ms: input.u64(),
        total_tgbs,
        retained_bytes,
        grid_dp: input.u32() % 4,
        grid_cp: input.u32() % 4,
        // Sometimes a cooperative version's committer, to reach those rules too.
        committer: if input.u32().is_multiple_of(4) {
            id(input)
        } else {
            String::new()
        },
    }
}

/// A pending batch, steered towards the base's entry for its producer so that the
/// "ours", "claim" and "fenced" cases are all reached.
fn build_pending(input: &mut Input<'_>, base: &Manifest) -> Pending {
    let producer_id = id(input);
    let entry = base
        .producers
        .get(&producer_id)
        .cloned()
        .unwrap_or_default();
    let mode = input.byte();
    let epoch = match mode % 4 {
        0 => entry.epoch,
        1 => entry.epoch.saturating_add(1),
        _ => input.u64(),
    };
    let incarnation = if mode & 4 == 0 {
        entry.incarnation
    } else {
        input.u64()
    };
    let first = if mode & 8 == 0 {
        let overlap = u64::from(input.byte() % 3);
        entry
            .last_sequence
            .saturating_add(1)
            .saturating_sub(overlap)
    } else {
        input.u64()
    };
    let source_offset = if mode & 16 == 0 {
        entry.source_offset
    } else {
        input.u64()
    };
    let mut tgbs = Vec::new();
    for i in 0..input.byte() % 6 {
        let Some(sequence) = first.checked_add(u64::from(i)) else {
            break;
        };
        tgbs.push(descriptor(input, &producer_id, epoch, sequence));
    }
    Pending {
        producer_id,
        epoch,
        incarnation,
        tgbs,
        source_offset,
        now_ms: input.u64(),
    }
}

fn check_result(base: &Manifest, pending: &Pending, out: &Manifest) {
    if let Err(e) = validate(out, &LENIENT) {
        panic!("rebase result does not validate: {e}\nbase {base:?}\npending {pending:?}");
    }
    let bytes = try_encode_manifest(out, &LENIENT).expect("rebase result must encode");
    let back = decode_manifest(&bytes, &LENIENT).expect("encoded rebase result must decode");
    assert_eq!(&back, out, "rebase result roundtrip");
    let small_grids = pending
        .tgbs
        .iter()
        .all(|t| u64::from(t.dp) * u64::from(t.cp) <= 65_536);
    if small_grids
        && validate(base, &DecodeLimits::default()).is_ok()
        && let Err(e) = validate(out, &DecodeLimits::default())
    {
        panic!("valid base and pending give an invalid result: {e}");
    }

    assert_eq!(Some(out.version), base.version.checked_add(1));
    assert!(out.first_step >= base.first_step, "first_step went back");
    assert!(out.total_tgbs >= base.total_tgbs, "total_tgbs went back");
    let id = pending.producer_id.as_str();
    for (other, state) in &base.producers {
        if other != id {
            assert_eq!(
                out.producers.get(other),
                Some(state),
                "entry of {other} changed"
            );
        }
    }
    assert_eq!(
        out.producers.len(),
        base.producers.len() + usize::from(!base.producers.contains_key(id))
    );
    let entry = out.producers.get(id).expect("caller's entry present");
    assert_eq!(
        (entry.epoch, entry.incarnation),
        (pending.epoch, pending.incarnation)
    );
    assert_eq!(entry.last_commit_version, out.version);
    assert_eq!(entry.source_offset, pending.source_offset);

    let appended = usize::try_from(out.total_tgbs - base.total_tgbs).expect("small");
    assert!(appended <= pending.tgbs.len() && appended <= out.tgbs.len());
    let new = &out.tgbs[out.tgbs.len() - appended..];
    let sent = &pending.tgbs[pending.tgbs.len() - appended..];
    for (got, want) in new.iter().zip(sent) {
        assert_eq!(got.visible_version, out.version);
        let mut want = want.clone();
        want.visible_version = out.version;
        assert_eq!(
            got, &want,
            "appended descriptor differs from the pending one"
        );
    }
    if let Some(last) = pending.tgbs.last() {
        assert_eq!(entry.last_sequence, last.sequence);
        assert_eq!(
            commit_status(out, id, pending.epoch, pending.incarnation, last.sequence),
            CommitStatus::Committed
        );
    }

    if out.version < u64::MAX {
        let again = merge(out, pending, 0).expect("replaying a committed batch must succeed");
        assert_eq!(again.tgbs, out.tgbs, "replay appended TGBs twice");
        assert_eq!(again.first_step, out.first_step);
    }
}
