//! The `harness` command line, on top of the crates in `harness/crates/`.
//!
//! Owns: the subcommands ([`cli`]); a run as one owned value, its dispatcher — the process's
//! one SIGINT/SIGTERM handler, running the executor to its end or to a stop, its progress as
//! typed events, writing the reports of what finished, the exit code ([`dispatch`]); and the
//! protocol explorer ([`explore`]). The maintainers' other tools (coverage, drift, fidelity,
//! mutate, repro, the benchmarks) are the `maintainer_tools` crate's; its subcommands call them.
//!
//! May use: every crate below it — `maintainer_tools`, `matrix` (the scheduler and the cell
//! pipeline), `report`, `codex`, `driver`, `tap`, `sandbox` — and `suites`, `graders`,
//! `fake_app_server`. Nothing depends on it but its binary (`src/main.rs`) and the tests.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

// The command line is where output is printed.
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub mod cli;
pub mod dispatch;
pub mod explore;
