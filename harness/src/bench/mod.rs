//! Benchmarks behind `harness bench`: one module per subject.
