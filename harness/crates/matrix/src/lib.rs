//! The conformance matrix: which cells run, how one cell runs, and how many at once.
//!
//! Its API (every other item is `pub(crate)`): loading the matrix as run ([`load`]: the shipped
//! suites plus a drivers file and more Codex versions, every declared driver's program checked);
//! where evidence goes ([`paths`]) and who may write there ([`out_lock::OutLock`]); the one
//! context every cell of a process shares ([`context::CellContext`]) and the mutation it may
//! run every cell's driver under ([`mutation::Mutation`]: the one place of the matrix that
//! knows `harness mutate`'s operators); the hidden subcommands a harness binary serves
//! ([`hidden`]); one cell ([`cell::run_cell`]: not applicable,
//! prerequisites ([`prereq`]), its attempts and its verdict file); the executor of a run
//! ([`scheduler`]: a batch of cells run to the end or a stop, typed events as they go;
//! [`concurrency::Concurrency`]); and, for the maintainer tools that run part of
//! a cell (`harness bench gate`, `repro`), the stages they call ([`stages`]) and the guard that
//! tears down what they started ([`guard::CellGuard`]).
//!
//! Inside: the pipeline of typed stages, the helper-pipe-race retry (`retry`), a failed
//! cell's runs again (`attempts`: `harness run --retries`, [`scheduler::Batch::retries`]), the program of a
//! driver's command line (`program`: found one way for every check), the cell's session
//! recorder, the harness's end of the tap (`recorder`), and whether the model log is the cell's
//! own (`own_evidence`).
//!
//! May use: `report` (the outcome, the evidence layout, the verdict file it writes through),
//! `codex`, `driver`, `tap`, `sandbox`, and `suites`, `graders`, `fake_app_server`. Nothing
//! above it: signals, progress, the reports of a run and the exit code are its dispatcher's
//! (`harness::dispatch`).

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
// An item is `pub` only when another crate uses it (issue 40): one inside a private module that
// no path from this crate's root reaches is `pub(crate)`.
#![deny(unreachable_pub)]

mod attempts;
pub mod cell;
pub mod concurrency;
pub mod context;
pub mod guard;
pub mod hidden;
pub mod load;
pub mod mutation;
pub mod out_lock;
mod own_evidence;
pub mod paths;
pub mod prereq;
mod program;
mod recorder;
mod retry;
pub mod scheduler;
pub mod stages;
