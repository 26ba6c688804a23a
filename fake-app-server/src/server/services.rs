//! The methods a client calls about what surrounds its threads, answered like Codex 0.169.0
//! (measured): the account (`account/read`, `account/login/start`, `account/login/cancel`),
//! MCP servers (`mcpServer/oauth/login`) and hooks (`hooks/list`). The fake reaches no OpenAI
//! service, runs no MCP server and no hook.

use super::gate::require_initialized;
use super::settings::{read_toml, user_config_file};
use super::{Reply, Shared};
use crate::protocol::shapes;
use crate::protocol::{parse_params, RpcError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;

pub(super) fn account_read(
    shared: &Arc<Shared>,
    params: Option<&Value>,
) -> Result<Value, RpcError> {
    let _: Map<String, Value> = parse_params(params)?;
    Ok(json!({
        "account": null, "userId": null,
        "requiresOpenaiAuth": shared.config.requires_openai_auth(),
        "workspaceRouting": null,
    }))
}

/// `account/login/start`: an API key is accepted at once (Codex stores it and reports the login);
/// the browser and device-code flows need a network the fake never uses.
pub(super) fn account_login_start(params: Option<&Value>) -> Reply {
    let params: Map<String, Value> = match parse_params(params) {
        Ok(p) => p,
        Err(e) => return Reply::err(e),
    };
    match params.get("type").and_then(Value::as_str) {
        Some("apiKey") if params.get("apiKey").is_some_and(Value::is_string) => Reply::then(
            json!({"type": "apiKey"}),
            vec![
                shapes::notification(
                    "account/login/completed",
                    json!({"loginId": null, "success": true, "error": null, "onboardingEntrypoint": null}),
                ),
                shapes::notification(
                    "account/updated",
                    json!({"authMode": "apikey", "planType": null}),
                ),
            ],
        ),
        Some("apiKey") => Reply::err(RpcError::invalid("Invalid request: missing field `apiKey`")),
        Some(other) => Reply::err(RpcError::invalid(format!(
            "fake-app-server supports only `apiKey` logins (got `{other}`)"
        ))),
        None => Reply::err(RpcError::invalid("Invalid request: missing field `type`")),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct LoginCancelParams {
    login_id: String,
}

/// `account/login/cancel`: the fake never has a login under way (an API key logs in at once).
pub(super) fn account_login_cancel(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let params: LoginCancelParams = parse_params(params)?;
        require_initialized(shared)?;
        Err(RpcError::invalid(format!(
            "invalid login id: {}",
            params.login_id
        )))
    };
    Reply::from(run())
}

#[derive(Deserialize)]
struct OauthLoginParams {
    name: String,
}

/// `mcpServer/oauth/login`: Codex's answer for a server the config does not name; for one it
/// names, the login needs the server and a browser, which the fake has neither of.
pub(super) fn mcp_server_oauth_login(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let params: OauthLoginParams = parse_params(params)?;
        require_initialized(shared)?;
        let configured = shared
            .config
            .session_flags
            .get("mcp_servers")
            .and_then(|servers| servers.get(&params.name))
            .is_some()
            || read_toml(&user_config_file())
                .get("mcp_servers")
                .and_then(|servers| servers.get(&params.name))
                .is_some();
        if configured {
            return Err(RpcError::internal(format!(
                "fake-app-server does not implement `mcpServer/oauth/login` for a configured server (`{}`): it runs no MCP server",
                params.name
            )));
        }
        Err(RpcError::invalid(format!(
            "No MCP server named '{}' found.",
            params.name
        )))
    };
    Reply::from(run())
}

#[derive(Deserialize, Default)]
struct HooksListParams {
    #[serde(default)]
    cwds: Vec<String>,
}

/// `hooks/list`: per cwd (the server's when none is given), no hooks, as Codex 0.169 lists them
/// for a workspace and a home that configure none (measured); the fake runs no hooks.
pub(super) fn hooks_list(shared: &Arc<Shared>, params: Option<&Value>) -> Reply {
    let run = || -> Result<Value, RpcError> {
        let params: HooksListParams = match params {
            None | Some(Value::Null) => HooksListParams::default(),
            Some(_) => parse_params(params)?,
        };
        require_initialized(shared)?;
        let cwds = if params.cwds.is_empty() {
            vec![super::state::server_cwd().display().to_string()]
        } else {
            params.cwds
        };
        let data: Vec<Value> = cwds
            .into_iter()
            .map(|cwd| json!({"cwd": cwd, "hooks": [], "warnings": [], "errors": []}))
            .collect();
        Ok(json!({"data": data}))
    };
    Reply::from(run())
}
