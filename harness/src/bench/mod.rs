//! Benchmarks behind `harness bench`: one module per subject.

pub mod fake;
pub mod gate;
pub mod graders;
pub mod matrix;
pub mod tap;
