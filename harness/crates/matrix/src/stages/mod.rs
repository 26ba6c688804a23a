//! One attempt of a cell, as a pipeline of typed stages, in the order `crate::cell` runs them.
//! Each stage is a function of the cell's context ([`crate::context::CellContext`]), the cell,
//! and what earlier stages handed on, returning its own output; what a stage starts that must
//! end with the cell (the mock model API, the cgroup, the launchers) it returns beside its
//! output, and `crate::cell` hands it to the cell's guard ([`crate::guard::CellGuard`]): no
//! stage holds the guard.
//!
//! ```text
//!  1. folders     Folders     the evidence folder, workspace/ home/ tmp/, the task, the scenario
//!  2. app_server  AppServer   the fake or the real Codex (+ mock model API), and its mounts
//!     home        PlantedHome canary files in the app-server's HOME, when the case asks
//!     driver      Driver      which driver, its mounts, its tap, its launch (task written whole)
//!  3. sandbox     Sandbox     probe, mounts merged, cgroup, launchers, the recorder, bubblewrap
//!  4. driver      DriverRun   the driver's process through the launcher, to its end
//!  5. events      WireEvents  the wire's events (+ the driver's own)
//!     (the guard's finish: the launcher goes, the mock stops, what is left running is killed)
//!                 EventLog    + the harness's evidence (what it killed, model.*, …), run.ended
//!  6. verdict     Verdict     the suite's grader
//! ```
//!
//! A new driver kind or app-server kind is one more branch in its stage, not another branch in a
//! long function.

pub mod app_server;
pub(crate) mod canaries;
pub(crate) mod control;
pub mod driver;
pub mod events;
pub mod folders;
pub(crate) mod home_canaries;
pub(crate) mod proc_tree;
pub(crate) mod process;
pub(crate) mod sandbox;
pub(crate) mod verdict;
