//! The cell executor's stages, in the order a cell runs them (`super::cell::run_checked`):
//!
//! 1. [`folders`]: the cell's scratch folders, its task and its scenario;
//! 2. [`app_server`]: the runner's app-server (the fake, or the real Codex with its mock model
//!    API), as a program with its arguments and environment;
//! 3. [`tap`]: the wire tap standing in for `codex`, relaying to that app-server, and the
//!    environment's launcher;
//! 4. [`driver`]: the driver — a declared command (or the example external driver) run through
//!    the launcher, or the reference driver;
//! 5. [`evidence`]: the run's events from the wire (plus the driver's own, when it writes
//!    them), the model log and the workspace evidence;
//! 6. the grade (`graders::grade`).
//!
//! A new driver kind or app-server kind is one more module here, not another branch in a long
//! function.

pub mod app_server;
pub mod driver;
pub mod evidence;
pub mod folders;
pub mod process;
pub mod tap;
