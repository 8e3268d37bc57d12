//! Golden files: objects encoded by this crate from the values documented in
//! `docs/format.md` ("Golden files"). Decoding must give exactly those values
//! and encoding them must give exactly the stored bytes, so any change of
//! the format shows up here. `BATCHWEAVE_BLESS=1` rewrites the files.

use std::path::PathBuf;

use batchweave_manifest::{
    DecodeLimits, GcBoundary, Manifest, ProducerState, TgbDescriptor, Watermark,
    decode_gc_boundary, decode_manifest, decode_watermark, encode_gc_boundary, encode_manifest,
    encode_watermark,
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
            footer_offset: 8000,
            footer_length: 160,
            footer_crc32: 0x1234_5678,
            producer_id: "prep-0".into(),
            epoch: 1,
            sequence: 2,
            visible_version: 2,
            payload_bytes: 7936,
            source_offset: 200,
        },
        TgbDescriptor {
            key: "tgb/prep-1/0000000002-00000000000000000001.tgb".into(),
            object_size: 4096,
            dp: 2,
            cp: 1,
            footer_offset: 3900,
            footer_length: 180,
            footer_crc32: 0x9abc_def0,
            producer_id: "prep-1".into(),
            epoch: 2,
            sequence: 1,
            visible_version: 3,
            payload_bytes: 3840,
            source_offset: 50,
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
        (2, 1, 3900, 180)
    );
    assert_eq!((m.grid_dp, m.grid_cp), (2, 1));
    assert_eq!(batchweave_manifest::stream_grid(&m), Some((2, 1)));
    assert_eq!(t.footer_crc32, 0x9abc_def0);
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
        ("golden:v1.gcboundary", "v1.gcboundary"),
        ("golden:v1.watermark", "v1.watermark"),
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
