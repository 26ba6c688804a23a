//! The run-event contract ([`events`]) and the graders that read a run's events and classify it:
//! [`reader`] streams and validates a JSONL event log, [`signatures`] is the one table of
//! sandbox-launcher failures and filesystem refusals, [`grade`] holds one grader per case and
//! returns a [`verdict::Verdict`] with the evidence that decided it.

pub mod codex_overrides;
pub mod events;
pub mod grade;
pub mod reader;
pub mod signatures;
pub mod verdict;
pub mod wire;
