//! Helpers shared by several integration tests (each test crate includes this with `mod common;`).

pub mod codex_schema;
pub mod driver_copies;
pub mod fake_driver;
pub mod fidelity;
pub mod mutate;
pub mod prereq;
pub mod procs;
pub mod tapped;
