//! Planted bugs for the deterministic simulation (`crates/sim`), which shows that its
//! invariants catch each one. Test-only: nothing in the library sets them.
//!
//! The switches are per thread (the simulation runs each seed on its own current-thread
//! runtime, so parallel test threads do not see each other's plants) and are read when a
//! consumer is built and when it writes a watermark.

use std::cell::Cell;

/// Consumer bugs to plant; all off by default.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PlantedConsumerBugs {
    /// The consumer's follower ignores the GC boundary: it adopts a version whatever the
    /// boundary says (a ghost is taken for live) and takes no step for reclaimed.
    pub skip_boundary: bool,
    /// The consumer's follower adopts a newer version without the extension check.
    pub skip_extension: bool,
    /// Every TP/PP rank of a position writes the position's watermark `d{d}-c{c}` and the
    /// group layout leaves out TP and PP (the rule before per-rank watermarks): the last
    /// writer's mark wins.
    pub shared_rank_mark: bool,
    /// A rank reading a sealed TGB's slot delivers the bytes its seal's length names
    /// without checking the seal (slice id, footer CRC32, padding) or the payload's CRC32.
    pub trust_seals: bool,
}

thread_local! {
    static PLANTED: Cell<PlantedConsumerBugs> = const { Cell::new(PlantedConsumerBugs {
        skip_boundary: false,
        skip_extension: false,
        shared_rank_mark: false,
        trust_seals: false,
    }) };
}

/// Plants `bugs` in consumers built (and watermarks written) on this thread from now on;
/// returns the previous setting, to restore when done.
pub fn plant(bugs: PlantedConsumerBugs) -> PlantedConsumerBugs {
    PLANTED.with(|p| p.replace(bugs))
}

/// The bugs planted on this thread.
pub(crate) fn planted() -> PlantedConsumerBugs {
    PLANTED.with(Cell::get)
}
