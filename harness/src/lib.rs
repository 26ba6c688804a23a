//! The harness: reference driver, launch policy, environments, matrix runner.

pub mod event_log;
pub mod launcher;
