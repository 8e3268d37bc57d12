//! Exhaustive checks of the topology remap rule: every piece of every TGB in a window is read
//! by exactly one consumer rank at exactly one step.

use std::collections::HashMap;

use batchweave_tgb::{
    Grid, Position, SliceRead, TgbError, convert_step, plan, steps_covered, tgbs_needed_through,
    tgbs_of_step,
};

fn one(tgb: Grid, consumer: Grid, d: u32, c: u32, step: u64) -> SliceRead {
    let reads = plan(tgb, consumer, Position { d, c }, step).unwrap();
    assert_eq!(reads.len(), 1);
    reads[0]
}

/// Key of a unit of data: (tgb, slice id, part index, parts).
type Unit = (u64, u32, u32, u32);

#[test]
fn every_unit_in_a_window_is_read_exactly_once() {
    const WINDOW: u64 = 6;
    let cps = [1u32, 2, 4];
    for dt in 1..=8u32 {
        for dc in 1..=8u32 {
            for &ct in &cps {
                for &cc in &cps {
                    let tgb = Grid::new(dt, ct);
                    let cons = Grid::new(dc, cc);
                    let mut seen: HashMap<Unit, (u64, u32, u32)> = HashMap::new();
                    let steps = WINDOW * u64::from(dt); // more than enough to cover the window
                    for k in 0..steps {
                        let span = tgbs_of_step(tgb, cons, k).unwrap();
                        assert_eq!(*span.end(), tgbs_needed_through(tgb, cons, k).unwrap());
                        let mut touched = Vec::new();
                        for d in 0..dc {
                            for c in 0..cc {
                                let r = one(tgb, cons, d, c, k);
                                assert!(span.contains(&r.tgb_index));
                                touched.push(r.tgb_index);
                                assert!(r.slice_count >= 1);
                                assert!(r.first_slice + r.slice_count <= dt * ct);
                                // A run never crosses a replica boundary.
                                assert_eq!(
                                    r.first_slice / ct,
                                    (r.first_slice + r.slice_count - 1) / ct
                                );
                                if r.tgb_index >= WINDOW {
                                    continue;
                                }
                                for s in r.first_slice..r.first_slice + r.slice_count {
                                    let (pi, pn) = r.part.unwrap_or((0, 1));
                                    assert!(pi < pn);
                                    let prev = seen.insert((r.tgb_index, s, pi, pn), (k, d, c));
                                    assert!(prev.is_none(), "{tgb:?}->{cons:?}: unit read twice");
                                }
                            }
                        }
                        assert!(touched.contains(span.start()) && touched.contains(span.end()));
                    }
                    let parts = if cc > ct { cc / ct } else { 1 };
                    for t in 0..WINDOW {
                        for s in 0..dt * ct {
                            for p in 0..parts {
                                assert!(
                                    seen.contains_key(&(t, s, p, parts)),
                                    "{tgb:?}->{cons:?}: tgb {t} slice {s} part {p} never read"
                                );
                            }
                        }
                    }
                    assert_eq!(seen.len() as u64, WINDOW * u64::from(dt * ct * parts));
                }
            }
        }
    }
}

#[test]
fn steps_covered_matches_tgbs_needed() {
    for dt in 1..=6u32 {
        for dc in 1..=6u32 {
            let (tgb, cons) = (Grid::new(dt, 1), Grid::new(dc, 1));
            for n in 0..10u64 {
                let covered = steps_covered(tgb, cons, n).unwrap();
                for k in 0..covered {
                    assert!(tgbs_needed_through(tgb, cons, k).unwrap() < n);
                }
                assert!(tgbs_needed_through(tgb, cons, covered).unwrap() >= n);
            }
        }
    }
}

#[test]
fn converted_steps_name_the_same_point_of_the_stream() {
    let tgb = Grid::new(4, 1);
    for from in 1..=8u32 {
        for to in 1..=8u32 {
            for k in 0..20u64 {
                match convert_step(k, from, to) {
                    Ok(k2) => {
                        let a = one(tgb, Grid::new(from, 1), 0, 0, k);
                        let b = one(tgb, Grid::new(to, 1), 0, 0, k2);
                        assert_eq!(a, b, "step {k} at DP {from} vs step {k2} at DP {to}");
                    }
                    Err(e) => {
                        assert!(matches!(e, TgbError::StepNotAligned { .. }));
                        assert_ne!((k * u64::from(from)) % u64::from(to), 0);
                    }
                }
            }
        }
    }
}

#[test]
fn identity_grid_reads_own_slice_of_tgb_k() {
    let g = Grid::new(3, 2);
    for k in 0..5 {
        for d in 0..3 {
            for c in 0..2 {
                let r = one(g, g, d, c, k);
                assert_eq!(
                    r,
                    SliceRead {
                        tgb_index: k,
                        first_slice: d * 2 + c,
                        slice_count: 1,
                        part: None
                    }
                );
            }
        }
    }
}

#[test]
fn dp_doubled_reads_two_consecutive_tgbs_per_step() {
    let (tgb, cons) = (Grid::new(2, 1), Grid::new(4, 1));
    let step3: Vec<_> = (0..4)
        .map(|d| one(tgb, cons, d, 0, 3))
        .map(|r| (r.tgb_index, r.first_slice))
        .collect();
    assert_eq!(step3, [(6, 0), (6, 1), (7, 0), (7, 1)]);
    assert_eq!(tgbs_of_step(tgb, cons, 3).unwrap(), 6..=7);
}

#[test]
fn dp_halved_serves_one_tgb_over_two_steps() {
    let (tgb, cons) = (Grid::new(4, 1), Grid::new(2, 1));
    let read = |d, k| {
        let r = one(tgb, cons, d, 0, k);
        (r.tgb_index, r.first_slice)
    };
    assert_eq!([read(0, 6), read(1, 6)], [(3, 0), (3, 1)]);
    assert_eq!([read(0, 7), read(1, 7)], [(3, 2), (3, 3)]);
    assert_eq!(tgbs_needed_through(tgb, cons, 7).unwrap(), 3);
}

#[test]
fn cp_halved_reads_adjacent_chunks_in_one_range() {
    // Stream C=4, consumer C=2: consumer CP rank 1 of replica 1 reads chunks 2, 3 of d=1.
    let r = one(Grid::new(2, 4), Grid::new(2, 2), 1, 1, 5);
    assert_eq!(
        r,
        SliceRead {
            tgb_index: 5,
            first_slice: 4 + 2,
            slice_count: 2,
            part: None
        }
    );
}

#[test]
fn cp_doubled_reads_half_a_chunk() {
    // Stream C=2, consumer C=4: consumer CP ranks 2, 3 split chunk 1.
    let (tgb, cons) = (Grid::new(1, 2), Grid::new(1, 4));
    let r2 = one(tgb, cons, 0, 2, 0);
    let r3 = one(tgb, cons, 0, 3, 0);
    assert_eq!(
        r2,
        SliceRead {
            tgb_index: 0,
            first_slice: 1,
            slice_count: 1,
            part: Some((0, 2))
        }
    );
    assert_eq!(
        r3,
        SliceRead {
            tgb_index: 0,
            first_slice: 1,
            slice_count: 1,
            part: Some((1, 2))
        }
    );
}

#[test]
fn non_integer_cp_ratio_is_an_error() {
    let err = plan(Grid::new(1, 4), Grid::new(1, 3), Position { d: 0, c: 0 }, 0).unwrap_err();
    assert_eq!(
        err,
        TgbError::CpRatio {
            tgb_cp: 4,
            consumer_cp: 3
        }
    );
    assert!(err.to_string().contains("multiple"));
    assert!(tgbs_of_step(Grid::new(1, 2), Grid::new(1, 3), 0).is_err());
}

#[test]
fn dp_ratio_three_to_two() {
    // Stream D=2, consumer D=3: step 1 reads DP-slices 3, 4, 5 = (t1,d1), (t2,d0), (t2,d1).
    let (tgb, cons) = (Grid::new(2, 1), Grid::new(3, 1));
    let got: Vec<_> = (0..3)
        .map(|d| one(tgb, cons, d, 0, 1))
        .map(|r| (r.tgb_index, r.first_slice))
        .collect();
    assert_eq!(got, [(1, 1), (2, 0), (2, 1)]);
    assert_eq!(tgbs_of_step(tgb, cons, 1).unwrap(), 1..=2);
}

#[test]
fn worked_example_of_the_format_doc() {
    // docs/format-tgb.md section 6.4.
    let r = one(Grid::new(4, 2), Grid::new(2, 4), 1, 3, 5);
    assert_eq!(
        r,
        SliceRead {
            tgb_index: 2,
            first_slice: 7,
            slice_count: 1,
            part: Some((1, 2))
        }
    );
    assert_eq!(convert_step(6, 2, 4).unwrap(), 3);
    assert!(convert_step(5, 2, 4).is_err());
}
