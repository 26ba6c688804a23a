//! The harness: reference driver, launch policy, environments, matrix runner.

pub mod bench;
pub mod cli;
pub mod codex;
pub mod drift;
pub mod driver;
pub mod fidelity;
pub mod matrix;
pub mod report;
pub mod repro;
pub mod sandbox;
pub mod shutdown;
pub mod tap;
