//! Drivers and what they share: the reference Codex driver ([`reference`]: `harness drive`), the
//! launch policy and launch identity ([`launch`]), the JSON-RPC client over a child's stdio
//! ([`rpc`]), the task envelope and the bounds of a run's waits ([`task`]), what any driver is
//! given for a run ([`run`]), the contract of an external driver's environment and events
//! ([`external`]), and the writer of a run's event stream ([`event_log`]).
//!
//! May use: `sandbox` (a launcher to start the app-server through, `which`), `graders` (the
//! event schema), `fake_app_server` (its transcript format) and third-party crates. Nothing of
//! the harness above it: it knows no cell pipeline, matrix or report.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]

pub mod event_log;
pub mod external;
pub mod launch;
pub mod provenance;
pub mod reference;
pub mod rpc;
pub mod run;
pub mod task;
