//! Synthetic, self-checking slice payloads (feature `test-util`): the one scheme the
//! simulation, the harness's runs and benchmarks, and the `batchweave produce` /
//! `consume` commands write and verify.
//!
//! Slice `s` (id `d * C + c`) of the TGB with number `sequence` of `producer`, `len`
//! bytes long, is a function of `(producer, sequence, s, len)` only, so a reader checks
//! every byte it got without talking to the producer:
//!
//! - a header naming all three, ASCII `{producer}|{sequence}|{s}|`, so that a wrong slice
//!   says whose it is ([`parse_header`]);
//! - then filler in blocks of 64 bytes: byte `j` of block `k` is the low byte of
//!   `key_k.rotate_left(j)`, xor the low byte of `s`, where `key_0` is the FNV-1a hash
//!   of the producer id's bytes followed by `sequence` (8 bytes, little-endian), and
//!   each further key is the previous one mixed with `s` and `k` (splitmix64). Every
//!   block differs, so a read of the wrong part of a long slice does not pass for the
//!   right one.
//!
//! A `len` shorter than the header keeps the header's first `len` bytes. `sequence` is
//! whatever per-producer number the reader can recover for the TGB: the harness and
//! the CLI use the descriptor's sequence, the simulation the TGB's source offset.
//!
//! ```
//! use batchweave_tgb::payload::{parse_header, slice_bytes, tgb_slices, verify};
//!
//! let slices = tgb_slices("prep-0", 7, 2, 1, 100);
//! assert_eq!(slices[1], slice_bytes("prep-0", 7, 1, 100));
//! assert_eq!(parse_header(&slices[1]), Some(("prep-0", 7, 1)));
//! assert!(verify("prep-0", 7, 1, 1, None, 100, &slices[1]).is_ok());
//! assert!(verify("prep-0", 8, 1, 1, None, 100, &slices[1]).is_err());
//! ```

use std::ops::Range;

use bytes::Bytes;

use crate::{TgbError, cut_part};

/// Filler bytes drawn from one key.
const BLOCK: usize = 64;

fn fnv1a(key: &mut u64, bytes: &[u8]) {
    for b in bytes {
        *key ^= u64::from(*b);
        *key = key.wrapping_mul(0x0000_0100_0000_01b3);
    }
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn header(producer: &str, sequence: u64, slice: u32) -> String {
    format!("{producer}|{sequence}|{slice}|")
}

/// Length of the header of slice `slice` of TGB `sequence` of `producer`: a slice
/// `header_len + n` bytes long carries `n` filler bytes.
pub fn header_len(producer: &str, sequence: u64, slice: u32) -> usize {
    header(producer, sequence, slice).len()
}

/// The `len` bytes of slice `slice` of TGB `sequence` of `producer`.
pub fn slice_bytes(producer: &str, sequence: u64, slice: u32, len: usize) -> Bytes {
    let mut out = header(producer, sequence, slice).into_bytes();
    out.truncate(len);
    let filler = len - out.len();
    out.reserve(filler);
    let mut key = 0xcbf2_9ce4_8422_2325;
    fnv1a(&mut key, producer.as_bytes());
    fnv1a(&mut key, &sequence.to_le_bytes());
    let tweak = slice as u8;
    for i in 0..filler {
        let (k, j) = (i / BLOCK, i % BLOCK);
        if k > 0 && j == 0 {
            key = splitmix64(key ^ (u64::from(slice) << 32) ^ k as u64);
        }
        out.push((key.rotate_left(j as u32) as u8) ^ tweak);
    }
    Bytes::from(out)
}

/// The header of a slice: `(producer, sequence, slice id)`, or `None` when `bytes` do
/// not start with one.
pub fn parse_header(bytes: &[u8]) -> Option<(&str, u64, u32)> {
    let mut pipes = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'|')
        .map(|(i, _)| i);
    let (a, b, c) = (pipes.next()?, pipes.next()?, pipes.next()?);
    let field = |r: Range<usize>| std::str::from_utf8(bytes.get(r)?).ok();
    Some((
        field(0..a)?,
        field(a + 1..b)?.parse().ok()?,
        field(b + 1..c)?.parse().ok()?,
    ))
}

/// All `dp * cp` slices of one TGB, each `len` bytes, in slice-id order.
pub fn tgb_slices(producer: &str, sequence: u64, dp: u32, cp: u32, len: usize) -> Vec<Bytes> {
    (0..dp * cp)
        .map(|s| slice_bytes(producer, sequence, s, len))
        .collect()
}

/// The bytes a read of `slices` of TGB `sequence` of `producer` must return: the
/// slices back to back (slice `s` is `len(s)` bytes), cut to part `(index, of)` when the
/// reader splits CP further than the TGB (see [`cut_part`]).
pub fn expected_read(
    producer: &str,
    sequence: u64,
    slices: Range<u32>,
    part: Option<(u32, u32)>,
    len: impl Fn(u32) -> usize,
) -> Result<Bytes, TgbError> {
    let mut all = Vec::new();
    for s in slices {
        all.extend_from_slice(&slice_bytes(producer, sequence, s, len(s)));
    }
    let all = Bytes::from(all);
    match part {
        Some((index, of)) => cut_part(&all, index, of, 1),
        None => Ok(all),
    }
}

/// Checks one read of `slice_count` slices from `first_slice` (each `slice_len`
/// bytes; `part` as in [`expected_read`]) against the payload it must be. The error
/// describes the difference.
pub fn verify(
    producer: &str,
    sequence: u64,
    first_slice: u32,
    slice_count: u32,
    part: Option<(u32, u32)>,
    slice_len: usize,
    got: &[u8],
) -> Result<(), String> {
    let slices = first_slice..first_slice + slice_count;
    let expected = expected_read(producer, sequence, slices.clone(), part, |_| slice_len)
        .map_err(|e| e.to_string())?;
    if expected.as_ref() == got {
        return Ok(());
    }
    let found = parse_header(got).map_or("no slice header".to_string(), |(p, q, s)| {
        format!("starts with the header of {p} seq {q} slice {s}")
    });
    Err(format!(
        "payload mismatch: {producer} seq {sequence} slices {}..{}{}: expected {} bytes (crc {:08x}), got {} bytes (crc {:08x}, {found})",
        slices.start,
        slices.end,
        part.map_or(String::new(), |(i, n)| format!(" part {i} of {n}")),
        expected.len(),
        crc32fast::hash(&expected),
        got.len(),
        crc32fast::hash(got)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_distinct_and_self_describing() {
        let b = slice_bytes("p3", 17, 2, 40);
        assert_eq!(b.len(), 40);
        assert_eq!(b, slice_bytes("p3", 17, 2, 40));
        assert_eq!(parse_header(&b), Some(("p3", 17, 2)));
        assert_ne!(b, slice_bytes("p3", 17, 1, 40));
        assert_ne!(b, slice_bytes("p3", 18, 2, 40));
        assert_ne!(b, slice_bytes("p4", 17, 2, 40));
        assert_eq!(parse_header(b"garbage"), None);
        assert_eq!(&slice_bytes("p3", 17, 2, 4)[..], b"p3|1");
        assert_eq!(slice_bytes("p3", 17, 2, 0).len(), 0);
        assert_eq!(header_len("p3", 17, 2), "p3|17|2|".len());
    }

    #[test]
    fn parts_of_a_long_slice_all_differ() {
        // CP split into 4 parts at multiples of 64: no two parts may look alike.
        let s = slice_bytes("p", 1, 0, 4096);
        let parts: Vec<Bytes> = (0..4).map(|i| cut_part(&s, i, 4, 1).unwrap()).collect();
        for i in 1..4 {
            for j in 0..i {
                assert_ne!(parts[i], parts[j], "parts {i} and {j}");
            }
        }
        let read = expected_read("p", 1, 0..1, Some((2, 4)), |_| 4096).unwrap();
        assert_eq!(read, parts[2]);
        assert!(verify("p", 1, 0, 1, Some((2, 4)), 4096, &parts[2]).is_ok());
        assert!(verify("p", 1, 0, 1, Some((2, 4)), 4096, &parts[1]).is_err());
    }

    #[test]
    fn verify_names_what_it_got() {
        let two: Vec<u8> = [slice_bytes("p", 3, 2, 50), slice_bytes("p", 3, 3, 50)].concat();
        assert!(verify("p", 3, 2, 2, None, 50, &two).is_ok());
        let mut bad = two.clone();
        bad[77] ^= 1;
        assert!(verify("p", 3, 2, 2, None, 50, &bad).is_err());
        let other = slice_bytes("q", 9, 0, 50);
        let e = verify("p", 3, 2, 1, None, 50, &other).unwrap_err();
        assert!(e.contains("q seq 9 slice 0"), "{e}");
    }
}
