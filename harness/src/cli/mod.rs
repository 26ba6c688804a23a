//! One module per `harness` subcommand; each exposes `Args` (clap) and `main`.

pub mod bench;
pub mod coverage;
pub mod drift;
pub mod env;
pub mod fidelity;
pub mod grade;
pub mod launch;
pub mod mutate;
pub mod provision;
pub mod report;
pub mod repro;
pub mod run;
