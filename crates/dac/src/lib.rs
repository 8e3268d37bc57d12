//! Commit cadence for BatchWeave producers: the Decentralized Adaptive Commit (DAC) gap of
//! the Lakestream paper (section 5.2, Algorithm 1) and the paper's baseline policies.
//!
//! This crate is pure math: no I/O, no clock, no RNG. Elapsed time comes in as
//! [`Duration`](std::time::Duration) arguments and randomness as a uniform draw `u` in
//! `[0, 1)` from the caller's seeded RNG, so every decision is reproducible.
//!
//! # Model
//!
//! After every commit attempt, success or conflict, a producer waits a gap `T` before the
//! next one. An attempt's *fragile window* `tau` runs from reading the base manifest version
//! to the end of the conditional create; another producer committing that version inside it
//! makes the attempt fail. Modelling the other `N - 1` producers' attempt starts as Poisson
//! processes of rate `1 / (T + tau)`:
//!
//! ```text
//! p_conflict(T) = 1 - exp(-(N - 1) tau / (T + tau))          (eq. 2)  conflict probability
//! d(T)          = tau / (T + tau)                            (eq. 3)  share of time on manifest I/O
//! ```
//!
//! Both fall as `T` grows. DAC picks the smallest `T` keeping both within budgets `epsilon`
//! and `delta`:
//!
//! ```text
//! T_conf = max(0, (N - 1) tau / -ln(1 - epsilon) - tau)      (eq. 7)
//! T_cost = (1 - delta) tau / delta                           (eq. 8)
//! T*     = max(T_conf, T_cost)                               (eq. 9)
//! gap    = T* (1 + rho u),  u ~ Uniform[0, 1)                (eq. 10) desynchronises producers
//! ```
//!
//! The free functions [`p_conflict`], [`duty`], [`t_conf`], [`t_cost`], [`optimal_gap`] and
//! [`jittered_gap`] implement these on `f64` seconds. They accept any input (NaN, infinities,
//! negatives, `N` of 0 or 1, budgets outside `(0, 1)`) and always return a finite value
//! `>= 0`; gaps are capped at [`MAX_GAP`] (60 s) so a wild estimate never stalls a producer.
//! The exact rules are under [Sanitising rules](#sanitising-rules).
//!
//! # Control law ([`Dac`])
//!
//! The gap starts at 0. After each attempt the observed fragile window is folded into an
//! exponential moving average `tau_hat <- (1 - alpha) tau_hat + alpha tau_obs` ([`Ema`], eq. 6;
//! the first observation initialises it), `N` is taken from the manifest's per-producer state
//! map, and the gap becomes `T*(N, tau_hat) (1 + rho u)`. The producer attempts when at least
//! one TGB is pending and the gap has elapsed since the previous attempt ended. Because
//! `tau_hat` grows with manifest size and store latency, the gap widens by itself as commits
//! get more expensive.
//!
//! One deviation from Algorithm 1: the gap after the *first* attempt (the producer's epoch
//! claim) is a uniform phase `T* u` instead of `T* (1 + rho u)`. Producers launched together
//! would otherwise attempt at about the same multiples of `T*` for a long time (the `rho`
//! jitter drifts them apart only slowly), which both breaks equation 2's independence
//! assumption and delivers commits in bursts.
//!
//! # Baselines
//!
//! * [`Naive`] (`naive`): commit every TGB at once.
//! * [`Fixed`] (`fixed:K`): commit once `K` TGBs are pending (the paper's FIXED10, FIXED100).
//! * [`Incr`] (`incr`): like `fixed`, but the threshold starts at 10 and grows by one on each
//!   conflict.
//! * [`Aimd`] (`aimd`): attempt rate `r` starts at 10/s, `+1/s` on success, halved on conflict;
//!   wait `1 / r` between attempts.
//!
//! # Cooperative commits
//!
//! [`Coop`] (`coop`) is the cadence of cooperative commits, where a committer also
//! publishes the uploads of other producers: each of `N` active producers attempts every
//! `N R` (or DAC's gap when that is shorter), so the stream attempts about once per round
//! `R` (1 s, or four fragile windows if longer) and a TGB becomes visible in about a round,
//! whatever `N` (see its module).
//!
//! All implement [`CommitPolicy`]; [`PolicyKind`] parses the CLI strings and builds them.
//!
//! # Sanitising rules
//!
//! Every function accepts any `f64`/`usize` and returns a finite value `>= 0`:
//!
//! * **Times** (`t`, `tau`, `t_star`): NaN and values `<= 0` count as `0`; `+inf` and
//!   anything above [`MAX_TIME_SECS`] count as [`MAX_TIME_SECS`].
//! * **Producer count** `n`: `0` and `1` mean "nobody to conflict with", so the conflict
//!   probability and [`t_conf`] are `0`.
//! * **Budgets** `epsilon` and `delta`: `>= 1` (including `+inf`) means the budget never binds
//!   (its bound is `0`); NaN or `<= 0` means "nothing allowed", the most conservative reading,
//!   so its bound is [`MAX_GAP_SECS`] whenever there is something to budget (`tau > 0`, and for
//!   `epsilon` also `n >= 2`).
//! * **Jitter** `rho`: NaN or negative counts as `0`, above [`MAX_RHO`] as [`MAX_RHO`];
//!   the uniform draw `u` is clamped into `[0, 1]`, NaN counting as `0`.
//! * **Gaps** ([`t_conf`], [`t_cost`], [`jittered_gap`]) are capped at [`MAX_GAP_SECS`], and
//!   [`optimal_gap`] and [`jittered_gap_within`] at their cap ([`DacParams::max_gap_secs`],
//!   60 s by default; NaN or `<= 0` reads as [`MAX_GAP_SECS`], anything above
//!   [`MAX_TIME_SECS`] as that maximum), so a wild estimate of `tau` can never stall a
//!   producer for longer.
//!
//! # Example
//!
//! ```
//! use std::time::Duration;
//! use batchweave_dac::{AttemptOutcome, Decision, PolicyKind};
//!
//! let kind: PolicyKind = "dac".parse()?;
//! let mut policy = kind.build();
//! assert_eq!(policy.decide(Duration::ZERO, 0), Decision::NeedMoreData);
//! assert_eq!(policy.decide(Duration::ZERO, 1), Decision::CommitNow);
//!
//! // Four attempts among 16 producers with a fragile window that grows from 20 to 80 ms.
//! let mut last = Duration::ZERO;
//! for (ms, u) in [(20, 0.3), (40, 0.9), (60, 0.1), (80, 0.5)] {
//!     let outcome = AttemptOutcome {
//!         success: ms != 40,
//!         fragile_window: Duration::from_millis(ms),
//!         producers: 16,
//!         slot: None,
//!     };
//!     policy.on_attempt(&outcome, u);
//!     println!("{}: tau_hat {:?}, gap {:?}", policy.name(), policy.tau_estimate(), policy.gap());
//!     assert!(policy.gap() > last);
//!     last = policy.gap();
//! }
//! assert!(matches!(policy.decide(Duration::ZERO, 3), Decision::WaitFor(_)));
//! # Ok::<(), batchweave_dac::DacError>(())
//! ```

mod baselines;
mod coop;
mod error;
mod kind;
mod model;
mod params;
mod policy;

pub use baselines::{
    AIMD_INCREASE, AIMD_INITIAL_RATE, AIMD_MAX_RATE, AIMD_MIN_RATE, Aimd, Fixed, INCR_START, Incr,
    Naive,
};
pub use coop::{Coop, CoopParams, MAX_COOP_GAP};
pub use error::DacError;
pub use kind::PolicyKind;
pub use model::{
    MAX_GAP, MAX_GAP_SECS, MAX_RHO, MAX_TIME_SECS, duty, jittered_gap, jittered_gap_within,
    optimal_gap, p_conflict, t_conf, t_cost,
};
pub use params::{DEFAULT_ALPHA, DEFAULT_DELTA, DEFAULT_EPSILON, DEFAULT_RHO, DacParams, Ema};
pub use policy::{AttemptOutcome, CommitPolicy, Dac, Decision, Slot};
