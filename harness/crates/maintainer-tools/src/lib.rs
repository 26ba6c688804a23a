//! The maintainers' tools, built on the matrix; the `harness` command line calls them.
//!
//! Owns: protocol coverage of a release by the protocol profile, and of a run by each declared
//! driver ([`coverage`]), protocol drift between Codex versions ([`drift`]), differential
//! fidelity of the fake against the real Codex ([`fidelity`]), reproducing a sandbox failure
//! ([`repro`]), the power of the cells over a driver's bugs ([`mutate`]) and the benchmarks
//! ([`bench`]). An item is `pub` only when `harness` or a test binary uses it, every other one
//! `pub(crate)` (held by `unreachable_pub`).
//!
//! May use: `matrix` (the scheduler and the cell pipeline), `codex`, `driver`, `report`, `tap`,
//! `sandbox`, `suites`, `graders`, `fake_app_server`. Only `harness` (its command line and its
//! protocol explorer) and the test binaries depend on it.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![deny(unreachable_pub)]

pub mod bench;
pub mod coverage;
pub mod drift;
pub mod fidelity;
pub mod mutate;
pub mod repro;
