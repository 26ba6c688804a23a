//! The real Codex: provisioning of the pinned versions and (later) the mock model API.

pub mod provision;
