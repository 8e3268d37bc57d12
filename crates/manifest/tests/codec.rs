//! Property tests of the envelope codec and of manifest validation.

mod common;

use batchweave_manifest::{
    DecodeLimits, GcBoundary, Manifest, ManifestError, Watermark, decode_gc_boundary,
    decode_manifest, decode_watermark, encode_gc_boundary, encode_manifest, encode_watermark,
    try_encode_manifest, validate,
};
use common::valid_manifest;
use proptest::prelude::*;

fn limits() -> DecodeLimits {
    DecodeLimits::default()
}

#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Truncate(usize),
    Insert(usize, u8),
    Remove(usize),
    SetLength(u32),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 1..=255u8).prop_map(|(i, m)| Mutation::Flip(i, m)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Insert(i, b)),
        any::<usize>().prop_map(Mutation::Remove),
        any::<u32>().prop_map(Mutation::SetLength),
    ]
}

fn apply(bytes: &mut Vec<u8>, m: &Mutation) {
    let n = bytes.len();
    match *m {
        Mutation::Flip(i, x) => bytes[i % n] ^= x,
        Mutation::Truncate(i) => bytes.truncate(i % n),
        Mutation::Insert(i, b) => bytes.insert(i % (n + 1), b),
        Mutation::Remove(i) => {
            bytes.remove(i % n);
        }
        Mutation::SetLength(l) => bytes[8..12].copy_from_slice(&l.to_le_bytes()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn manifest_roundtrip(m in valid_manifest()) {
        validate(&m, &limits()).unwrap();
        let bytes = encode_manifest(&m);
        prop_assert_eq!(&try_encode_manifest(&m, &limits()).unwrap(), &bytes);
        let back = decode_manifest(&bytes, &limits()).unwrap();
        prop_assert_eq!(&back, &m);
        // Deterministic: re-encoding gives the same bytes.
        prop_assert_eq!(encode_manifest(&back), bytes);
    }

    #[test]
    fn small_objects_roundtrip(a in any::<u64>(), b in any::<u64>(), c in any::<u64>()) {
        let gc = GcBoundary { min_live_version: a, low_water_step: b, updated_at_ms: c };
        prop_assert_eq!(decode_gc_boundary(&encode_gc_boundary(&gc), &limits()).unwrap(), gc);
        let wm = Watermark { version: a, step: b, updated_at_ms: c };
        prop_assert_eq!(decode_watermark(&encode_watermark(&wm), &limits()).unwrap(), wm);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let _ = decode_manifest(&bytes, &limits());
        let _ = decode_gc_boundary(&bytes, &limits());
        let _ = decode_watermark(&bytes, &limits());
        // With a valid header in front, the payload parser sees the garbage.
        let mut framed = b"BWMF\x01\x00\x00\x00".to_vec();
        framed.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
        framed.extend_from_slice(&crc32fast::hash(&bytes).to_le_bytes());
        framed.extend_from_slice(&bytes);
        let _ = decode_manifest(&framed, &limits());
    }

    #[test]
    fn mutated_envelopes_never_panic(
        m in valid_manifest(),
        muts in proptest::collection::vec(mutation(), 1..6),
    ) {
        let mut bytes = encode_manifest(&m).to_vec();
        for mu in &muts {
            if bytes.len() < 16 { break; }
            apply(&mut bytes, mu);
        }
        if let Ok(back) = decode_manifest(&bytes, &limits()) {
            // Whatever is accepted is valid.
            validate(&back, &limits()).unwrap();
        }
    }

    #[test]
    fn single_byte_flip_in_manifest_is_detected(
        m in valid_manifest(), at in any::<usize>(), mask in 1..=255u8,
    ) {
        let mut bytes = encode_manifest(&m).to_vec();
        let i = at % bytes.len();
        bytes[i] ^= mask;
        prop_assert!(decode_manifest(&bytes, &limits()).is_err(), "flip at {} accepted", i);
    }

    #[test]
    fn single_byte_flip_in_small_objects_is_detected(
        a in any::<u64>(), b in any::<u64>(), c in any::<u64>(),
        at in any::<usize>(), mask in 1..=255u8,
    ) {
        let mut gc = encode_gc_boundary(
            &GcBoundary { min_live_version: a, low_water_step: b, updated_at_ms: c }).to_vec();
        let i = at % gc.len();
        gc[i] ^= mask;
        prop_assert!(decode_gc_boundary(&gc, &limits()).is_err());
        let mut wm = encode_watermark(&Watermark { version: a, step: b, updated_at_ms: c }).to_vec();
        let i = at % wm.len();
        wm[i] ^= mask;
        prop_assert!(decode_watermark(&wm, &limits()).is_err());
    }

    #[test]
    fn keys_outside_the_prefix_are_rejected(
        m in valid_manifest().prop_filter("needs a tgb", |m| !m.tgbs.is_empty()),
        which in any::<usize>(),
        bad in prop_oneof![
            Just("../x".to_owned()),
            Just("/abs".to_owned()),
            Just("other/x".to_owned()),
            Just("tgb/../../x".to_owned()),
            Just("tgb/./x".to_owned()),
            Just("tgb\\x".to_owned()),
            "tgb/[a-z]{1,4}/\\.\\./[a-z]{1,4}",
            "[a-su-z][a-z]{0,5}/[a-z]{1,8}",
        ],
    ) {
        let mut m = m;
        let i = which % m.tgbs.len();
        m.tgbs[i].key = bad;
        let err = decode_manifest(&encode_manifest(&m), &limits()).unwrap_err();
        prop_assert!(matches!(err, ManifestError::InvalidKey { .. }), "{:?}", err);
        prop_assert!(try_encode_manifest(&m, &limits()).is_err());
    }
}

fn one_tgb_manifest() -> Manifest {
    batchweave_manifest::rebase(&Manifest::genesis(), &common::pending("p", 1, 1, 1..=1), 0)
        .unwrap()
}

type Mutator = Box<dyn Fn(&mut Manifest)>;

#[test]
fn invariants_are_enforced() {
    let good = one_tgb_manifest();
    validate(&good, &limits()).unwrap();
    let cases: Vec<(&str, Mutator)> = vec![
        ("total", Box::new(|m| m.total_tgbs += 1)),
        ("retained", Box::new(|m| m.retained_bytes -= 1)),
        ("first_step overflow", Box::new(|m| m.first_step = u64::MAX)),
        ("dp", Box::new(|m| m.tgbs[0].dp = 0)),
        ("cp", Box::new(|m| m.tgbs[0].cp = 0)),
        (
            "grid",
            Box::new(|m| {
                m.tgbs[0].dp = 65_537;
            }),
        ),
        ("footer short", Box::new(|m| m.tgbs[0].footer_length = 7)),
        (
            "footer outside",
            Box::new(|m| m.tgbs[0].footer_offset = m.tgbs[0].object_size - 10),
        ),
        (
            "footer overflow",
            Box::new(|m| m.tgbs[0].footer_offset = u64::MAX),
        ),
        (
            "payload",
            Box::new(|m| m.tgbs[0].payload_bytes = m.tgbs[0].object_size),
        ),
        ("visible", Box::new(|m| m.tgbs[0].visible_version = 2)),
        (
            "empty producer",
            Box::new(|m| m.tgbs[0].producer_id.clear()),
        ),
        (
            "bad producer",
            Box::new(|m| m.tgbs[0].producer_id = "a/b".into()),
        ),
        (
            "bad key",
            Box::new(|m| m.tgbs[0].key = "manifests/x".into()),
        ),
        (
            "bad map id",
            Box::new(|m| {
                m.producers.insert("..".into(), Default::default());
            }),
        ),
        (
            "future commit",
            Box::new(|m| {
                m.producers.insert(
                    "p".into(),
                    batchweave_manifest::ProducerState {
                        last_commit_version: 2,
                        ..Default::default()
                    },
                );
            }),
        ),
    ];
    for (name, mutate) in cases {
        let mut m = good.clone();
        mutate(&mut m);
        assert!(validate(&m, &limits()).is_err(), "{name} accepted");
        assert!(
            decode_manifest(&encode_manifest(&m), &limits()).is_err(),
            "{name} decoded"
        );
    }
}

#[test]
fn count_limits_are_enforced() {
    let m = one_tgb_manifest();
    let bytes = encode_manifest(&m);
    let tight = DecodeLimits {
        max_tgbs: 0,
        ..limits()
    };
    assert!(matches!(
        decode_manifest(&bytes, &tight),
        Err(ManifestError::LimitExceeded { what: "tgbs", .. })
    ));
    let mut m2 = m.clone();
    m2.producers.insert("a".into(), Default::default());
    let tight = DecodeLimits {
        max_producers: 0,
        ..limits()
    };
    assert!(matches!(
        decode_manifest(&encode_manifest(&m2), &tight),
        Err(ManifestError::LimitExceeded {
            what: "producers",
            ..
        })
    ));
    let tight = DecodeLimits {
        max_grid: 3,
        ..limits()
    };
    assert!(matches!(
        decode_manifest(&bytes, &tight),
        Err(ManifestError::LimitExceeded {
            what: "grid cells",
            ..
        })
    ));
    let tight = DecodeLimits {
        max_bytes: 10,
        ..limits()
    };
    assert!(matches!(
        try_encode_manifest(&m, &tight),
        Err(ManifestError::TooLarge { .. })
    ));
}
