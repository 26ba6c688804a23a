//! The harness: reference driver, launch policy, environments, matrix runner.

pub mod bench;
pub mod cli;
pub mod codex;
pub mod event_log;
pub mod launcher;
