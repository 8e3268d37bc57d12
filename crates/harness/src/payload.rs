//! Synthetic, deterministic payloads: every byte of slice `s` of the TGB
//! with sequence `q` of producer `p` is a function of `(p, q, s)`, so any
//! consumer can verify every byte it reads without talking to the producer.

use bytes::Bytes;

fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The bytes of slice `slice` of TGB `sequence` of `producer`, `len` long.
pub fn slice_bytes(producer: &str, sequence: u64, slice: u32, len: usize) -> Bytes {
    let mut state = fnv1a(producer)
        ^ sequence.wrapping_mul(0xa076_1d64_78bd_642f)
        ^ u64::from(slice).wrapping_mul(0xe703_7ed1_a0b4_28db);
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        out.extend_from_slice(&splitmix(&mut state).to_le_bytes());
    }
    out.truncate(len);
    Bytes::from(out)
}

/// All `dp * cp` slices of one TGB.
pub fn tgb_slices(producer: &str, sequence: u64, dp: u32, cp: u32, len: usize) -> Vec<Bytes> {
    (0..dp * cp)
        .map(|s| slice_bytes(producer, sequence, s, len))
        .collect()
}

/// Checks one read of a batch (its source and bytes) against the payload
/// it must be; the error names the key and the slices.
pub fn verify_read(
    src: &batchweave::consumer::BatchSource,
    slice_len: usize,
    data: &[u8],
) -> Result<(), String> {
    verify(
        &src.producer_id,
        src.sequence,
        src.first_slice,
        src.slice_count,
        src.part,
        slice_len,
        data,
    )
    .map_err(|e| {
        format!(
            "key {}, slices {}..{}: {e}",
            src.key,
            src.first_slice,
            src.first_slice + src.slice_count
        )
    })
}

/// Checks one delivered read against the payload it must be. `part` is the
/// CP-split part (index, of parts) when the consumer remaps CP upwards.
pub fn verify(
    producer: &str,
    sequence: u64,
    first_slice: u32,
    slice_count: u32,
    part: Option<(u32, u32)>,
    slice_len: usize,
    got: &[u8],
) -> Result<(), String> {
    let mut expected = Vec::with_capacity(slice_len * slice_count as usize);
    for s in first_slice..first_slice + slice_count {
        expected.extend_from_slice(&slice_bytes(producer, sequence, s, slice_len));
    }
    let expected = match part {
        Some((i, n)) => {
            batchweave::tgb::cut_part(&Bytes::from(expected), i, n, 1).map_err(|e| e.to_string())?
        }
        None => Bytes::from(expected),
    };
    if expected.as_ref() == got {
        Ok(())
    } else {
        Err(format!(
            "payload mismatch: {producer} seq {sequence} slices {first_slice}..{}: expected {} bytes (crc {:08x}), got {} bytes (crc {:08x})",
            first_slice + slice_count,
            expected.len(),
            crc32fast::hash(&expected),
            got.len(),
            crc32fast::hash(got)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deterministic_and_distinct() {
        assert_eq!(slice_bytes("p", 1, 0, 100), slice_bytes("p", 1, 0, 100));
        assert_ne!(slice_bytes("p", 1, 0, 100), slice_bytes("p", 2, 0, 100));
        assert_ne!(slice_bytes("p", 1, 0, 100), slice_bytes("p", 1, 1, 100));
        assert_ne!(slice_bytes("p", 1, 0, 100), slice_bytes("q", 1, 0, 100));
        let two: Vec<u8> = [slice_bytes("p", 3, 2, 50), slice_bytes("p", 3, 3, 50)].concat();
        assert!(verify("p", 3, 2, 2, None, 50, &two).is_ok());
        let mut bad = two.clone();
        bad[77] ^= 1;
        assert!(verify("p", 3, 2, 2, None, 50, &bad).is_err());
    }
}
