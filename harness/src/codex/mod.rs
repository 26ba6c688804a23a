//! The real Codex: provisioning of the pinned versions, the mock model API it talks to, and the
//! preparation of a real-Codex runner for one cell.

pub mod fidelity;
pub mod mock_api;
pub mod provision;
pub mod runner;
