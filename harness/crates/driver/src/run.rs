//! What a driver is given for one run, whichever driver it is: the cell, the task and the bounds
//! of its waits, the launch request, and the app-server to launch (as the driver sees it: for a
//! cell, the tap standing in for `codex`).

use crate::bounds::Timeouts;
use crate::launch::LaunchRequest;
use crate::task::Task;
use graders::events::CellId;
use std::path::PathBuf;

/// The app-server program: what to execute, independent of the launch policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppServerProgram {
    pub program: PathBuf,
    /// Before the policy's arguments, e.g. `["fake-app-server", "app-server"]` or `["app-server"]`.
    pub leading_args: Vec<String>,
    /// After the policy's `-c` arguments, e.g. the model provider configuration.
    pub extra_args: Vec<String>,
    /// The complete, allowlisted environment.
    pub env: Vec<(String, String)>,
}

/// One run, as a driver is told it (the task envelope and the environment of
/// docs/driver-contract.md).
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub cell: CellId,
    pub task: Task,
    pub timeouts: Timeouts,
    /// The launch: mode, target, network, policy and the workspace (the app-server's folder).
    pub launch: LaunchRequest,
    pub app_server: AppServerProgram,
}
