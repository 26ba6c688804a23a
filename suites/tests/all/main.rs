//! The suites' tests that need nothing of the machine (the shipped suites, drivers files and
//! environment catalogue as data), in one test binary so that the crate links them once: one
//! module per topic. The matrix itself, whose cells need root, runc, Docker or the real Codex,
//! is the other binary (`tests/cells.rs`). A test's name now starts with its module
//! (`drivers_file::…`), which substring filters still select.

mod community_drivers_file;
mod drivers_file;
mod environment_expectations;
mod published_drivers_file;
mod real_codex_cells;
mod shipped_commands;
