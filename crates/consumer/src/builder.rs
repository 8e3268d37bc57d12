//! [`ConsumerBuilder`]: who the consumer is, then its settings and where it starts.

use batchweave_store::StreamStore;

use crate::{Consumer, ConsumerError, ConsumerSettings, ConsumerState, RankConfig};

/// Builds a [`Consumer`]: `Consumer::builder(store, rank)`, then optionally
/// [`settings`](Self::settings) and [`state`](Self::state), then [`open`](Self::open).
#[derive(Debug)]
pub struct ConsumerBuilder {
    store: StreamStore,
    rank: RankConfig,
    settings: ConsumerSettings,
    state: Option<ConsumerState>,
}

impl ConsumerBuilder {
    pub(crate) fn new(store: StreamStore, rank: RankConfig) -> Self {
        Self {
            store,
            rank,
            settings: ConsumerSettings::default(),
            state: None,
        }
    }

    /// Replaces the settings.
    pub fn settings(mut self, settings: ConsumerSettings) -> Self {
        self.settings = settings;
        self
    }

    /// Resumes from checkpointed cursor `state` (from [`Consumer::state`]) instead of
    /// starting at consumer step 0: the first [`next`](Consumer::next) returns exactly
    /// consumer step `state.next_step`, converted to this rank's DP degree when the
    /// checkpoint was taken at another one (that must fall on a step boundary). The state
    /// must belong to the rank's consumer group.
    pub fn state(mut self, state: ConsumerState) -> Self {
        self.state = Some(state);
        self
    }

    /// Validates the rank and the settings, registers the group layout
    /// (`watermarks/<group>/_layout`) and reads the manifest to start from: version 0 on,
    /// or the checkpoint's version. A checkpoint whose data was reclaimed is refused with
    /// [`ConsumerError::DataReclaimed`].
    pub async fn open(self) -> Result<Consumer, ConsumerError> {
        Consumer::open_inner(self.store, self.rank, self.settings, self.state).await
    }
}
