//! Drivers and what they share. Its API (every other item is `pub(crate)`): the reference
//! Codex driver ([`reference`]: `harness drive`, its config and entry points), the launch policy
//! and launch identity ([`launch`]), the JSON-RPC client over a child's stdio ([`rpc`]), the
//! task envelope ([`task`]), the time bounds of a run and its waits, in one place
//! ([`bounds`]), what any driver is given for a run ([`run`]), the contract of an external
//! driver's environment and events ([`external`]), the writer of a run's event stream
//! ([`event_log`]) and the harness's mark on it ([`provenance`]). Inside: the reference driver's
//! session, turn, recovery and tool answers; the launch identity and tools; the client's
//! transcript.
//!
//! May use: `sandbox` (a launcher to start the app-server through, `which`), `graders` (the
//! event schema), `fake_app_server` (its transcript format) and third-party crates. Nothing of
//! the harness above it: it knows no cell pipeline, matrix or report.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
// An item is `pub` only when another crate uses it (issue 40): one inside a private module that
// no path from this crate's root reaches is `pub(crate)`.
#![deny(unreachable_pub)]

pub mod bounds;
pub mod event_log;
pub mod external;
pub mod launch;
pub mod provenance;
pub mod reference;
pub mod rpc;
pub mod run;
pub mod task;
