//! What Codex offered the model in one request (`tools` of the Responses request), as far as the
//! script needs it: how `apply_patch` is called, and which tool is the driver's first dynamic
//! tool (the script's `{dynamic_tool}`).
//!
//! Measured with Codex 0.160, 0.169 and 0.171 (a catalogue model, `gpt-5.5`): the tool list is
//! Codex's own function tools (`exec_command`, `write_stdin`, `request_user_input`,
//! `request_permissions` with its feature, `view_image`, `get_goal`, `create_goal`,
//! `update_goal`), `apply_patch` as a `custom` (freeform) tool, then the driver's dynamic tools
//! as `function` tools in the order it registered them, then `tool_search` and `web_search`.
//! A dynamic tool is told apart by name: a `function` tool that is not one of Codex's own
//! ([`CODEX_FUNCTION_TOOLS`]); a driver's tool named like one of Codex's would be taken for
//! Codex's (none of the matrix's drivers names one so).
//! With `multi_agent_v2` a `namespace` tool (`collaboration`) holds the sub-agent tools; a call
//! of one of them must carry the namespace's name.

use serde_json::Value;

/// Codex's own `function` tools, across the pinned releases and their features (measured; the
/// last ones are offered by models or features the matrix does not use, listed so that a
/// driver's tool is never confused with them).
pub(crate) const CODEX_FUNCTION_TOOLS: &[&str] = &[
    "exec_command",
    "write_stdin",
    "request_user_input",
    "request_permissions",
    "view_image",
    "get_goal",
    "create_goal",
    "update_goal",
    "update_plan",
    "apply_patch",
    "shell",
    "shell_command",
    "list_mcp_resources",
    "list_mcp_resource_templates",
    "read_mcp_resource",
];

/// How the model calls a tool: a `function_call` with JSON arguments, or a `custom_tool_call`
/// with free text (Codex's freeform `apply_patch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallKind {
    Function,
    Custom,
}

/// What one request offered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Offered {
    /// `apply_patch` is offered as a freeform (`custom`) tool.
    pub(crate) freeform_apply_patch: bool,
    /// The first dynamic tool the driver registered, if it registered one.
    pub(crate) first_dynamic_tool: Option<String>,
    /// Function tools offered inside a namespace, with the namespace's name.
    pub(crate) namespaced: Vec<(String, String)>,
    /// `tool_search` is offered (MCP tools are deferred behind it).
    pub(crate) tool_search: bool,
    /// Every `function` tool offered by name.
    pub(crate) functions: Vec<String>,
    /// (namespace, tool) of each tool a `tool_search` of this turn loaded.
    pub(crate) loaded: Vec<(String, String)>,
}

/// How the model reaches a tool the script names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    /// A call by the name itself.
    Plain,
    /// A `function_call` in `namespace` (an MCP tool a search loaded; the call names the tool
    /// without its `mcp__<server>__` prefix).
    Namespaced { namespace: String },
    /// A deferred MCP tool: search for it first (`query`), call it in the next response.
    SearchFirst { query: String },
}

/// The prefix of an MCP tool's name as a script writes it (`mcp__<server>__<tool>`).
pub(crate) const MCP_PREFIX: &str = "mcp__";

/// `mcp__<server>__<tool>` as (`mcp__<server>`, `<tool>`).
pub(crate) fn mcp_parts(name: &str) -> Option<(&str, &str)> {
    let rest = name.strip_prefix(MCP_PREFIX)?;
    let (server, tool) = rest.split_once("__")?;
    (!server.is_empty() && !tool.is_empty())
        .then(|| (&name[..MCP_PREFIX.len() + server.len()], tool))
}

/// The (namespace, tool) pairs the `tool_search_output`s of the request's current turn loaded.
fn loaded_tools(body: &Value) -> Vec<(String, String)> {
    let input = body
        .get("input")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let mut loaded = Vec::new();
    for output in super::position::current_turn(input)
        .iter()
        .filter(|item| item.get("type").and_then(Value::as_str) == Some("tool_search_output"))
    {
        let spaces = output.get("tools").and_then(Value::as_array);
        for space in spaces.into_iter().flatten() {
            let Some(namespace) = space.get("name").and_then(Value::as_str) else {
                continue;
            };
            let tools = space.get("tools").and_then(Value::as_array);
            for tool in tools.into_iter().flatten() {
                if let Some(name) = tool.get("name").and_then(Value::as_str) {
                    loaded.push((namespace.to_string(), name.to_string()));
                }
            }
        }
    }
    loaded
}

impl Offered {
    /// Read from a Responses request body.
    pub(crate) fn from_request(body: &Value) -> Self {
        let tools = body
            .get("tools")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or(&[]);
        let kind = |tool: &Value| tool.get("type").and_then(Value::as_str).map(str::to_string);
        let name = |tool: &Value| tool.get("name").and_then(Value::as_str).map(str::to_string);
        Offered {
            freeform_apply_patch: tools.iter().any(|tool| {
                kind(tool).as_deref() == Some("custom")
                    && name(tool).as_deref()
                        == Some(fake_app_server::scenario::codex_tools::APPLY_PATCH)
            }),
            first_dynamic_tool: tools
                .iter()
                .filter(|tool| kind(tool).as_deref() == Some("function"))
                .filter_map(name)
                .find(|name| {
                    !CODEX_FUNCTION_TOOLS.contains(&name.as_str()) && !name.starts_with(MCP_PREFIX)
                }),
            namespaced: tools
                .iter()
                .filter(|tool| kind(tool).as_deref() == Some("namespace"))
                .filter_map(|space| {
                    let space_name = name(space)?;
                    let inner = space.get("tools").and_then(Value::as_array)?;
                    Some(
                        inner
                            .iter()
                            .filter_map(name)
                            .map(|tool| (tool, space_name.clone()))
                            .collect::<Vec<_>>(),
                    )
                })
                .flatten()
                .collect(),
            tool_search: tools
                .iter()
                .any(|tool| kind(tool).as_deref() == Some("tool_search")),
            functions: tools
                .iter()
                .filter(|tool| kind(tool).as_deref() == Some("function"))
                .filter_map(name)
                .collect(),
            loaded: loaded_tools(body),
        }
    }

    /// How the model calls `name` here: an MCP tool a search of this turn loaded is called in
    /// its namespace; one not offered directly is searched for first (when Codex offers the
    /// search; else it is called by name and Codex answers it as unsupported).
    pub(crate) fn route(&self, name: &str) -> Route {
        let Some((namespace, tool)) = mcp_parts(name) else {
            return Route::Plain;
        };
        if self.loaded.iter().any(|(n, t)| n == namespace && t == tool) {
            Route::Namespaced {
                namespace: namespace.into(),
            }
        } else if self.tool_search && !self.functions.iter().any(|f| f == name) {
            Route::SearchFirst { query: tool.into() }
        } else {
            Route::Plain
        }
    }

    /// The namespace a call of `name` must carry, when Codex offered the tool inside one.
    pub(crate) fn namespace_of(&self, name: &str) -> Option<&str> {
        self.namespaced
            .iter()
            .find(|(tool, _)| tool == name)
            .map(|(_, space)| space.as_str())
    }

    /// The tool a script's call names, as the model calls it: `{dynamic_tool}` becomes the
    /// first dynamic tool (kept as written when the driver registered none, so Codex answers it
    /// as an unknown tool, as the fake does).
    pub(crate) fn resolve<'a>(&'a self, name: &'a str) -> &'a str {
        if name == fake_app_server::scenario::codex_tools::DYNAMIC_TOOL {
            self.first_dynamic_tool.as_deref().unwrap_or(name)
        } else {
            name
        }
    }

    /// How the model calls `name` here.
    pub(crate) fn call_kind(&self, name: &str) -> CallKind {
        if name == fake_app_server::scenario::codex_tools::APPLY_PATCH && self.freeform_apply_patch
        {
            CallKind::Custom
        } else {
            CallKind::Function
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The tool list of Codex 0.169 with `gpt-5.5`, a dynamic tool registered (measured; the
    /// descriptions and parameters left out).
    fn measured(dynamic: &[&str]) -> Value {
        let mut tools = vec![
            json!({"type": "function", "name": "exec_command"}),
            json!({"type": "function", "name": "write_stdin"}),
            json!({"type": "function", "name": "request_user_input"}),
            json!({"type": "function", "name": "request_permissions"}),
            json!({"type": "custom", "name": "apply_patch"}),
            json!({"type": "function", "name": "view_image"}),
            json!({"type": "function", "name": "get_goal"}),
            json!({"type": "function", "name": "create_goal"}),
            json!({"type": "function", "name": "update_goal"}),
        ];
        tools.extend(
            dynamic
                .iter()
                .map(|n| json!({"type": "function", "name": n})),
        );
        tools.push(json!({"type": "tool_search", "execution": "client"}));
        tools.push(json!({"type": "web_search"}));
        json!({"tools": tools})
    }

    #[test]
    fn the_first_dynamic_tool_is_the_first_function_codex_does_not_own() {
        let offered = Offered::from_request(&measured(&["paperclip_finish", "paperclip_block"]));
        assert_eq!(
            offered.first_dynamic_tool.as_deref(),
            Some("paperclip_finish")
        );
        assert_eq!(offered.resolve("{dynamic_tool}"), "paperclip_finish");
        assert_eq!(offered.resolve("create_goal"), "create_goal");
        let none = Offered::from_request(&measured(&[]));
        assert_eq!(none.first_dynamic_tool, None);
        assert_eq!(none.resolve("{dynamic_tool}"), "{dynamic_tool}");
    }

    #[test]
    fn apply_patch_is_a_custom_call_only_where_it_is_offered_freeform() {
        let offered = Offered::from_request(&measured(&[]));
        assert_eq!(offered.call_kind("apply_patch"), CallKind::Custom);
        assert_eq!(offered.call_kind("request_user_input"), CallKind::Function);
        let function_only =
            Offered::from_request(&json!({"tools": [{"type": "function", "name": "apply_patch"}]}));
        assert_eq!(function_only.call_kind("apply_patch"), CallKind::Function);
        assert_eq!(Offered::from_request(&json!({})), Offered::default());
    }

    /// 0.169 with `multi_agent_v2`: the sub-agent tools come as one `namespace` tool (measured;
    /// a call without the namespace is answered `unsupported call: spawn_agent`).
    #[test]
    fn a_tool_offered_in_a_namespace_is_called_with_it() {
        let body = json!({"tools": [
            {"type": "function", "name": "exec_command"},
            {"type": "namespace", "name": "collaboration", "tools": [
                {"type": "function", "name": "spawn_agent"},
                {"type": "function", "name": "wait_agent"}]},
            {"type": "function", "name": "paperclip_finish"}]});
        let offered = Offered::from_request(&body);
        assert_eq!(offered.namespace_of("spawn_agent"), Some("collaboration"));
        assert_eq!(offered.namespace_of("wait_agent"), Some("collaboration"));
        assert_eq!(offered.namespace_of("exec_command"), None);
        assert_eq!(
            offered.first_dynamic_tool.as_deref(),
            Some("paperclip_finish")
        );
    }

    /// The tool list of Codex 0.169 with an MCP server configured (measured: its tools are not
    /// in it; `tool_search` is), and a history whose search loaded the server's tool.
    #[test]
    fn an_mcp_tool_is_searched_for_until_a_search_of_this_turn_loaded_it() {
        let mut body = measured(&[]);
        assert_eq!(
            Offered::from_request(&body).route("mcp__harness__ask_user"),
            Route::SearchFirst {
                query: "ask_user".into()
            }
        );
        let output = json!({"type": "tool_search_output", "call_id": "s1", "execution": "client",
            "tools": [{"type": "namespace", "name": "mcp__harness", "tools": [
                {"type": "function", "name": "ask_user"}]}]});
        let user = json!({"type": "message", "role": "user",
            "content": [{"type": "input_text", "text": "Look the ticket up."}]});
        body["input"] = json!([user.clone(), output.clone()]);
        let offered = Offered::from_request(&body);
        assert_eq!(
            offered.route("mcp__harness__ask_user"),
            Route::Namespaced {
                namespace: "mcp__harness".into()
            }
        );
        assert_eq!(offered.route("exec_command"), Route::Plain);
        // A search of an earlier turn loaded nothing for this one.
        body["input"] = json!([user.clone(), output, user]);
        assert!(matches!(
            Offered::from_request(&body).route("mcp__harness__ask_user"),
            Route::SearchFirst { .. }
        ));
        // An MCP tool offered directly is not a driver's dynamic tool, and is called by name.
        let direct = json!({"tools": [{"type": "function", "name": "mcp__harness__ask_user"},
            {"type": "tool_search"}]});
        let offered = Offered::from_request(&direct);
        assert_eq!(offered.first_dynamic_tool, None);
        assert_eq!(offered.route("mcp__harness__ask_user"), Route::Plain);
        assert_eq!(
            mcp_parts("mcp__harness__ask_user"),
            Some(("mcp__harness", "ask_user"))
        );
        assert_eq!(mcp_parts("mcp____x"), None);
    }
}
