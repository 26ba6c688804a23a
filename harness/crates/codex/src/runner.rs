//! Preparing a real-Codex runner for one cell: the pinned binary (provisioned on first use), a
//! throwaway HOME / CODEX_HOME / TMPDIR, an allowlisted environment, and a mock model API
//! playing the cell's scenario, wired in as a custom model provider.
//!
//! Layout under the cell's folder (`CellDirs::root`):
//! `codex/home/` (HOME), `codex/home/.codex/` (CODEX_HOME, Codex's default place) and
//! `codex/tmp/` (TMPDIR):
//! * TMPDIR is never a parent of CODEX_HOME: Codex refuses to create its sandbox helper alias
//!   under a temporary folder that contains CODEX_HOME;
//! * CODEX_HOME inside HOME is the layout the fake runner's cells have (`home/.codex`), so the
//!   launch policy builds the same profiles for both runners (it adds no explicit HOME deny
//!   when HOME holds CODEX_HOME: `":root"="none"` already denies both, and an explicit deny
//!   over CODEX_HOME would hide Codex's sandbox helper).
//!
//! Plus `model-log.jsonl` and `model-requests.jsonl`.

use super::mock_api::{MockConfig, MockModelApi, MockScript};
use super::provision::{self, CodexInstall};
use anyhow::{Context, Result};
use driver::bounds::Timeouts;
use driver::run::AppServerProgram;
use fake_app_server::scenario::model::{ModelStep, ModelTurn};
use fake_app_server::scenario::{Scenario, TransportPlay, MAX_STREAM_DROPS};
use report::layout::CellEvidence;
use std::path::{Path, PathBuf};

/// `PATH` of the app-server: system folders only.
pub(crate) const APP_SERVER_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
/// The provider id and model name configured into Codex. The model is one of the catalogue
/// every pinned release bundles (`codex debug models --bundled`: 0.160, 0.169 and 0.171 all
/// list `gpt-5.5`), so Codex treats the mock as it treats a real model: it offers `apply_patch`
/// (only catalogue models get it; measured) and sends no `Model metadata … not found` warning.
/// The fake gets the same arguments, and its persona's catalogue lists the model too.
pub const PROVIDER_ID: &str = "mock";
pub const MODEL: &str = "gpt-5.5";

/// Where a cell's Codex files go, and who must own them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CellDirs {
    /// The cell's evidence folder (e.g. `target/conformance/<cell>/`).
    pub root: PathBuf,
    /// uid/gid the app-server runs as, when not the harness's own (e.g. `daytona-uidmap` runs
    /// it as 1000): HOME, CODEX_HOME and TMPDIR are handed to that owner.
    pub owner: Option<(u32, u32)>,
}

impl CellDirs {
    pub fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            owner: None,
        }
    }

    /// The owner an environment's container runs the app-server as (`None` for root / host).
    pub fn owned_for_environment(root: &Path, environment: &str) -> Result<Self> {
        Ok(Self {
            root: root.to_path_buf(),
            owner: sandbox::catalogue::spec(environment)?.container_user(),
        })
    }
}

/// A real Codex ready to be launched by a driver.
pub struct PreparedCodex {
    pub install: CodexInstall,
    pub app_server: AppServerProgram,
    pub mock: MockModelApi,
    pub home: PathBuf,
    pub codex_home: PathBuf,
    pub tmpdir: PathBuf,
    /// `ModelLogEntry` JSONL: every tool call the mock made and every output it got back.
    pub model_log: PathBuf,
    /// Every request the mock received (headers + body), JSONL.
    pub request_log: PathBuf,
}

impl PreparedCodex {
    /// Folders a container must bind read-write (same path inside).
    pub fn writable_mounts(&self) -> Vec<PathBuf> {
        vec![
            self.home.clone(),
            self.codex_home.clone(),
            self.tmpdir.clone(),
        ]
    }

    /// Folders a container must bind read-only: the Codex package (binary and its bubblewrap).
    pub fn readonly_mounts(&self) -> Vec<PathBuf> {
        let prefix = self
            .install
            .package_dir
            .ancestors()
            .find(|dir| dir.file_name().is_some_and(|n| n == "node_modules"))
            .and_then(Path::parent)
            .unwrap_or(&self.install.package_dir);
        vec![prefix.to_path_buf()]
    }

    /// The driver's waits against the real Codex ([`driver::bounds::REAL_CODEX_WAITS`]).
    pub fn timeouts() -> Timeouts {
        driver::bounds::REAL_CODEX_WAITS
    }
}

/// Prepare `version` of Codex for one cell playing `scenario`'s model script.
pub async fn prepare(version: &str, dirs: &CellDirs, scenario: &Scenario) -> Result<PreparedCodex> {
    let script = MockScript::from_scenario(scenario)?;
    prepare_playing(version, dirs, script, scenario).await
}

/// Like [`prepare`], for a Codex whose wire goes through the harness's tap (a cell's): with the
/// scenario's method behaviours the tap must play by timing the wire
/// ([`MockScript::from_scenario_tapped`]).
pub async fn prepare_tapped(
    version: &str,
    dirs: &CellDirs,
    scenario: &Scenario,
) -> Result<(PreparedCodex, Vec<TransportPlay>)> {
    let (script, plays) = MockScript::from_scenario_tapped(scenario)?;
    Ok((
        prepare_playing(version, dirs, script, scenario).await?,
        plays,
    ))
}

/// [`prepare_script`] for `scenario`: its `app_server_log` becomes Codex's `RUST_LOG`, its own
/// log on stderr.
async fn prepare_playing(
    version: &str,
    dirs: &CellDirs,
    script: MockScript,
    scenario: &Scenario,
) -> Result<PreparedCodex> {
    let mut prepared = prepare_script(version, dirs, script).await?;
    if let Some(level) = &scenario.app_server_log {
        prepared
            .app_server
            .env
            .push(("RUST_LOG".into(), level.clone()));
    }
    Ok(prepared)
}

/// Like [`prepare`], with an explicit mock script.
pub(crate) async fn prepare_script(
    version: &str,
    dirs: &CellDirs,
    script: MockScript,
) -> Result<PreparedCodex> {
    let wanted = version.to_string();
    // Provisioning may run npm (bounded inside `ensure`); keep it off the async workers.
    let install = tokio::task::spawn_blocking(move || provision::ensure(&wanted))
        .await
        .context("provisioning task")??;
    let evidence = CellEvidence::new(&dirs.root);
    let codex_dir = evidence.codex();
    let home = codex_dir.join("home");
    let codex_home = home.join(".codex");
    let tmpdir = codex_dir.join("tmp");
    for dir in [&home, &codex_home, &tmpdir] {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Some((uid, gid)) = dirs.owner {
        for dir in [&codex_dir, &home, &codex_home, &tmpdir] {
            std::os::unix::fs::chown(dir, Some(uid), Some(gid))
                .with_context(|| format!("handing {} to uid {uid}", dir.display()))?;
        }
    }
    let model_log = evidence.model_log();
    let request_log = evidence.model_requests();
    let script_features = features_for(&script.turns);
    let mcp_args = if super::mcp_server::needed(&script.turns) {
        super::mcp_server::install(&codex_home, dirs.owner)?
    } else {
        Vec::new()
    };
    let stream_retries = if script.drops_streams() {
        MAX_STREAM_DROPS
    } else {
        0
    };
    let mock = MockModelApi::start_with(MockConfig {
        script,
        model_log: model_log.clone(),
        request_log: Some(request_log.clone()),
    })
    .await?;
    let mut extra_args = provider_args_retrying(&mock.base_url(), stream_retries);
    extra_args.extend(feature_args(&script_features));
    extra_args.extend(mcp_args);
    let app_server = AppServerProgram {
        program: install.binary.clone(),
        leading_args: vec!["app-server".into()],
        extra_args,
        env: allowlisted_env(&home, &codex_home, &tmpdir),
    };
    Ok(PreparedCodex {
        install,
        app_server,
        mock,
        home,
        codex_home,
        tmpdir,
        model_log,
        request_log,
    })
}

/// The `-c` arguments that point Codex at the mock. No retries: a failure the mock scripts must
/// reach the driver as it is, and no `env_key`, so Codex sends no credentials at all.
pub fn provider_args(base_url: &str) -> Vec<String> {
    provider_args_retrying(base_url, 0)
}

/// [`provider_args`] with `stream_retries` stream retries: a script that cuts a stream for
/// Codex to retry gets Codex's own default.
pub fn provider_args_retrying(base_url: &str, stream_retries: u32) -> Vec<String> {
    let quoted = |s: &str| toml::Value::String(s.into()).to_string();
    vec![
        "-c".into(),
        format!("model_provider={}", quoted(PROVIDER_ID)),
        "-c".into(),
        format!("model={}", quoted(MODEL)),
        "-c".into(),
        format!(
            "model_providers.{PROVIDER_ID}={{name={},base_url={},wire_api=\"responses\",request_max_retries=0,stream_max_retries={stream_retries}}}",
            quoted(PROVIDER_ID),
            quoted(base_url)
        ),
    ]
}

/// The Codex features a model script needs that are off by default: `request_permissions_tool`
/// for a model that calls `request_permissions` (the tool is under development in 0.169 and
/// offered only with the feature; measured with 0.160, 0.169 and 0.171), `multi_agent_v2` for
/// one that calls `spawn_agent` (stable but off in 0.169; the default `multi_agent` offers no
/// sub-agent tool to a catalogue model; measured with 0.160, 0.169 and 0.171). The fake playing the
/// same scenario gets them too (the matrix's app-server stage), so both start alike: Codex warns
/// about an under-development feature on a thread's first turn.
pub fn features_for(model_script: &[ModelTurn]) -> Vec<&'static str> {
    use fake_app_server::scenario::codex_tools::{REQUEST_PERMISSIONS, SPAWN_AGENT};
    let calls = |tool: &str| {
        model_script
            .iter()
            .flat_map(|turn| &turn.steps)
            .any(|step| matches!(step, ModelStep::ToolCall { name, .. } if name == tool))
    };
    let mut features = Vec::new();
    if calls(REQUEST_PERMISSIONS) {
        features.push("request_permissions_tool");
    }
    if calls(SPAWN_AGENT) {
        features.push("multi_agent_v2");
    }
    features
}

/// `-c features.NAME=true` for each feature. Not `--enable NAME`: the tap appends the cell's
/// arguments after the driver's, and a `--enable` given after `app-server` replaces every
/// `--enable` the driver gave before it (clap's global options; `cli_rules.toml`), where `-c`
/// overrides add up.
pub fn feature_args(features: &[&str]) -> Vec<String> {
    features
        .iter()
        .flat_map(|feature| ["-c".to_string(), format!("features.{feature}=true")])
        .collect()
}

/// The app-server's complete environment: nothing inherited, never a credential.
pub fn allowlisted_env(home: &Path, codex_home: &Path, tmpdir: &Path) -> Vec<(String, String)> {
    let path = |p: &Path| p.to_string_lossy().into_owned();
    vec![
        ("PATH".into(), APP_SERVER_PATH.into()),
        ("HOME".into(), path(home)),
        ("CODEX_HOME".into(), path(codex_home)),
        ("TMPDIR".into(), path(tmpdir)),
        ("LANG".into(), "C.UTF-8".into()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_exactly_the_allowlist_and_tmpdir_is_not_above_codex_home() {
        let env = allowlisted_env(
            Path::new("/c/codex/home"),
            Path::new("/c/codex/home/.codex"),
            Path::new("/c/codex/tmp"),
        );
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["PATH", "HOME", "CODEX_HOME", "TMPDIR", "LANG"]);
        let get = |name: &str| env.iter().find(|(k, _)| k == name).unwrap().1.clone();
        assert!(!Path::new(&get("CODEX_HOME")).starts_with(get("TMPDIR")));
    }

    #[test]
    fn provider_args_are_valid_toml_pointing_at_the_mock() {
        let args = provider_args("http://127.0.0.1:4242/v1");
        assert_eq!(args[1], "model_provider=\"mock\"");
        let table: toml::Table = toml::from_str(&args[5]).unwrap();
        let mock = &table["model_providers"]["mock"];
        assert_eq!(mock["base_url"].as_str(), Some("http://127.0.0.1:4242/v1"));
        assert_eq!(mock["wire_api"].as_str(), Some("responses"));
        assert_eq!(mock["request_max_retries"].as_integer(), Some(0));
        assert_eq!(mock["stream_max_retries"].as_integer(), Some(0));
        let retried: toml::Table =
            toml::from_str(&provider_args_retrying("http://127.0.0.1:4242/v1", 5)[5]).unwrap();
        assert_eq!(
            retried["model_providers"]["mock"]["stream_max_retries"].as_integer(),
            Some(5)
        );
        assert!(mock.get("env_key").is_none());
    }

    #[test]
    fn a_script_calling_request_permissions_enables_its_feature_by_config() {
        use fake_app_server::scenario::Scenario;
        let permissions = Scenario::builtin("permissions-approval")
            .unwrap()
            .model_script();
        assert_eq!(features_for(&permissions), ["request_permissions_tool"]);
        assert_eq!(
            feature_args(&features_for(&permissions)),
            ["-c", "features.request_permissions_tool=true"]
        );
        let healthy = Scenario::builtin("healthy").unwrap().model_script();
        assert!(features_for(&healthy).is_empty());
    }

    /// Without `multi_agent_v2` a catalogue model is offered no sub-agent tool, and Codex
    /// answers `spawn_agent` with `unsupported call` (measured, 0.169).
    #[test]
    fn a_script_spawning_a_sub_agent_enables_multi_agent_v2() {
        let text = "[[turns]]\nsteps = [{ step = \"tool-call\", name = \"spawn_agent\", arguments = { task_name = \"helper\", message = \"Say done.\" } }]\n";
        let scenario = Scenario::from_toml_str(text, Path::new("s.toml")).unwrap();
        assert_eq!(features_for(&scenario.model_script()), ["multi_agent_v2"]);
    }
}
