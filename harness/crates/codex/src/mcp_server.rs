//! The harness's own MCP server for real-Codex cells whose model calls one of its tools
//! (`mcp__harness__ask_user`): the real Codex sends its driver `mcpServer/elicitation/request`
//! only when an MCP server it runs asks for elicitation (MCP `elicitation/create`), so the
//! request is played for real by a server of the harness (`mcp_server/elicit_server.py`).
//!
//! The server is written into the cell's CODEX_HOME, the one folder every app-server view has
//! (its own uid in a local cell, a container's bind), and named to Codex with `-c` like the
//! mock provider. Its tools are pre-approved (`default_tools_approval_mode = "approve"`): without
//! that, Codex 0.169 first asks the client to approve the tool call with an elicitation of its
//! own (`_meta.codex_approval_kind = "mcp_tool_call"`), and refuses the call outright under
//! approvalPolicy `never`; with it, the one elicitation the client sees is the server's form
//! (measured). Under `never` Codex still declines the server's elicitation itself and asks the
//! client nothing (measured).

use anyhow::{Context, Result};
use fake_app_server::scenario::model::{ModelStep, ModelTurn};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The server's name in Codex's `mcp_servers` (its tools are `mcp__harness__<tool>`).
pub(crate) const SERVER_NAME: &str = "harness";
/// The file written into CODEX_HOME.
pub(crate) const SCRIPT_FILE: &str = "harness-elicit-mcp.py";
const SCRIPT: &str = include_str!("mcp_server/elicit_server.py");

/// Whether a model script calls a tool of the harness's MCP server.
pub(crate) fn needed(model_script: &[ModelTurn]) -> bool {
    let prefix = format!("mcp__{SERVER_NAME}__");
    model_script
        .iter()
        .flat_map(|turn| &turn.steps)
        .any(|step| matches!(step, ModelStep::ToolCall { name, .. } if name.starts_with(&prefix)))
}

/// Write the server into `codex_home` (handed to `owner` when the app-server runs as another
/// user; readable by every user either way) and return the `-c` arguments naming it.
pub(crate) fn install(codex_home: &Path, owner: Option<(u32, u32)>) -> Result<Vec<String>> {
    let path: PathBuf = codex_home.join(SCRIPT_FILE);
    std::fs::write(&path, SCRIPT).with_context(|| format!("writing {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
        .with_context(|| format!("making {} readable", path.display()))?;
    if let Some((uid, gid)) = owner {
        std::os::unix::fs::chown(&path, Some(uid), Some(gid))
            .with_context(|| format!("handing {} to uid {uid}", path.display()))?;
    }
    Ok(config_args(&path))
}

/// `-c mcp_servers.harness={…}`: python3 from the app-server's PATH runs the script.
pub(crate) fn config_args(script: &Path) -> Vec<String> {
    let quoted = |s: &str| toml::Value::String(s.into()).to_string();
    vec![
        "-c".into(),
        format!(
            "mcp_servers.{SERVER_NAME}={{command=\"python3\",args=[{}],default_tools_approval_mode=\"approve\"}}",
            quoted(&script.to_string_lossy())
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_valid_toml_naming_the_script_pre_approved() {
        let args = config_args(Path::new("/cell/home/.codex/harness-elicit-mcp.py"));
        assert_eq!(args[0], "-c");
        let table: toml::Table = toml::from_str(&args[1]).unwrap();
        let server = &table["mcp_servers"][SERVER_NAME];
        assert_eq!(server["command"].as_str(), Some("python3"));
        assert_eq!(
            server["args"][0].as_str(),
            Some("/cell/home/.codex/harness-elicit-mcp.py")
        );
        assert_eq!(
            server["default_tools_approval_mode"].as_str(),
            Some("approve")
        );
    }

    #[test]
    fn only_a_script_calling_the_servers_tool_needs_it() {
        let call = |name: &str| ModelTurn {
            steps: vec![ModelStep::ToolCall {
                name: name.into(),
                arguments: serde_json::json!({}),
            }],
        };
        assert!(needed(&[call("mcp__harness__ask_user")]));
        assert!(!needed(&[call("{dynamic_tool}")]));
        assert!(!needed(&[call("mcp__other__ask_user")]));
    }

    #[test]
    fn the_written_server_is_readable_by_every_user() {
        let dir = tempfile::tempdir().unwrap();
        install(dir.path(), None).unwrap();
        let mode = std::fs::metadata(dir.path().join(SCRIPT_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o444, 0o444);
    }
}
