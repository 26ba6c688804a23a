//! The conformance matrix: which cells run, how one cell runs, and how many at once.
//!
//! Owns: loading the matrix as run ([`load`]: the shipped suites plus a drivers file and more
//! Codex versions, every declared driver's program checked) and the program of a driver's
//! command line ([`program`]: found one way for every check); where evidence goes ([`paths`]) and who may write there ([`out_lock`]);
//! the one context every cell of a process shares ([`context::CellContext`]); the hidden
//! subcommands a harness binary serves ([`hidden`]); one cell ([`cell`]: not applicable,
//! prerequisites ([`prereq`]), its attempts — the pipeline of typed [`stages`], with the
//! helper-pipe-race [`retry`] — and its verdict file); what an attempt holds while it runs
//! ([`guard::CellGuard`]: dropping it is the teardown); the cell's session recorder, the
//! harness's end of the tap ([`recorder`]); whether the model log is the cell's own
//! ([`own_evidence`]); and the scheduler ([`scheduler`],
//! [`concurrency`]).
//!
//! May use: `report` (the outcome, the evidence layout, the verdict file it writes through),
//! `codex`, `driver`, `tap`, `sandbox`, and `suites`, `graders`, `fake_app_server`. Nothing
//! above it: signals, the reports of a run and the exit code are the binary's
//! (`harness::shutdown`).

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod cell;
pub mod concurrency;
pub mod context;
pub mod guard;
pub mod hidden;
pub mod load;
pub mod out_lock;
pub mod own_evidence;
pub mod paths;
pub mod prereq;
pub mod program;
pub mod recorder;
pub mod retry;
pub mod scheduler;
pub mod stages;
