//! Target `mesh_remap`: mesh projection and topology remap on arbitrary numbers.

use batchweave_tgb::{
    Grid, MeshConfig, MeshDim, MeshOrder, Position, convert_step, cut_part, decode_object,
    encode_tgb, part_range, plan, steps_covered, tgbs_needed_through, tgbs_of_step,
};
use bytes::Bytes;

use super::input::Input;

/// Largest TGB grid for which the target encodes a real object and reads the planned range.
const MAX_BUILT_SLICES: u64 = 64;

const DIMS: [&str; 4] = ["tp", "cp", "dp", "pp"];

/// Permutation number `k % 24` of the four dimension names (Lehmer code), as an order string.
fn order_string(k: u8) -> String {
    let mut left: Vec<&str> = DIMS.to_vec();
    let mut k = usize::from(k % 24);
    let mut out = Vec::with_capacity(4);
    for f in [6, 2, 1, 1] {
        out.push(left.remove(k / f));
        k %= f;
    }
    out.join("-")
}

/// Draws a mesh `(world, dp, cp, tp, pp, order)`, a rank, a TGB grid and a step, then:
///
/// * `position`: succeeds exactly for valid meshes and ranks below the world size; the
///   coordinates are below their degrees and recompose to the rank in the mesh order;
/// * `plan`: every read has `slice_count >= 1`, lies inside the TGB's `dp * cp` slices,
///   names a TGB within `tgbs_of_step` / `tgbs_needed_through`, and follows the DP rule
///   (`tgb_index * D_t + replica == step * D_c + d`); a part read is one slice with
///   `index < parts`. For grids of at most 64 slices the read is also performed on a real
///   encoded TGB (`range_of`, `split_run`, `cut_part`).
/// * `convert_step` inverts itself; `part_range` stays inside the slice, token-aligned,
///   and consecutive parts touch; `MeshOrder` parsing roundtrips through `Display`.
pub fn mesh_remap(data: &[u8]) -> bool {
    let mut input = Input::new(data);
    let (dp, cp, tp, pp) = (input.u32(), input.u32(), input.u32(), input.u32());
    let world = if input.bool() {
        dp.checked_mul(cp)
            .and_then(|v| v.checked_mul(tp))
            .and_then(|v| v.checked_mul(pp))
            .unwrap_or(0)
    } else {
        input.u32()
    };
    let sel = input.byte();
    let order_text = if sel < 240 {
        order_string(sel)
    } else {
        let len = usize::from(input.byte() % 24);
        String::from_utf8_lossy(input.bytes(len)).into_owned()
    };
    let order = match order_text.parse::<MeshOrder>() {
        Ok(o) => {
            assert_eq!(o.to_string().parse::<MeshOrder>(), Ok(o), "order roundtrip");
            o
        }
        Err(_) => {
            assert!(sel >= 240, "generated order {order_text:?} rejected");
            MeshOrder::default()
        }
    };
    let mesh = MeshConfig {
        world_size: world,
        dp,
        cp,
        tp,
        pp,
        order,
    };
    let rank = if input.bool() {
        input.u32() % world.max(1)
    } else {
        input.u32()
    };
    check_position(&mesh, rank);

    let tgb = Grid::new(input.u32(), input.u32());
    let step = input.u64();
    let pos = match mesh.position(rank) {
        Ok(p) if input.bool() => p,
        _ => Position {
            d: input.u32(),
            c: input.u32(),
        },
    };
    let planned = check_plan(tgb, mesh.grid(), pos, step, input.byte());

    let (from_dp, to_dp) = (input.u32(), input.u32());
    if let Ok(converted) = convert_step(step, from_dp, to_dp) {
        assert_eq!(
            convert_step(converted, to_dp, from_dp),
            Ok(step),
            "convert_step inverse"
        );
    }
    let _ = steps_covered(tgb, mesh.grid(), input.u64());
    check_part_range(input.u64(), input.u32(), input.u32(), input.u32());
    planned
}

fn check_position(mesh: &MeshConfig, rank: u32) {
    let valid = mesh.validate().is_ok() && rank < mesh.world_size;
    let coords = mesh.coords(rank);
    assert_eq!(
        coords.is_ok(),
        valid,
        "coords accepted an invalid mesh or rank"
    );
    let pos = mesh.position(rank);
    assert_eq!(
        pos.is_ok(),
        valid,
        "position accepted an invalid mesh or rank"
    );
    let (Ok(coords), Ok(pos)) = (coords, pos) else {
        return;
    };
    assert_eq!((pos.c, pos.d), (coords[1], coords[2]));
    let mut stride = 1u64;
    let mut rebuilt = 0u64;
    for dim in mesh.order.dims() {
        let slot = match dim {
            MeshDim::Tp => 0,
            MeshDim::Cp => 1,
            MeshDim::Dp => 2,
            MeshDim::Pp => 3,
        };
        assert!(
            coords[slot] < mesh.degree(dim),
            "coordinate outside its degree"
        );
        rebuilt += u64::from(coords[slot]) * stride;
        stride *= u64::from(mesh.degree(dim));
    }
    assert_eq!(
        rebuilt,
        u64::from(rank),
        "coordinates do not recompose to the rank"
    );
}

/// Returns whether `plan` succeeded.
fn check_plan(tgb: Grid, consumer: Grid, pos: Position, step: u64, seed: u8) -> bool {
    let of_step = tgbs_of_step(tgb, consumer, step);
    let through = tgbs_needed_through(tgb, consumer, step);
    let Ok(reads) = plan(tgb, consumer, pos, step) else {
        return false;
    };
    let of_step = of_step.expect("plan succeeded, tgbs_of_step must too");
    let through = through.expect("plan succeeded, tgbs_needed_through must too");
    assert_eq!(through, *of_step.end());
    assert!(!reads.is_empty(), "plan returned no read");
    let slices = u64::from(tgb.dp) * u64::from(tgb.cp);
    for r in &reads {
        assert!(r.slice_count >= 1, "empty read");
        let end = u64::from(r.first_slice) + u64::from(r.slice_count);
        assert!(
            end <= slices,
            "read {r:?} outside the {}x{} grid",
            tgb.dp,
            tgb.cp
        );
        assert!(
            of_step.contains(&r.tgb_index),
            "read {r:?} outside tgbs_of_step {of_step:?}"
        );
        let replica = u64::from(r.first_slice / tgb.cp);
        assert_eq!(
            u128::from(r.tgb_index) * u128::from(tgb.dp) + u128::from(replica),
            u128::from(step) * u128::from(consumer.dp) + u128::from(pos.d),
            "DP rule broken by {r:?}"
        );
        // The run stays inside one replica.
        assert_eq!(
            replica,
            u64::from((end - 1) as u32 / tgb.cp),
            "read {r:?} spans replicas"
        );
        if let Some((index, parts)) = r.part {
            assert_eq!(r.slice_count, 1);
            assert!(
                index < parts && parts == consumer.cp / tgb.cp,
                "bad part {r:?}"
            );
        }
        if slices <= MAX_BUILT_SLICES {
            read_built(tgb, r.first_slice, r.slice_count, r.part, seed);
        }
    }
    true
}

/// Encodes a real TGB of grid `tgb` and performs one planned read on it.
fn read_built(tgb: Grid, first: u32, count: u32, part: Option<(u32, u32)>, seed: u8) {
    let n = tgb.dp * tgb.cp;
    let slices: Vec<Bytes> = (0..n)
        .map(|i| Bytes::from(vec![i as u8; (i as usize * 7 + usize::from(seed)) % 23]))
        .collect();
    let object = encode_tgb(tgb.dp, tgb.cp, slices.clone())
        .expect("small grid encodes")
        .to_bytes();
    let index = decode_object(&object).expect("fresh TGB decodes");
    let range = index.range_of(first, count).expect("planned run exists");
    let bytes = object.slice(range.start as usize..range.end as usize);
    let got = index
        .split_run(first, count, &bytes)
        .expect("planned run verifies");
    assert_eq!(got, slices[first as usize..(first + count) as usize]);
    if let Some((i, parts)) = part {
        let cut = cut_part(&got[0], i, parts, 1).expect("part of a verified slice");
        assert!(cut.len() <= got[0].len());
    }
}

fn check_part_range(len: u64, index: u32, parts: u32, token_bytes: u32) {
    let Ok(r) = part_range(len, index, parts, token_bytes) else {
        return;
    };
    let tb = u64::from(token_bytes);
    assert!(
        r.start <= r.end && r.end <= len,
        "part {r:?} outside 0..{len}"
    );
    assert!(
        r.start % tb == 0 && r.end % tb == 0,
        "part {r:?} not token-aligned"
    );
    if index + 1 == parts {
        assert_eq!(r.end, len, "last part must reach the end");
    } else {
        let next = part_range(len, index + 1, parts, token_bytes).expect("next part");
        assert_eq!(next.start, r.end, "parts do not touch");
    }
}
