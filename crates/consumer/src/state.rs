//! Checkpoint state (the cursor) and the group layout object.

use batchweave_manifest::validate_producer_id;
use serde::{Deserialize, Serialize};

use crate::ConsumerError;

/// Format marker written into every serialized [`ConsumerState`].
pub const STATE_FORMAT: &str = "batchweave-consumer-state/1";

/// Largest accepted serialized state, in bytes.
pub const MAX_STATE_BYTES: usize = 4096;

/// The consumer cursor: what a training job saves with its checkpoint and gives back to
/// [`ConsumerBuilder::state`](crate::ConsumerBuilder::state) to resume.
///
/// `next_step` is the consumer step the next [`Consumer::next`](crate::Consumer::next)
/// returns, counted at degree `dp`; `version` is the manifest version the last batch was
/// read from (a hint for where to resume polling, never needed for correctness: a step's
/// TGBs never change once visible).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ConsumerState {
    /// Manifest version of the cursor.
    pub version: u64,
    /// Next consumer step to deliver.
    pub next_step: u64,
    /// Consumer DP degree the step is counted in.
    pub dp: u32,
    /// Consumer CP degree.
    pub cp: u32,
    /// Consumer group.
    pub group: String,
}

#[derive(Serialize)]
struct StateOut<'a> {
    format: &'static str,
    #[serde(flatten)]
    state: &'a ConsumerState,
}

#[derive(Deserialize)]
struct StateIn {
    format: String,
    #[serde(flatten)]
    state: ConsumerState,
}

impl ConsumerState {
    /// JSON with a format marker, e.g.
    /// `{"format":"batchweave-consumer-state/1","version":7,"next_step":12,"dp":4,"cp":2,"group":"train"}`.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(&StateOut {
            format: STATE_FORMAT,
            state: self,
        })
        // Serializing plain integers and a string into a Vec cannot fail.
        .unwrap_or_default()
    }

    /// Parses [`to_bytes`](Self::to_bytes) output, refusing anything larger than
    /// [`MAX_STATE_BYTES`], without the format marker, or with an invalid group or grid.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, ConsumerError> {
        if bytes.len() > MAX_STATE_BYTES {
            return Err(ConsumerError::state(format!(
                "{} bytes is more than the {MAX_STATE_BYTES} a consumer state can have",
                bytes.len()
            )));
        }
        let parsed: StateIn = serde_json::from_slice(bytes).map_err(|e| {
            ConsumerError::state(format!("not a consumer state ({STATE_FORMAT} JSON): {e}"))
        })?;
        if parsed.format != STATE_FORMAT {
            return Err(ConsumerError::state(format!(
                "format {:?} is not {STATE_FORMAT:?}",
                parsed.format
            )));
        }
        parsed.state.check()?;
        Ok(parsed.state)
    }

    pub(crate) fn check(&self) -> Result<(), ConsumerError> {
        validate_producer_id(&self.group)
            .map_err(|e| ConsumerError::state(format!("group: {e}")))?;
        if self.dp == 0 || self.cp == 0 {
            return Err(ConsumerError::state(format!(
                "grid dp={} cp={} has a zero degree",
                self.dp, self.cp
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ConsumerState {
        ConsumerState {
            version: 7,
            next_step: 12,
            dp: 4,
            cp: 2,
            group: "train".into(),
        }
    }

    #[test]
    fn state_roundtrips_with_a_format_marker() {
        let s = sample();
        let bytes = s.to_bytes();
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.contains(STATE_FORMAT), "{text}");
        assert_eq!(ConsumerState::from_bytes(&bytes).unwrap(), s);
    }

    #[test]
    fn garbage_state_is_a_clear_error() {
        let cases: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"\xff\x00garbage".to_vec(),
            br#"{"version":1,"next_step":2,"dp":1,"cp":1,"group":"g"}"#.to_vec(),
            br#"{"format":"other/1","version":1,"next_step":2,"dp":1,"cp":1,"group":"g"}"#
                .to_vec(),
            br#"{"format":"batchweave-consumer-state/1","version":1,"next_step":2,"dp":0,"cp":1,"group":"g"}"#.to_vec(),
            br#"{"format":"batchweave-consumer-state/1","version":1,"next_step":2,"dp":1,"cp":1,"group":"../x"}"#.to_vec(),
            vec![b' '; MAX_STATE_BYTES + 1],
        ];
        for c in cases {
            let err = ConsumerState::from_bytes(&c).unwrap_err();
            assert!(matches!(err, ConsumerError::State { .. }), "{err}");
        }
    }
}
