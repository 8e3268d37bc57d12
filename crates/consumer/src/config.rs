//! Consumer configuration: the rank's place in the device mesh and the read settings.

use std::time::Duration;

use batchweave_manifest::{DecodeLimits, validate_producer_id};
use batchweave_tgb::{Grid, MeshConfig, MeshOrder, Position};

use crate::ConsumerError;

/// Largest accepted prefetch depth (steps held in memory ahead of the cursor).
pub const MAX_PREFETCH: usize = 1024;

/// How a consumer reads its slice of a TGB.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ReadMode {
    /// Fetch the footer once per TGB (cached), then exactly the rank's slice run with one
    /// ranged GET. The normal mode.
    #[default]
    Range,
    /// Fetch the whole TGB object and cut the slice out locally: the paper's baseline with
    /// `D * C`-fold read amplification. For benchmarks only.
    Dense,
}

/// Where a training rank sits in the mesh, and how it reads.
///
/// Build it with [`ConsumerConfig::new`] or [`ConsumerConfig::from_env`] and adjust fields
/// with struct update syntax; [`Consumer::open`](crate::Consumer::open) calls
/// [`validate`](Self::validate).
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerConfig {
    /// Global rank, `0 .. world_size`.
    pub rank: u32,
    /// Number of ranks; must equal `dp * cp * tp * pp`.
    pub world_size: u32,
    /// Data-parallel degree of the consumer's mesh.
    pub dp: u32,
    /// Context-parallel degree of the consumer's mesh.
    pub cp: u32,
    /// Tensor-parallel degree (transparent to data).
    pub tp: u32,
    /// Pipeline-parallel degree (transparent to data).
    pub pp: u32,
    /// Mesh order, innermost dimension first (default `tp-cp-dp-pp`).
    pub order: MeshOrder,
    /// `LOCAL_RANK`, informational only.
    pub local_rank: Option<u32>,
    /// Consumer group name (an id: 1-128 characters of `[A-Za-z0-9._-]`).
    pub group: String,
    /// Steps fetched ahead of the cursor in the background (0 = none; at most
    /// [`MAX_PREFETCH`]). Memory is bounded by this many steps of this rank's slices.
    pub prefetch: usize,
    /// Range reads (default) or dense whole-object reads (benchmarks only).
    pub read_mode: ReadMode,
    /// First wait when caught up with the stream.
    pub poll_min: Duration,
    /// Longest wait between two polls; the wait doubles from `poll_min` up to this.
    pub poll_max: Duration,
    /// Token size in bytes when a slice is cut into CP parts (1 = plain bytes).
    pub token_bytes: u32,
    /// Bounds applied to every manifest read.
    pub limits: DecodeLimits,
}

impl ConsumerConfig {
    /// A configuration with the given mesh and defaults for everything else: order
    /// `tp-cp-dp-pp`, prefetch 4, range reads, polling 5 ms .. 500 ms, 1-byte tokens.
    pub fn new(rank: u32, world_size: u32, degrees: [u32; 4], group: &str) -> Self {
        let [dp, cp, tp, pp] = degrees;
        Self {
            rank,
            world_size,
            dp,
            cp,
            tp,
            pp,
            order: MeshOrder::default(),
            local_rank: None,
            group: group.to_owned(),
            prefetch: 4,
            read_mode: ReadMode::Range,
            poll_min: Duration::from_millis(5),
            poll_max: Duration::from_millis(500),
            token_bytes: 1,
            limits: DecodeLimits::default(),
        }
    }

    /// Reads `RANK` and `WORLD_SIZE` (required) and `LOCAL_RANK` (optional, informational)
    /// from the process environment, as `torchrun` sets them, and validates the result.
    pub fn from_env(
        dp: u32,
        cp: u32,
        tp: u32,
        pp: u32,
        group: &str,
    ) -> Result<Self, ConsumerError> {
        Self::from_vars(|name| std::env::var(name).ok(), [dp, cp, tp, pp], group)
    }

    /// Like [`from_env`](Self::from_env), reading variables through `var` (for tests and
    /// launchers that keep the variables elsewhere). `degrees` is `[dp, cp, tp, pp]`.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        degrees: [u32; 4],
        group: &str,
    ) -> Result<Self, ConsumerError> {
        let read = |name: &str, required: bool| -> Result<Option<u32>, ConsumerError> {
            match var(name) {
                None if required => Err(ConsumerError::config(format!(
                    "environment variable {name} is not set; launch with torchrun (which sets \
                     RANK and WORLD_SIZE) or set it explicitly"
                ))),
                None => Ok(None),
                Some(v) => v.trim().parse::<u32>().map(Some).map_err(|_| {
                    ConsumerError::config(format!(
                        "environment variable {name}={v:?} is not a non-negative integer"
                    ))
                }),
            }
        };
        let rank = read("RANK", true)?.unwrap_or_default();
        let world_size = read("WORLD_SIZE", true)?.unwrap_or_default();
        let local_rank = read("LOCAL_RANK", false)?;
        let config = Self {
            local_rank,
            ..Self::new(rank, world_size, degrees, group)
        };
        config.validate()?;
        Ok(config)
    }

    /// The mesh this configuration describes.
    pub fn mesh(&self) -> MeshConfig {
        MeshConfig {
            order: self.order,
            ..MeshConfig::new(self.world_size, self.dp, self.cp, self.tp, self.pp)
        }
    }

    /// The consumer's `(DP, CP)` grid.
    pub fn grid(&self) -> Grid {
        Grid::new(self.dp, self.cp)
    }

    /// This rank's `(d, c)` position.
    pub fn position(&self) -> Result<Position, ConsumerError> {
        self.mesh().position(self.rank).map_err(|e| {
            ConsumerError::config(format!("rank {} has no mesh position: {e}", self.rank))
        })
    }

    /// Checks everything that can be checked without the stream: the mesh (no zero degree,
    /// `WORLD_SIZE == DP * CP * TP * PP`, `RANK < WORLD_SIZE`), the group name, the
    /// prefetch depth, the polling interval and the token size.
    pub fn validate(&self) -> Result<(), ConsumerError> {
        self.mesh().validate().map_err(|e| {
            ConsumerError::config(format!(
                "{e}; set WORLD_SIZE to DP*CP*TP*PP = {}*{}*{}*{} or change the degrees",
                self.dp, self.cp, self.tp, self.pp
            ))
        })?;
        if self.rank >= self.world_size {
            return Err(ConsumerError::config(format!(
                "RANK {} is not below WORLD_SIZE {}",
                self.rank, self.world_size
            )));
        }
        self.position()?;
        validate_producer_id(&self.group)
            .map_err(|e| ConsumerError::config(format!("consumer group: {e}")))?;
        if self.prefetch > MAX_PREFETCH {
            return Err(ConsumerError::config(format!(
                "prefetch {} is above the limit of {MAX_PREFETCH} steps",
                self.prefetch
            )));
        }
        if self.poll_max.is_zero() || self.poll_min > self.poll_max {
            return Err(ConsumerError::config(format!(
                "polling interval {:?}..{:?}: need 0 < poll_max and poll_min <= poll_max",
                self.poll_min, self.poll_max
            )));
        }
        if self.token_bytes == 0 {
            return Err(ConsumerError::config("token_bytes must be at least 1"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn env_gives_rank_and_position() {
        let env = vars(&[("RANK", "6"), ("WORLD_SIZE", "16"), ("LOCAL_RANK", "6")]);
        let c = ConsumerConfig::from_vars(env, [2, 2, 2, 2], "train").unwrap();
        assert_eq!((c.rank, c.world_size, c.local_rank), (6, 16, Some(6)));
        assert_eq!(c.position().unwrap(), Position { d: 1, c: 1 });
    }

    #[test]
    fn world_size_mismatch_says_what_to_fix() {
        let env = vars(&[("RANK", "0"), ("WORLD_SIZE", "12")]);
        let err = ConsumerConfig::from_vars(env, [4, 2, 2, 1], "train").unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, ConsumerError::Config { .. }), "{msg}");
        assert!(
            msg.contains("WORLD_SIZE") && msg.contains("4*2*2*1"),
            "{msg}"
        );
    }

    #[test]
    fn missing_or_bad_rank_is_a_clear_error() {
        let err =
            ConsumerConfig::from_vars(vars(&[("WORLD_SIZE", "4")]), [4, 1, 1, 1], "g").unwrap_err();
        assert!(err.to_string().contains("RANK is not set"), "{err}");
        let env = vars(&[("RANK", "-1"), ("WORLD_SIZE", "4")]);
        let err = ConsumerConfig::from_vars(env, [4, 1, 1, 1], "g").unwrap_err();
        assert!(err.to_string().contains("RANK=\"-1\""), "{err}");
        let env = vars(&[("RANK", "4"), ("WORLD_SIZE", "4")]);
        let err = ConsumerConfig::from_vars(env, [4, 1, 1, 1], "g").unwrap_err();
        assert!(err.to_string().contains("not below WORLD_SIZE"), "{err}");
    }

    #[test]
    fn other_settings_are_validated() {
        let ok = ConsumerConfig::new(0, 1, [1, 1, 1, 1], "g");
        ok.validate().unwrap();
        let bad = [
            ConsumerConfig {
                group: "no/slash".into(),
                ..ok.clone()
            },
            ConsumerConfig {
                prefetch: MAX_PREFETCH + 1,
                ..ok.clone()
            },
            ConsumerConfig {
                poll_min: Duration::from_secs(2),
                poll_max: Duration::from_secs(1),
                ..ok.clone()
            },
            ConsumerConfig {
                token_bytes: 0,
                ..ok.clone()
            },
        ];
        for c in bad {
            assert!(
                matches!(c.validate(), Err(ConsumerError::Config { .. })),
                "{c:?}"
            );
        }
    }
}
