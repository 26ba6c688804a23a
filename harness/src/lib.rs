//! The harness: reference driver, launch policy, environments, matrix runner.

pub mod bench;
pub mod cli;
pub mod codex;
pub mod driver;
pub mod env;
pub mod event_log;
pub mod launch;
pub mod launcher;
pub mod matrix;
pub mod report;
pub mod repro;
pub mod rpc;
pub mod tap;
pub mod task;
