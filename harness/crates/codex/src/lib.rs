//! The real Codex.
//!
//! Its API (every other item is `pub(crate)`): installing and resolving the pinned Codex
//! versions ([`provision`]) and the published drivers' packages ([`driver_packages`]), the mock
//! model API the real Codex talks to instead of a model ([`mock_api`]: the server, its script
//! and what it recorded), and a real-Codex app-server prepared for one cell: its folders, its
//! allowlisted environment and its mock ([`runner`]). Inside: how the mock reads its position
//! in a conversation, writes its event streams and answers tools.
//!
//! May use: `driver` (the app-server program and the bounds of a run), `sandbox` (an
//! environment's container user, `which`, the bounded wait), `report` (the evidence layout its
//! logs go into), `fake_app_server` (the scenario format the mock plays), `suites` and
//! third-party crates. Not the matrix: a cell's pipeline calls [`runner::prepare`]. The
//! differential fidelity of the fake against the real Codex is a tool of the `harness` crate.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
// An item is `pub` only when another crate uses it (issue 40): one inside a private module that
// no path from this crate's root reaches is `pub(crate)`.
#![deny(unreachable_pub)]

pub mod driver_packages;
mod mcp_server;
pub mod mock_api;
pub mod provision;
pub mod runner;
