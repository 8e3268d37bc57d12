//! A consumer's identity: the rank, its place in the training job's device mesh and its
//! consumer group. The tunables are in [`ConsumerSettings`](crate::ConsumerSettings).

use batchweave_manifest::validate_producer_id;
use batchweave_tgb::{Grid, MeshConfig, Position};

use crate::ConsumerError;

/// Who a consumer is: a training rank of a device mesh, in a consumer group.
///
/// Build it with [`RankConfig::new`] or, under `torchrun`, [`RankConfig::from_env`];
/// adjust fields (e.g. `mesh.order`) with struct update syntax. How the consumer reads
/// is set apart, in [`ConsumerSettings`](crate::ConsumerSettings).
/// [`ConsumerBuilder::open`](crate::ConsumerBuilder::open) calls
/// [`validate`](Self::validate).
#[derive(Debug, Clone, PartialEq)]
pub struct RankConfig {
    /// Global rank, `0 .. mesh.world_size`.
    pub rank: u32,
    /// `LOCAL_RANK`, informational only.
    pub local_rank: Option<u32>,
    /// Consumer group name (an id: 1-128 characters of `[A-Za-z0-9._-]`).
    pub group: String,
    /// The training job's mesh: world size (must equal `dp * cp * tp * pp`), degrees and
    /// order (innermost dimension first, default `tp-cp-dp-pp`).
    pub mesh: MeshConfig,
}

impl RankConfig {
    /// Rank `rank` of `mesh` in consumer group `group`.
    pub fn new(rank: u32, mesh: MeshConfig, group: impl Into<String>) -> Self {
        Self {
            rank,
            local_rank: None,
            group: group.into(),
            mesh,
        }
    }

    /// Reads `RANK` and `WORLD_SIZE` (required) and `LOCAL_RANK` (optional, informational)
    /// from the process environment, as `torchrun` sets them, and validates the result.
    /// `degrees` is `[dp, cp, tp, pp]`; the mesh order is the default `tp-cp-dp-pp`.
    pub fn from_env(degrees: [u32; 4], group: impl Into<String>) -> Result<Self, ConsumerError> {
        Self::from_vars(|name| std::env::var(name).ok(), degrees, group)
    }

    /// Like [`from_env`](Self::from_env), reading variables through `var` (for tests and
    /// launchers that keep the variables elsewhere). `degrees` is `[dp, cp, tp, pp]`.
    pub fn from_vars(
        var: impl Fn(&str) -> Option<String>,
        degrees: [u32; 4],
        group: impl Into<String>,
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
        let [dp, cp, tp, pp] = degrees;
        let config = Self {
            local_rank,
            ..Self::new(rank, MeshConfig::new(world_size, dp, cp, tp, pp), group)
        };
        config.validate()?;
        Ok(config)
    }

    /// The consumer's `(DP, CP)` grid.
    pub fn grid(&self) -> Grid {
        self.mesh.grid()
    }

    /// This rank's `(d, c)` position.
    pub fn position(&self) -> Result<Position, ConsumerError> {
        self.mesh.position(self.rank).map_err(|e| {
            ConsumerError::config(format!("rank {} has no mesh position: {e}", self.rank))
        })
    }

    /// Checks everything that can be checked without the stream: the mesh (no zero degree,
    /// `WORLD_SIZE == DP * CP * TP * PP`, `RANK < WORLD_SIZE`) and the group name.
    pub fn validate(&self) -> Result<(), ConsumerError> {
        let m = &self.mesh;
        m.validate().map_err(|e| {
            ConsumerError::config(format!(
                "{e}; set WORLD_SIZE to DP*CP*TP*PP = {}*{}*{}*{} or change the degrees",
                m.dp, m.cp, m.tp, m.pp
            ))
        })?;
        if self.rank >= m.world_size {
            return Err(ConsumerError::config(format!(
                "RANK {} is not below WORLD_SIZE {}",
                self.rank, m.world_size
            )));
        }
        self.position()?;
        validate_producer_id(&self.group)
            .map_err(|e| ConsumerError::config(format!("consumer group: {e}")))?;
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
        let c = RankConfig::from_vars(env, [2, 2, 2, 2], "train").unwrap();
        assert_eq!((c.rank, c.mesh.world_size, c.local_rank), (6, 16, Some(6)));
        assert_eq!(c.mesh, MeshConfig::new(16, 2, 2, 2, 2));
        assert_eq!(c.position().unwrap(), Position { d: 1, c: 1 });
    }

    #[test]
    fn world_size_mismatch_says_what_to_fix() {
        let env = vars(&[("RANK", "0"), ("WORLD_SIZE", "12")]);
        let err = RankConfig::from_vars(env, [4, 2, 2, 1], "train").unwrap_err();
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
            RankConfig::from_vars(vars(&[("WORLD_SIZE", "4")]), [4, 1, 1, 1], "g").unwrap_err();
        assert!(err.to_string().contains("RANK is not set"), "{err}");
        let env = vars(&[("RANK", "-1"), ("WORLD_SIZE", "4")]);
        let err = RankConfig::from_vars(env, [4, 1, 1, 1], "g").unwrap_err();
        assert!(err.to_string().contains("RANK=\"-1\""), "{err}");
        let env = vars(&[("RANK", "4"), ("WORLD_SIZE", "4")]);
        let err = RankConfig::from_vars(env, [4, 1, 1, 1], "g").unwrap_err();
        assert!(err.to_string().contains("not below WORLD_SIZE"), "{err}");
    }

    #[test]
    fn group_and_mesh_are_validated() {
        let ok = RankConfig::new(0, MeshConfig::new(1, 1, 1, 1, 1), "g");
        ok.validate().unwrap();
        let bad = [
            RankConfig {
                group: "no/slash".into(),
                ..ok.clone()
            },
            RankConfig {
                mesh: MeshConfig::new(2, 1, 1, 1, 1),
                ..ok.clone()
            },
            RankConfig {
                mesh: MeshConfig::new(0, 0, 1, 1, 1),
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
