//! A real Codex app-server in an environment, for the environment tests: per-test folders and
//! a planning run's thread/start through the environment's launcher.

use driver::launch::{self, profiles::HostPaths, LaunchRequest};
use libtest_mimic::Failed;
use maintainer_tools::repro::session::Session;
use sandbox::environment;
use sandbox::launcher::{EnvMounts, ProcessSpec};
use std::path::PathBuf;

/// The app-server's PATH unless a test says otherwise.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// A launcher of `environment` for the pinned Codex in `cell`: the cell's folder writable, the
/// package read-only, its bundled bubblewrap declared.
pub fn codex_launcher(
    environment: &str,
    cell: &CodexCell,
    codex: &codex::provision::CodexInstall,
) -> Result<std::sync::Arc<dyn sandbox::launcher::Launcher>, Failed> {
    Ok(environment::launcher(
        environment,
        &EnvMounts {
            scratch: cell.root.clone(),
            writable: Vec::new(),
            readonly: vec![codex.package_dir.clone()],
            bundled_bwraps: vec![codex.bundled_bwrap()],
        },
    )?)
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Profile (a) of the facts doc: workspace read, root none, network off.
pub const FACTS_PROFILE: &str = "lab-restricted-ro";

/// Per-test folders: workspace (with AGENTS.md and .git), HOME, CODEX_HOME, TMPDIR (not a parent
/// of CODEX_HOME). The launcher hands them to the container's uid.
pub struct CodexCell {
    _dir: tempfile::TempDir,
    pub root: PathBuf,
    pub workspace: PathBuf,
    pub env: Vec<(String, String)>,
}

impl Drop for CodexCell {
    fn drop(&mut self) {
        // Codex's helpers can outlive it on the host (see `sandbox::reap`).
        sandbox::reap::after_cell(None, &self.root);
    }
}

pub fn codex_cell(path: &str) -> Result<CodexCell, Failed> {
    let dir = tempfile::Builder::new().prefix("ccf-test-").tempdir()?;
    let root = dir.path().to_path_buf();
    let workspace = root.join("workspace");
    let home = root.join("home");
    let codex_home = root.join("codex-home");
    let tmp = root.join("tmp");
    for folder in [&workspace, &home, &codex_home, &tmp] {
        std::fs::create_dir_all(folder)?;
    }
    std::fs::create_dir_all(workspace.join(".git"))?;
    std::fs::write(
        workspace.join("AGENTS.md"),
        "# Project agents\nAlways be terse.\n",
    )?;
    let env = vec![
        ("PATH".to_string(), path.to_string()),
        ("HOME".to_string(), home.display().to_string()),
        ("CODEX_HOME".to_string(), codex_home.display().to_string()),
        ("TMPDIR".to_string(), tmp.display().to_string()),
    ];
    Ok(CodexCell {
        _dir: dir,
        root,
        workspace,
        env,
    })
}

/// thread/start of a planning run in an external sandbox under `policy`, in `environment`.
pub fn codex_thread_start(
    environment: &str,
    policy: launch::PolicyGeneration,
) -> Result<Result<serde_json::Value, driver::rpc::RpcError>, Failed> {
    codex_thread_start_with(environment, policy, false, DEFAULT_PATH)
}

/// [`codex_thread_start`], with the facts doc's profile (a) when `facts_profile`, and `path` as
/// the app-server's PATH (where Codex looks for the system bubblewrap).
pub fn codex_thread_start_with(
    environment: &str,
    policy: launch::PolicyGeneration,
    facts_profile: bool,
    path: &str,
) -> Result<Result<serde_json::Value, driver::rpc::RpcError>, Failed> {
    let codex = codex::provision::resolve(codex::provision::PINNED)?;
    let cell = codex_cell(path)?;
    let request = LaunchRequest {
        mode: launch::Mode::Planning,
        target: launch::Target::ExternalSandbox,
        network_enabled: true,
        policy,
        workspace: cell.workspace.clone(),
    };
    let mut plan = launch::plan_with(
        &request,
        &HostPaths::from_env_pairs(&cell.env, Some(&codex.binary)),
    );
    if facts_profile {
        plan.argv = vec![
            "-c".into(),
            format!("default_permissions=\"{FACTS_PROFILE}\""),
            "-c".into(),
            format!("permissions.{FACTS_PROFILE}={{filesystem={{\":root\"=\"none\",\":workspace_roots\"={{\".\"=\"read\"}}}},network={{enabled=false}}}}"),
        ];
        plan.thread_params =
            serde_json::json!({"cwd": cell.workspace, "permissions": FACTS_PROFILE});
    }
    let launcher = codex_launcher(environment, &cell, &codex)?;
    let process = ProcessSpec {
        program: codex.binary.clone(),
        args: std::iter::once("app-server".to_string())
            .chain(plan.argv.iter().cloned())
            .collect(),
        env: cell.env.clone(),
        cwd: cell.workspace.clone(),
    };
    let stderr_log = cell.root.join("stderr.log");
    runtime()
        .block_on(async {
            let mut session = Session::start(launcher.as_ref(), &process, &stderr_log).await?;
            let answer = session
                .request("thread/start", plan.thread_params.clone())
                .await?;
            session.close().await;
            Ok::<_, anyhow::Error>(answer)
        })
        .map_err(|err| Failed::from(format!("{err:#}")))
}

/// When bubblewrap dies at once, Codex sometimes writes the helper's request into the closed
/// pipe first and reports `Broken pipe (os error 32)` instead of bubblewrap's message (seen
/// once in userns-blocked). That race is Codex's; a fresh app-server gets another try.
pub const HELPER_PIPE_RACE: &str =
    "failed to load AGENTS.md instructions for environment `local`: Broken pipe (os error 32)";
pub const PIPE_RACE_ATTEMPTS: usize = 3;
