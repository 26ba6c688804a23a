//! The run-event contract ([`events`]) and the graders that read a run's events and classify it:
//! [`reader`] streams and validates a JSONL event log, [`signatures`] is the one table of
//! sandbox-launcher failures and filesystem refusals, [`tool_call`] decodes what a model tool
//! call asks for, [`protocol`] holds each Codex release's protocol as data (its server requests,
//! notifications and answer schemas), [`wire`] turns a transcript into events, and [`grade`]
//! holds one grader per case and returns a [`verdict::Verdict`] with the evidence that decided
//! it. [`evidence_file`] is how every reader of a cell's evidence opens a file: bounded, regular
//! files only. [`codex_overrides`] reads Codex's `-c key=value` overrides as Codex does.

// Library code prints nothing: it returns values, or emits a `tracing` notice the command line
// shows (`harness::cli::notices`). Unit tests may print.
#![cfg_attr(not(test), deny(clippy::print_stdout, clippy::print_stderr))]
#![deny(unreachable_pub)]

pub mod codex_overrides;
pub mod events;
pub mod evidence_file;
mod excerpt;
pub mod grade;
pub mod protocol;
pub mod reader;
mod shell;
pub mod signatures;
pub mod tool_call;
pub mod verdict;
pub mod wire;
