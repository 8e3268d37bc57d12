//! The checked-in golden objects `tests/golden/v1.tgb` (packed) and `tests/golden/v2.tgb`
//! (sealed) must match the encoders byte for byte, decode to the documented values, and
//! match the hex dumps and field tables of `docs/format-tgb.md`, so neither the code nor the
//! docs can drift.
//!
//! To regenerate the file after an intentional format change (which also needs a new
//! FORMAT_VERSION): `BATCHWEAVE_BLESS=1 cargo test -p batchweave-tgb --test golden`.

use std::path::PathBuf;

use batchweave_tgb::{
    FooterCheck, decode_footer, decode_object, decode_trailer, encode_tgb, encode_tgb_sealed,
    open_sealed_run,
};
use bytes::Bytes;

fn golden_path(file: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(file)
}

fn doc() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/format-tgb.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
}

fn golden_encoding() -> Bytes {
    let slices = ["d0c0", "d0c1", "d1c0", "d1c1"].map(|s| Bytes::from_static(s.as_bytes()));
    encode_tgb(2, 2, slices.to_vec()).unwrap().to_bytes()
}

/// The sealed example: `D = 2, C = 1`, slices `abc` and `de` (so slot 1 has padding).
fn sealed_encoding() -> Bytes {
    let slices = vec![Bytes::from_static(b"abc"), Bytes::from_static(b"de")];
    encode_tgb_sealed(2, 1, slices).unwrap().to_bytes()
}

fn read_golden(file: &str, encoding: fn() -> Bytes) -> Vec<u8> {
    if std::env::var_os("BATCHWEAVE_BLESS").is_some() {
        std::fs::create_dir_all(golden_path(file).parent().unwrap()).unwrap();
        std::fs::write(golden_path(file), encoding()).unwrap();
    }
    std::fs::read(golden_path(file)).unwrap()
}

fn golden() -> Vec<u8> {
    read_golden("v1.tgb", golden_encoding)
}

fn sealed_golden() -> Vec<u8> {
    read_golden("v2.tgb", sealed_encoding)
}

/// Lines between `<!-- {name}:begin -->` and `<!-- {name}:end -->` in the doc.
fn doc_block(doc: &str, name: &str) -> Vec<String> {
    let begin = format!("<!-- {name}:begin -->");
    let end = format!("<!-- {name}:end -->");
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("doc lacks {begin}"))
        + begin.len();
    let stop = doc[start..]
        .find(&end)
        .unwrap_or_else(|| panic!("doc lacks {end}"))
        + start;
    doc[start..stop].lines().map(str::to_owned).collect()
}

#[test]
fn golden_file_matches_encoder() {
    assert_eq!(
        golden(),
        golden_encoding().to_vec(),
        "encoder output changed; see module docs"
    );
}

#[test]
fn golden_file_decodes_to_documented_values() {
    let obj = golden();
    assert_eq!(obj.len(), 148);
    let t = decode_trailer(&obj).unwrap();
    assert_eq!(t.footer_offset, 16);
    assert_eq!(t.footer_length, 100);
    assert_eq!(t.version, 1);
    let index = decode_object(&obj).unwrap();
    let footer = &obj[16..116];
    assert_eq!(t.footer_crc32, crc32fast::hash(footer));
    let check = FooterCheck::new(16, t.footer_crc32).with_object_size(148);
    assert_eq!(decode_footer(footer, check).unwrap(), index);
    assert_eq!((index.dp(), index.cp()), (2, 2));
    let names = [b"d0c0", b"d0c1", b"d1c0", b"d1c1"];
    for (i, e) in index.entries().iter().enumerate() {
        assert_eq!((e.offset, e.length), (4 * i as u64, 4));
        assert_eq!(e.crc32, crc32fast::hash(names[i]));
        index.verify(i as u32, names[i]).unwrap();
    }
    assert_eq!(index.range_of(2, 2).unwrap(), 8..16);
}

#[test]
fn sealed_golden_file_matches_encoder_and_documented_values() {
    let obj = sealed_golden();
    assert_eq!(
        obj,
        sealed_encoding().to_vec(),
        "sealed encoder output changed"
    );
    assert_eq!(obj.len(), 146);
    let t = decode_trailer(&obj).unwrap();
    assert_eq!((t.footer_offset, t.footer_length, t.version), (54, 60, 2));
    let index = decode_object(&obj).unwrap();
    assert_eq!(index.slice_stride(), 27);
    let obj = Bytes::from(obj);
    let got = open_sealed_run(&obj.slice(0..54), 0, 2, 27, t.footer_crc32).unwrap();
    assert_eq!(
        got,
        vec![Bytes::from_static(b"abc"), Bytes::from_static(b"de")]
    );
}

#[test]
fn doc_hex_dump_is_the_golden_file() {
    check_hex_dump("golden-hex", &golden());
    check_hex_dump("golden-v2-hex", &sealed_golden());
}

fn check_hex_dump(block: &str, golden: &[u8]) {
    let mut bytes = Vec::new();
    for line in doc_block(&doc(), block) {
        let mut words = line.split_whitespace();
        let Some(offset) = words.next() else { continue };
        if offset.starts_with("```") {
            continue;
        }
        let offset = usize::from_str_radix(offset.trim_end_matches(':'), 16).unwrap();
        assert_eq!(offset, bytes.len(), "hex dump offset column");
        bytes.extend(words.map(|w| u8::from_str_radix(w, 16).unwrap()));
    }
    assert_eq!(bytes, golden, "{block}");
}

fn parse_value(v: &str) -> Vec<u8> {
    if let Some(s) = v.strip_prefix("b\"").and_then(|s| s.strip_suffix('"')) {
        s.replace("\\0", "\0").into_bytes()
    } else if let Some(h) = v.strip_prefix("0x") {
        u64::from_str_radix(h, 16).unwrap().to_le_bytes().to_vec()
    } else {
        v.parse::<u64>().unwrap().to_le_bytes().to_vec()
    }
}

#[test]
fn doc_field_table_matches_the_golden_file() {
    check_field_table("golden-fields", &golden());
    check_field_table("golden-v2-fields", &sealed_golden());
}

fn check_field_table(block: &str, obj: &[u8]) {
    let mut covered = vec![false; obj.len()];
    for line in doc_block(&doc(), block) {
        let cols: Vec<&str> = line
            .split('|')
            .map(|c| c.trim().trim_matches('`'))
            .collect();
        // | offset | size | field | value |
        let (Some(off), Some(size), Some(field), Some(value)) =
            (cols.get(1), cols.get(2), cols.get(3), cols.get(4))
        else {
            continue;
        };
        let (Ok(off), Ok(size)) = (off.parse::<usize>(), size.parse::<usize>()) else {
            continue; // header and separator rows
        };
        let mut want = parse_value(value);
        want.resize(size, 0);
        assert!(want.len() == size, "{field}: value wider than size");
        assert_eq!(
            &obj[off..off + size],
            &want[..],
            "doc row for {field} at offset {off}"
        );
        for c in &mut covered[off..off + size] {
            assert!(!*c, "{field}: overlaps another row");
            *c = true;
        }
    }
    let missing: Vec<usize> = (0..obj.len()).filter(|&i| !covered[i]).collect();
    assert!(
        missing.is_empty(),
        "{block}: doc field table leaves bytes undescribed: {missing:?}"
    );
}

#[test]
fn crc_is_the_documented_variant() {
    // docs/format-tgb.md section 1: CRC-32/ISO-HDLC check values.
    assert_eq!(crc32fast::hash(b"123456789"), 0xCBF4_3926);
    assert_eq!(crc32fast::hash(b""), 0);
}
