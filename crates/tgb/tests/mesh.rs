//! Exhaustive mesh-projection checks over small meshes and every dimension order.

use std::collections::BTreeMap;

use batchweave_tgb::{MeshConfig, MeshDim, MeshOrder, Position};

fn all_orders() -> Vec<MeshOrder> {
    let names = ["tp", "cp", "dp", "pp"];
    let mut out = Vec::new();
    for a in 0..4 {
        for b in 0..4 {
            for c in 0..4 {
                for d in 0..4 {
                    let idx = [a, b, c, d];
                    let mut seen = idx.to_vec();
                    seen.sort_unstable();
                    seen.dedup();
                    if seen.len() == 4 {
                        let s = idx.map(|i| names[i]).join("-");
                        out.push(s.parse().unwrap());
                    }
                }
            }
        }
    }
    out
}

#[test]
fn every_position_is_covered_by_exactly_tp_times_pp_ranks() {
    let orders = all_orders();
    assert_eq!(orders.len(), 24);
    for order in orders {
        for dp in 1..=3 {
            for cp in 1..=3 {
                for tp in 1..=3 {
                    for pp in 1..=2 {
                        let world = dp * cp * tp * pp;
                        let m = MeshConfig {
                            world_size: world,
                            dp,
                            cp,
                            tp,
                            pp,
                            order,
                        };
                        let mut count: BTreeMap<Position, u32> = BTreeMap::new();
                        let mut groups: BTreeMap<(u32, u32), Position> = BTreeMap::new();
                        let mut coords_seen = std::collections::BTreeSet::new();
                        for rank in 0..world {
                            let p = m.position(rank).unwrap();
                            assert!(p.d < dp && p.c < cp);
                            *count.entry(p).or_default() += 1;
                            let [t, c, d, pi] = m.coords(rank).unwrap();
                            assert_eq!((d, c), (p.d, p.c));
                            assert!(coords_seen.insert([t, c, d, pi]), "coords repeat");
                            // Same (d, c) for every TP/PP member of one DP/CP group.
                            let prev = groups.insert((d, c), p);
                            assert!(prev.is_none_or(|q| q == p));
                        }
                        assert_eq!(count.len() as u32, dp * cp, "{m:?}");
                        assert!(count.values().all(|&n| n == tp * pp), "{m:?}");
                        assert!(m.position(world).is_err());
                    }
                }
            }
        }
    }
}

#[test]
fn innermost_dimension_varies_fastest() {
    let m = MeshConfig {
        order: "dp-tp-cp-pp".parse().unwrap(),
        ..MeshConfig::new(24, 2, 3, 2, 2)
    };
    assert_eq!(m.order.dims()[0], MeshDim::Dp);
    assert_eq!(m.position(0).unwrap(), Position { d: 0, c: 0 });
    assert_eq!(m.position(1).unwrap(), Position { d: 1, c: 0 });
    assert_eq!(m.position(2).unwrap(), Position { d: 0, c: 0 }); // tp = 1
    assert_eq!(m.position(4).unwrap(), Position { d: 0, c: 1 });
    assert_eq!(m.position(12).unwrap(), Position { d: 0, c: 0 }); // pp = 1
    assert_eq!(m.coords(23).unwrap(), [1, 2, 1, 1]);
}
