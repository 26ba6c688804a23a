//! The real Codex: provisioning of the pinned versions (and of the published drivers), the mock model API it talks to, and the
//! preparation of a real-Codex runner for one cell.

pub mod driver_packages;
pub mod mock_api;
pub mod provision;
pub mod runner;
