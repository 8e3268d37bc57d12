//! State shared between the producer handle and its committer task: the
//! statistics, the first fatal error, and the single worker's lock.

use std::sync::{Arc, Mutex};

use crate::ProducerError;
use crate::stats::ProducerStats;

pub(crate) struct Shared {
    pub(crate) stats: Mutex<ProducerStats>,
    pub(crate) fatal: Mutex<Option<Arc<ProducerError>>>,
    /// The one worker of [`ProducerSettings::single_worker`](crate::ProducerSettings::single_worker): held by an
    /// upload, or by the committer across back-to-back attempts.
    pub(crate) worker: Arc<tokio::sync::Mutex<()>>,
}

impl Shared {
    pub(crate) fn stats_mut<R>(&self, f: impl FnOnce(&mut ProducerStats) -> R) -> R {
        let mut g = self.stats.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    pub(crate) fn fatal(&self) -> Option<Arc<ProducerError>> {
        self.fatal.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn set_fatal(&self, e: ProducerError) -> Arc<ProducerError> {
        let e = Arc::new(e);
        let mut g = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        g.get_or_insert_with(|| e.clone()).clone()
    }
}
