//! Golden files: objects encoded by this crate from the values documented in
//! `docs/format.md` ("Golden files"). Decoding must give exactly those values
//! and encoding them must give exactly the stored bytes, so any change of
//! the format shows up here. `BATCHWEAVE_BLESS=1` rewrites the files.

use std::path::PathBuf;

mod common;

use batchweave_manifest::{
    DecodeLimits, GcBoundary, GroupLayout, HEADER_LEN, Manifest, Pending, ProducerState,
    TgbDescriptor, Watermark, check_extends, decode_gc_boundary, decode_group_layout,
    decode_manifest, decode_watermark, described_tgb_key, descriptor_from_key, encode_gc_boundary,
    encode_group_layout, encode_manifest, encode_watermark, rebase, rebase_cooperative, rules,
    tgb_key, validate,
};

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("golden")
}

fn expected_manifest() -> Manifest {
    let tgbs = vec![
        TgbDescriptor {
            key: "tgb/prep-0/0000000001-00000000000000000002.tgb".into(),
            object_size: 8192,
            dp: 2,
            cp: 1,
            footer_offset: 8100,
            footer_length: 60,
            footer_crc32: 0x5046_aeb5,
            producer_id: "prep-0".into(),
            epoch: 1,
            sequence: 2,
            visible_version: 2,
            payload_bytes: 8100,
            source_offset: 200,
            slice_stride: 0,
        },
        TgbDescriptor {
            key: "tgb/prep-1/0000000002-00000000000000000001.tgb".into(),
            object_size: 4096,
            dp: 2,
            cp: 1,
            footer_offset: 4004,
            footer_length: 60,
            footer_crc32: 0x3767_8c05,
            producer_id: "prep-1".into(),
            epoch: 2,
            sequence: 1,
            visible_version: 3,
            payload_bytes: 4004,
            source_offset: 50,
            slice_stride: 0,
        },
    ];
    let producers = [
        (
            "prep-0".to_owned(),
            ProducerState {
                epoch: 1,
                incarnation: 0x0123_4567_89ab_cdef,
                source_offset: 200,
                last_sequence: 2,
                last_commit_version: 2,
                tgbs_committed: 2,
                last_commit_ms: 1_699_999_999_000,
                max_commit_age_ms: 0,
            },
        ),
        (
            "prep-1".to_owned(),
            ProducerState {
                epoch: 2,
                incarnation: 42,
                source_offset: 50,
                last_sequence: 1,
                last_commit_version: 3,
                tgbs_committed: 1,
                last_commit_ms: 1_700_000_000_000,
                max_commit_age_ms: 0,
            },
        ),
    ]
    .into_iter()
    .collect();
    Manifest {
        version: 3,
        first_step: 1,
        tgbs,
        producers,
        committed_at_ms: 1_700_000_000_000,
        total_tgbs: 3,
        retained_bytes: 12_288,
        grid_dp: 2,
        grid_cp: 1,
        committer: String::new(),
    }
}

fn expected_gc() -> GcBoundary {
    GcBoundary {
        min_live_version: 2,
        low_water_step: 1,
        updated_at_ms: 1_700_000_000_500,
    }
}

fn expected_watermark() -> Watermark {
    Watermark {
        version: 3,
        step: 2,
        updated_at_ms: 1_700_000_001_000,
    }
}

fn expected_layout() -> GroupLayout {
    GroupLayout {
        dp: 4,
        cp: 2,
        updated_at_ms: 1_700_000_002_000,
        tp: 8,
        pp: 1,
    }
}

fn golden(name: &str, encoded: &[u8]) -> Vec<u8> {
    let path = dir().join(name);
    if std::env::var_os("BATCHWEAVE_BLESS").is_some() {
        std::fs::write(&path, encoded).unwrap();
    }
    let stored = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(
        stored, encoded,
        "{name}: encoding changed; the format is frozen"
    );
    stored
}

#[test]
fn golden_manifest() {
    let bytes = golden("v1.manifest", &encode_manifest(&expected_manifest()));
    let m = decode_manifest(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(&bytes[..4], b"BWMF");
    assert_eq!(m.version, 3);
    assert_eq!(m.first_step, 1);
    assert_eq!(m.committed_at_ms, 1_700_000_000_000);
    assert_eq!(m.total_tgbs, 3);
    assert_eq!(m.retained_bytes, 12_288);
    assert_eq!(m.tgbs.len(), 2);
    assert_eq!(m.producers.len(), 2);
    for (got, want) in m.tgbs.iter().zip(&expected_manifest().tgbs) {
        assert_eq!(got, want);
    }
    let t = &m.tgbs[1];
    assert_eq!(t.key, "tgb/prep-1/0000000002-00000000000000000001.tgb");
    assert_eq!(
        (t.dp, t.cp, t.footer_offset, t.footer_length),
        (2, 1, 4004, 60)
    );
    assert_eq!((m.grid_dp, m.grid_cp), (2, 1));
    assert_eq!(batchweave_manifest::stream_grid(&m), Some((2, 1)));
    assert_eq!(t.footer_crc32, 0x3767_8c05);
    let p = &m.producers["prep-0"];
    assert_eq!(p.incarnation, 0x0123_4567_89ab_cdef);
    assert_eq!(m, expected_manifest());
}

#[test]
fn golden_gc_boundary() {
    let bytes = golden("v1.gcboundary", &encode_gc_boundary(&expected_gc()));
    let gc = decode_gc_boundary(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(&bytes[..4], b"BWGC");
    assert_eq!(gc.min_live_version, 2);
    assert_eq!(gc.low_water_step, 1);
    assert_eq!(gc.updated_at_ms, 1_700_000_000_500);
}

#[test]
fn golden_group_layout() {
    let bytes = golden("v1.grouplayout", &encode_group_layout(&expected_layout()));
    let l = decode_group_layout(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(&bytes[..4], b"BWGL");
    assert_eq!((l.dp, l.cp, l.tp, l.pp), (4, 2, 8, 1));
    assert_eq!(l, expected_layout());
}

#[test]
fn golden_watermark() {
    let bytes = golden("v1.watermark", &encode_watermark(&expected_watermark()));
    let wm = decode_watermark(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(&bytes[..4], b"BWWM");
    assert_eq!(
        (wm.version, wm.step, wm.updated_at_ms),
        (3, 2, 1_700_000_001_000)
    );
}

/// The hex dumps printed in docs/format.md are the golden bytes.
#[test]
fn docs_hex_dumps_match_golden_files() {
    let doc_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/format.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    for (marker, file) in [
        ("golden:v1.manifest", "v1.manifest"),
        ("golden:v1.gcboundary", "v1.gcboundary"),
        ("golden:v1.watermark", "v1.watermark"),
        ("golden:v1.grouplayout", "v1.grouplayout"),
        ("golden:v1-cooperative.manifest", "v1-cooperative.manifest"),
    ] {
        let start = doc
            .find(marker)
            .unwrap_or_else(|| panic!("{marker} missing in docs"));
        let block = &doc[start + marker.len()..];
        let block = &block[..block.find("```").unwrap()];
        let hex: String = block.chars().filter(char::is_ascii_hexdigit).collect();
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        assert_eq!(bytes, std::fs::read(dir().join(file)).unwrap(), "{file}");
    }
}

fn fuzz_corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus")
}

/// The fuzz corpora keep copies of the golden objects; they must be the
/// current ones (`BATCHWEAVE_BLESS=1` rewrites them).
#[test]
fn fuzz_corpora_hold_the_golden_objects() {
    // Encoded here rather than read from tests/golden, which the other tests
    // may be rewriting concurrently under BATCHWEAVE_BLESS.
    let objects = [
        ("v1.manifest", encode_manifest(&expected_manifest())),
        ("v1.gcboundary", encode_gc_boundary(&expected_gc())),
        ("v1.watermark", encode_watermark(&expected_watermark())),
    ];
    for entry in std::fs::read_dir(fuzz_corpus()).unwrap() {
        let target = entry.unwrap().path();
        for (name, golden) in &objects {
            let copy = target.join(name);
            if !copy.exists() {
                continue;
            }
            if std::env::var_os("BATCHWEAVE_BLESS").is_some() {
                std::fs::write(&copy, golden).unwrap();
            }
            assert_eq!(
                std::fs::read(&copy).unwrap(),
                golden.as_ref(),
                "{} is not the golden {name}",
                copy.display()
            );
        }
    }
}

/// The golden manifest's next version: prep-0 commits its sequence 3.
fn golden_successor() -> Manifest {
    let prev = expected_manifest();
    let tgb = TgbDescriptor {
        key: tgb_key("prep-0", 1, 3),
        object_size: 2048,
        dp: 2,
        cp: 1,
        footer_offset: 1956,
        footer_length: 60,
        footer_crc32: 0x120a_069b,
        producer_id: "prep-0".into(),
        epoch: 1,
        sequence: 3,
        visible_version: 0,
        payload_bytes: 1956,
        source_offset: 300,
        slice_stride: 0,
    };
    let pending = Pending {
        producer_id: "prep-0".into(),
        epoch: 1,
        incarnation: 0x0123_4567_89ab_cdef,
        tgbs: vec![tgb],
        source_offset: 300,
        now_ms: 1_700_000_001_000,
    };
    rebase(&prev, &pending, 2).unwrap()
}

/// Seeds of the `extend_pair` fuzz target: two envelopes back to back, and
/// whether the second extends the first.
fn extend_pair_seeds() -> Vec<(&'static str, Manifest, Manifest, bool)> {
    use common::{empty, pending};
    let g = Manifest::genesis();
    let v1 = rebase(&g, &pending("a", 1, 7, 1..=2), 0).unwrap();
    let v2 = rebase(&v1, &pending("b", 1, 8, 1..=1), 0).unwrap();
    let v3 = rebase(&v2, &pending("a", 2, 9, 3..=3), 1).unwrap();
    let v4 = rebase(&v3, &empty("b", 1, 8, 10), 3).unwrap();
    let mut forged = v3.clone();
    forged.tgbs[0].footer_crc32 ^= 0xff;
    // a's sequence 2 appended again after every copy was trimmed, b's
    // counters absorbing the total: valid on its own, not an extension.
    let mut reappended = v2.clone();
    reappended.version = 3;
    let mut again = v2.tgbs[1].clone();
    again.visible_version = 3;
    reappended.tgbs = vec![again];
    reappended.first_step = 3;
    reappended.total_tgbs = 4;
    reappended.retained_bytes = reappended.tgbs[0].object_size;
    reappended
        .producers
        .get_mut("a")
        .unwrap()
        .last_commit_version = 3;
    let b = reappended.producers.get_mut("b").unwrap();
    (b.last_sequence, b.tgbs_committed) = (2, 2);
    vec![
        ("seed-consecutive", v1.clone(), v2.clone(), true),
        ("seed-claim-and-trim", v2.clone(), v3.clone(), true),
        ("seed-jump", v1, v4, true),
        (
            "seed-golden-successor",
            expected_manifest(),
            golden_successor(),
            true,
        ),
        ("seed-changed-step", v2.clone(), forged, false),
        ("seed-reappend-after-trim", v2, reappended, false),
    ]
}

/// `fuzz/corpus/extend_pair/seed-*` are these pairs (`BATCHWEAVE_BLESS=1`
/// rewrites them); both halves decode, and the target's verdict is known.
#[test]
fn extend_pair_seeds_are_current() {
    let dir = fuzz_corpus().join("extend_pair");
    for (name, prev, next, extends) in extend_pair_seeds() {
        let mut bytes = encode_manifest(&prev).to_vec();
        bytes.extend_from_slice(&encode_manifest(&next));
        let path = dir.join(name);
        if std::env::var_os("BATCHWEAVE_BLESS").is_some() {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        }
        assert_eq!(
            std::fs::read(&path).unwrap_or_default(),
            bytes,
            "{name} changed"
        );
        // The target's split: the first envelope by its length field.
        let len = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
        let (first, second) = bytes.split_at(HEADER_LEN + len);
        let decode = |half| {
            decode_manifest(half, &DecodeLimits::default())
                .unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let (first, second) = (decode(first), decode(second));
        assert_eq!((&first, &second), (&prev, &next));
        assert_eq!(check_extends(&first, &second).is_ok(), extends, "{name}");
        assert!(check_extends(&second, &first).is_err(), "{name}");
    }
}

/// The golden descriptors describe real TGB objects: two slices of `n` bytes, filled
/// with one letter each (docs/format.md section 6), encoded by the tgb crate, give
/// exactly the sizes, offsets and footer CRC32s the golden manifest records.
#[test]
fn golden_descriptors_describe_real_tgbs() {
    let m = expected_manifest();
    let next = golden_successor();
    let cases = [
        (&m.tgbs[0], b'a', b'b', 4050usize),
        (&m.tgbs[1], b'c', b'd', 2002),
        (next.tgbs.last().unwrap(), b'e', b'f', 978),
        (&cooperative_tgbs().0, b'g', b'h', 1500),
        (&cooperative_tgbs().1, b'i', b'j', 750),
    ];
    for (d, first, second, n) in cases {
        let slices = vec![
            bytes::Bytes::from(vec![first; n]),
            bytes::Bytes::from(vec![second; n]),
        ];
        let e = batchweave_tgb::encode_tgb(d.dp, d.cp, slices).unwrap();
        assert_eq!(
            (
                e.object_size,
                e.footer_offset,
                e.footer_length,
                e.footer_crc32,
                e.payload_bytes
            ),
            (
                d.object_size,
                d.footer_offset,
                d.footer_length,
                d.footer_crc32,
                d.payload_bytes
            ),
            "{}",
            d.key
        );
    }
}

/// The key of form 2 that docs/format.md prints: the golden successor's TGB (prep-0's
/// sequence 3, a real TGB) under its self-describing key.
const GOLDEN_DESCRIBED_KEY: &str =
    "tgb/prep-0/0000000001-00000000000000000003.2x1.1956.120a069b.300.tgb";

#[test]
fn golden_described_key() {
    let mut d = golden_successor().tgbs.last().unwrap().clone();
    assert_eq!(described_tgb_key(&d), GOLDEN_DESCRIBED_KEY);
    // A listing entry of that key and size describes the object exactly.
    d.visible_version = 0;
    d.key = GOLDEN_DESCRIBED_KEY.to_owned();
    assert_eq!(descriptor_from_key(GOLDEN_DESCRIBED_KEY, 2048), Some(d));
    assert_eq!(descriptor_from_key(GOLDEN_DESCRIBED_KEY, 2047), None);
    let doc = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/format.md"),
    )
    .unwrap();
    assert!(
        doc.contains(&format!("`{GOLDEN_DESCRIBED_KEY}`")),
        "docs/format.md must print {GOLDEN_DESCRIBED_KEY}"
    );
}

/// Version 4 of the golden stream: the golden successor, as a current producer writes
/// it (it records its `max_commit_age_ms` of 30 s after the rebase).
fn golden_v4() -> Manifest {
    let mut m = golden_successor();
    m.producers.get_mut("prep-0").unwrap().max_commit_age_ms = 30_000;
    m
}

/// The TGBs of the cooperative golden version, both real (docs/format.md section 6):
/// prep-0's upload of its sequence 4, which prep-1 publishes, and prep-1's own sequence 2.
fn cooperative_tgbs() -> (TgbDescriptor, TgbDescriptor) {
    let theirs = TgbDescriptor {
        key: "tgb/prep-0/0000000001-00000000000000000004.2x1.3000.fc605dba.400.tgb".into(),
        object_size: 3092,
        dp: 2,
        cp: 1,
        footer_offset: 3000,
        footer_length: 60,
        footer_crc32: 0xfc60_5dba,
        producer_id: "prep-0".into(),
        epoch: 1,
        sequence: 4,
        visible_version: 5,
        payload_bytes: 3000,
        source_offset: 400,
        slice_stride: 0,
    };
    let own = TgbDescriptor {
        key: "tgb/prep-1/0000000002-00000000000000000002.2x1.1500.20cd493a.80.tgb".into(),
        object_size: 1592,
        dp: 2,
        cp: 1,
        footer_offset: 1500,
        footer_length: 60,
        footer_crc32: 0x20cd_493a,
        producer_id: "prep-1".into(),
        epoch: 2,
        sequence: 2,
        visible_version: 5,
        payload_bytes: 1500,
        source_offset: 80,
        slice_stride: 0,
    };
    (theirs, own)
}

/// `v1-cooperative.manifest`: version 5, in which prep-1 commits its sequence 2 and
/// publishes prep-0's sequence 4, trimming below step 4.
fn expected_cooperative() -> Manifest {
    let (theirs, own) = cooperative_tgbs();
    let producers = [
        (
            "prep-0".to_owned(),
            ProducerState {
                epoch: 1,
                incarnation: 0x0123_4567_89ab_cdef,
                source_offset: 400,
                last_sequence: 4,
                last_commit_version: 5,
                tgbs_committed: 4,
                last_commit_ms: 1_700_000_002_000,
                max_commit_age_ms: 30_000,
            },
        ),
        (
            "prep-1".to_owned(),
            ProducerState {
                epoch: 2,
                incarnation: 42,
                source_offset: 80,
                last_sequence: 2,
                last_commit_version: 5,
                tgbs_committed: 2,
                last_commit_ms: 1_700_000_002_000,
                max_commit_age_ms: 30_000,
            },
        ),
    ]
    .into_iter()
    .collect();
    Manifest {
        version: 5,
        first_step: 4,
        tgbs: vec![own, theirs],
        producers,
        committed_at_ms: 1_700_000_002_000,
        total_tgbs: 6,
        retained_bytes: 4684,
        grid_dp: 2,
        grid_cp: 1,
        committer: "prep-1".into(),
    }
}

/// The cooperative golden version is what `rebase_cooperative` builds from version 4,
/// prep-1's batch and a listing that describes prep-0's upload; its bytes are frozen
/// like the other golden files, and docs/format.md prints them.
#[test]
fn golden_cooperative_manifest() {
    let v4 = golden_v4();
    validate(&v4, &DecodeLimits::default()).unwrap();
    check_extends(&expected_manifest(), &v4).unwrap();
    let (theirs, own) = cooperative_tgbs();
    let listed = descriptor_from_key(&theirs.key, theirs.object_size).unwrap();
    let pending = Pending {
        producer_id: "prep-1".into(),
        epoch: 2,
        incarnation: 42,
        tgbs: vec![TgbDescriptor {
            visible_version: 0,
            ..own
        }],
        source_offset: 80,
        now_ms: 1_700_000_002_000,
    };
    let (mut built, published) = rebase_cooperative(&v4, &pending, &[listed], 16, 4).unwrap();
    assert_eq!(published, 1);
    // The committer records its own limit after the rebase, as for a plain commit.
    built.producers.get_mut("prep-1").unwrap().max_commit_age_ms = 30_000;
    assert_eq!(built, expected_cooperative());

    let bytes = golden(
        "v1-cooperative.manifest",
        &encode_manifest(&expected_cooperative()),
    );
    let m = decode_manifest(&bytes, &DecodeLimits::default()).unwrap();
    assert_eq!(m, expected_cooperative());
    assert_eq!(m.committer, "prep-1");
    check_extends(&v4, &m).unwrap();
    check_extends(&expected_manifest(), &m).unwrap();
    // Field 10 (`committer`) is the last field of the payload.
    assert!(bytes.ends_with(b"\x52\x06prep-1"));
    // A reader that predates the field reads the version without it, and refuses it.
    let mut old = m.clone();
    old.committer.clear();
    let err = validate(&old, &DecodeLimits::default()).unwrap_err();
    assert_eq!(err.rule(), Some(rules::ONE_COMMITTER), "{err}");
}
