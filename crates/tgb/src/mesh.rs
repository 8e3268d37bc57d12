//! Mesh projection: which `(d, c)` slice a global rank reads.
//!
//! A rank is decomposed into the four mesh coordinates in mixed radix, innermost (fastest
//! varying) dimension first. With the default order `tp-cp-dp-pp` (Megatron-style):
//!
//! ```text
//! tp = rank % TP
//! cp = (rank / TP) % CP
//! dp = (rank / (TP*CP)) % DP
//! pp = rank / (TP*CP*DP)
//! ```
//!
//! TP and PP are transparent to data: every rank of one TP/PP group gets the same `(d, c)`.

use std::fmt;
use std::str::FromStr;

use crate::TgbError;

/// One of the four mesh dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MeshDim {
    /// Tensor parallel.
    Tp,
    /// Context parallel.
    Cp,
    /// Data parallel.
    Dp,
    /// Pipeline parallel.
    Pp,
}

impl MeshDim {
    /// Lower-case name used in order strings.
    pub fn name(self) -> &'static str {
        match self {
            MeshDim::Tp => "tp",
            MeshDim::Cp => "cp",
            MeshDim::Dp => "dp",
            MeshDim::Pp => "pp",
        }
    }
}

/// Order of the mesh dimensions, innermost (fastest varying in the rank) first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MeshOrder([MeshDim; 4]);

impl MeshOrder {
    /// The dimensions, innermost first.
    pub fn dims(&self) -> [MeshDim; 4] {
        self.0
    }
}

impl Default for MeshOrder {
    /// `tp-cp-dp-pp`.
    fn default() -> Self {
        MeshOrder([MeshDim::Tp, MeshDim::Cp, MeshDim::Dp, MeshDim::Pp])
    }
}

impl fmt::Display for MeshOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [a, b, c, d] = self.0.map(MeshDim::name);
        write!(f, "{a}-{b}-{c}-{d}")
    }
}

impl FromStr for MeshOrder {
    type Err = TgbError;

    /// Parses e.g. `"tp-cp-dp-pp"` (case-insensitive, surrounding blanks ignored).
    fn from_str(s: &str) -> Result<Self, TgbError> {
        let err = |reason: String| TgbError::MeshOrder {
            input: s.to_owned(),
            reason,
        };
        let mut dims = [MeshDim::Tp; 4];
        let mut count = 0usize;
        for part in s.trim().split('-') {
            let dim = match part.trim().to_ascii_lowercase().as_str() {
                "tp" => MeshDim::Tp,
                "cp" => MeshDim::Cp,
                "dp" => MeshDim::Dp,
                "pp" => MeshDim::Pp,
                other => return Err(err(format!("unknown dimension {other:?}"))),
            };
            if dims[..count.min(4)].contains(&dim) {
                return Err(err(format!("{} appears twice", dim.name())));
            }
            match dims.get_mut(count) {
                Some(slot) => *slot = dim,
                None => return Err(err("more than four dimensions".to_owned())),
            }
            count += 1;
        }
        if count != 4 {
            return Err(err(format!("{count} dimensions given")));
        }
        Ok(MeshOrder(dims))
    }
}

/// `(d, c)`: the DP replica and CP rank whose slice a rank reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Position {
    /// DP replica index.
    pub d: u32,
    /// CP rank index.
    pub c: u32,
}

/// The training job's device mesh.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MeshConfig {
    /// Total number of ranks.
    pub world_size: u32,
    /// Data-parallel degree.
    pub dp: u32,
    /// Context-parallel degree.
    pub cp: u32,
    /// Tensor-parallel degree.
    pub tp: u32,
    /// Pipeline-parallel degree.
    pub pp: u32,
    /// Dimension order, innermost first.
    pub order: MeshOrder,
}

impl MeshConfig {
    /// A mesh with the default order `tp-cp-dp-pp`.
    pub fn new(world_size: u32, dp: u32, cp: u32, tp: u32, pp: u32) -> Self {
        MeshConfig {
            world_size,
            dp,
            cp,
            tp,
            pp,
            order: MeshOrder::default(),
        }
    }

    /// Checks that no degree is zero and that their product is the world size.
    pub fn validate(&self) -> Result<(), TgbError> {
        for dim in [MeshDim::Dp, MeshDim::Cp, MeshDim::Tp, MeshDim::Pp] {
            if self.degree(dim) == 0 {
                return Err(TgbError::MeshZeroDegree { dim: dim.name() });
            }
        }
        let product: u128 = [self.dp, self.cp, self.tp, self.pp]
            .iter()
            .map(|&v| u128::from(v))
            .product();
        if u128::from(self.world_size) != product {
            return Err(TgbError::MeshWorldSize {
                world_size: self.world_size,
                dp: self.dp,
                cp: self.cp,
                tp: self.tp,
                pp: self.pp,
                product,
            });
        }
        Ok(())
    }

    /// Degree of one dimension.
    pub fn degree(&self, dim: MeshDim) -> u32 {
        match dim {
            MeshDim::Tp => self.tp,
            MeshDim::Cp => self.cp,
            MeshDim::Dp => self.dp,
            MeshDim::Pp => self.pp,
        }
    }

    /// The `(DP, CP)` grid this mesh consumes.
    pub fn grid(&self) -> crate::Grid {
        crate::Grid {
            dp: self.dp,
            cp: self.cp,
        }
    }

    /// Coordinate of `rank` along each dimension, as `[tp, cp, dp, pp]`.
    pub fn coords(&self, rank: u32) -> Result<[u32; 4], TgbError> {
        self.validate()?;
        if rank >= self.world_size {
            return Err(TgbError::RankOutOfRange {
                rank,
                world_size: self.world_size,
            });
        }
        let mut rest = rank;
        let mut out = [0u32; 4];
        for dim in self.order.0 {
            // validate() guarantees every degree is >= 1.
            let size = self.degree(dim).max(1);
            let slot = match dim {
                MeshDim::Tp => 0,
                MeshDim::Cp => 1,
                MeshDim::Dp => 2,
                MeshDim::Pp => 3,
            };
            if let Some(v) = out.get_mut(slot) {
                *v = rest % size;
            }
            rest /= size;
        }
        Ok(out)
    }

    /// The `(d, c)` position of `rank`. Ranks of one TP/PP group share it.
    pub fn position(&self, rank: u32) -> Result<Position, TgbError> {
        let [_, c, d, _] = self.coords(rank)?;
        Ok(Position { d, c })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn order_parses_and_round_trips() {
        let o: MeshOrder = "TP-cp-dp-pp".parse().unwrap();
        assert_eq!(o, MeshOrder::default());
        let o: MeshOrder = " dp - tp-pp-cp ".parse().unwrap();
        assert_eq!(
            o.dims(),
            [MeshDim::Dp, MeshDim::Tp, MeshDim::Pp, MeshDim::Cp]
        );
        assert_eq!(o.to_string(), "dp-tp-pp-cp");
        for bad in [
            "",
            "tp-cp-dp",
            "tp-cp-dp-pp-tp",
            "tp-tp-dp-pp",
            "tp-cp-dp-ep",
            "tp,cp,dp,pp",
        ] {
            assert!(
                matches!(bad.parse::<MeshOrder>(), Err(TgbError::MeshOrder { .. })),
                "{bad}"
            );
        }
    }

    #[test]
    fn paper_example_16_gpus() {
        // D=2, C=2, TP=2, PP=2: 16 ranks, 4 distinct slices, 4 ranks each.
        let m = MeshConfig::new(16, 2, 2, 2, 2);
        let pos: Vec<_> = (0..16).map(|r| m.position(r).unwrap()).collect();
        // tp innermost: ranks 0,1 share (0,0); cp next: ranks 2,3 are (0,1); dp: 4..8 are d=1.
        assert_eq!(pos[0], Position { d: 0, c: 0 });
        assert_eq!(pos[1], Position { d: 0, c: 0 });
        assert_eq!(pos[2], Position { d: 0, c: 1 });
        assert_eq!(pos[4], Position { d: 1, c: 0 });
        assert_eq!(pos[7], Position { d: 1, c: 1 });
        assert_eq!(pos[8], pos[0]); // pp outermost
        assert_eq!(pos[15], Position { d: 1, c: 1 });
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let m = MeshConfig::new(8, 2, 2, 2, 2);
        let e = m.position(0).unwrap_err();
        assert!(matches!(e, TgbError::MeshWorldSize { product: 16, .. }));
        assert!(e.to_string().contains("product is the world size"));
        let m = MeshConfig::new(8, 2, 0, 2, 2);
        assert_eq!(
            m.position(0).unwrap_err(),
            TgbError::MeshZeroDegree { dim: "cp" }
        );
        let m = MeshConfig::new(8, 2, 2, 2, 1);
        assert_eq!(
            m.position(8).unwrap_err(),
            TgbError::RankOutOfRange {
                rank: 8,
                world_size: 8
            }
        );
        let big = MeshConfig {
            world_size: u32::MAX,
            dp: u32::MAX,
            cp: u32::MAX,
            tp: u32::MAX,
            pp: u32::MAX,
            order: MeshOrder::default(),
        };
        assert!(matches!(
            big.validate(),
            Err(TgbError::MeshWorldSize { .. })
        ));
    }
}
