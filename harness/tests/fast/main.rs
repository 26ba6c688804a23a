//! The `harness` crate's standard tests (`#[test]`), in one binary: the command line, the
//! reference driver against the fake, the tap, the reports. One binary links once and runs its
//! tests in one process, where each file was a binary that linked on its own and ran after the
//! last (issue 40).
//!
//! Each former test file is a module here, so a test keeps its function name and gains the
//! module as prefix (`cargo test -p harness --test fast -- run_cli::`). The tests that need
//! root, runc, Docker, bubblewrap or the real Codex are trials of the other binary,
//! `needs_root_runc_codex` (a missing prerequisite: ignored, or a failure under `CI=true`);
//! that includes the root tests of driver_uid, input_checks and shutdown_cli.
//!
//! The tests share one process: none sets an environment variable or the working folder, so
//! one file's tests cannot change what another's see.

// Each module uses its own part of the shared helpers.
#[allow(dead_code)]
#[path = "../common/mod.rs"]
mod common;

mod bench_gate;
mod codex_mock_api;
mod coverage_cli;
mod declared_driver;
mod driver_control;
mod driver_fake;
mod external_driver;
mod file_length;
mod function_length;
mod grade_cli;
mod input_checks;
mod launch_cli;
mod launch_policy;
mod layers;
mod module_cycles;
mod mutate_cli;
mod out_lock;
mod pipeline_ownership;
mod placeholder_quoting;
mod report_attack;
mod report_cli;
mod retries_cli;
mod rpc_client;
mod run_cli;
mod runner_contract;
mod shutdown_cli;
mod tap;
