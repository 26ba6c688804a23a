//! The `harness` command line, on top of the crates in `harness/crates/`.
//!
//! Owns: the subcommands ([`cli`]); a run as one owned value, its dispatcher — the process's
//! one SIGINT/SIGTERM handler, running the executor to its end or to a stop, its progress as
//! typed events, writing the reports of what finished, the exit code ([`dispatch`]); and the
//! tools built on the matrix: protocol coverage of a release by the protocol profile, and of a
//! run by each declared driver ([`coverage`]), protocol drift between Codex versions
//! ([`drift`]), differential fidelity of the fake against the real Codex ([`fidelity`]),
//! reproducing a sandbox failure ([`repro`]), the power of the cells over a
//! driver's bugs ([`mutate`]) and the benchmarks ([`bench`]).
//!
//! May use: every crate below it — `matrix` (the scheduler and the cell pipeline), `report`,
//! `codex`, `driver`, `tap`, `sandbox` — and `suites`, `graders`, `fake_app_server`. Nothing
//! depends on it but its binary (`src/main.rs`) and the tests.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod bench;
// The command line is where output is printed.
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod cli;
pub mod coverage;
pub mod dispatch;
pub mod drift;
pub mod explore;
pub mod fidelity;
pub mod mutate;
pub mod repro;
