//! The scenario format (documented in `docs/scenarios.md`): how the fake server answers each
//! method, which faults it injects, the environment facts of the simulated sandbox, and the model
//! script of each turn.

pub mod model;
