//! The protocol of each Codex release, as data: which requests the app-server may send a client
//! and which notifications, and one compiled JSON Schema validator per server request for the
//! client's answer. The data is the release's own generated schema, committed under
//! `graders/protocol/<VERSION>/` (README there) and embedded here, so grading needs no Codex on
//! the machine. A release is parsed and its validators compiled the first time it is asked for,
//! once per process.
//!
//! A release without data is an error naming the releases there are: the caller decides what
//! that means (the wire translator records the answer `unchecked`, which no grader takes as a
//! pass) — never a silent pass.

use crate::events::SchemaVerdict;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

/// The committed files of one release.
struct Files {
    version: &'static str,
    server_requests: &'static str,
    server_notifications: &'static str,
    /// `(<Type>Response, schema text)`.
    responses: &'static [(&'static str, &'static str)],
}

/// The embedded files of a release: every response schema is named once here (a test holds
/// the list against the folder, so a file added there and not here fails).
macro_rules! release_files {
    ($version:literal, [$($response:ident),* $(,)?]) => {
        Files {
            version: $version,
            server_requests: include_str!(concat!("../protocol/", $version, "/ServerRequest.json")),
            server_notifications: include_str!(concat!(
                "../protocol/",
                $version,
                "/ServerNotification.json"
            )),
            responses: &[$((
                stringify!($response),
                include_str!(concat!(
                    "../protocol/",
                    $version,
                    "/responses/",
                    stringify!($response),
                    ".json"
                )),
            )),*],
        }
    };
}

const RELEASE_FILES: &[Files] = &[
    release_files!(
        "0.160.0",
        [
            ApplyPatchApprovalResponse,
            AttestationGenerateResponse,
            ChatgptAuthTokensRefreshResponse,
            CommandExecutionRequestApprovalResponse,
            CurrentTimeReadResponse,
            DynamicToolCallResponse,
            ExecCommandApprovalResponse,
            FileChangeRequestApprovalResponse,
            McpServerElicitationRequestResponse,
            PermissionsRequestApprovalResponse,
            ToolRequestUserInputResponse,
        ]
    ),
    release_files!(
        "0.169.0",
        [
            ApplyPatchApprovalResponse,
            AttestationGenerateResponse,
            ChatgptAuthTokensRefreshResponse,
            CommandExecutionRequestApprovalResponse,
            CurrentTimeReadResponse,
            DynamicToolCallResponse,
            ExecCommandApprovalResponse,
            FileChangeRequestApprovalResponse,
            McpServerElicitationRequestResponse,
            PermissionsRequestApprovalResponse,
            ToolRequestUserInputResponse,
        ]
    ),
    release_files!(
        "0.171.0",
        [
            ApplyPatchApprovalResponse,
            AttestationGenerateResponse,
            ChatgptAuthTokensRefreshResponse,
            CommandExecutionRequestApprovalResponse,
            DynamicToolCallResponse,
            ExecCommandApprovalResponse,
            FileChangeRequestApprovalResponse,
            McpServerElicitationRequestResponse,
            PermissionsRequestApprovalResponse,
            ToolRequestUserInputResponse,
        ]
    ),
];

/// Longest schema error text kept in a verdict (the validator quotes the instance, which may be
/// large).
const SCHEMA_ERROR_CHARS: usize = 300;

/// The releases with protocol data, oldest first.
pub fn releases() -> Vec<&'static str> {
    RELEASE_FILES.iter().map(|f| f.version).collect()
}

/// The committed text of a release's `<response_type>.json` (`CommandExecutionRequestApprovalResponse`),
/// for a client that builds its answers from the schema (`client-choices`).
pub fn response_schema_text(version: &str, response_type: &str) -> Option<&'static str> {
    let files = RELEASE_FILES.iter().find(|f| f.version == version)?;
    files
        .responses
        .iter()
        .find(|(name, _)| *name == response_type)
        .map(|(_, text)| *text)
}

/// Why a release's protocol cannot be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReleaseError {
    #[error("no protocol data for Codex {asked} in graders/protocol (releases there: {known})")]
    Unknown { asked: String, known: String },
    #[error("the protocol data of Codex {version} cannot be read: {why}")]
    Broken { version: String, why: String },
}

/// One request the app-server may send a client.
struct ServerRequestSpec {
    /// `<Type>Response`, from the request's `<Type>Params`.
    response_type: String,
    /// The validator of the answer's `result`; `Err` says why there is none.
    validator: Result<jsonschema::Validator, String>,
}

/// One notification the app-server may send.
#[derive(Debug, Clone)]
struct NotificationSpec {
    /// The top-level `params` fields the schema names (`None`: it names none, so extra fields
    /// cannot be told).
    params_fields: Option<BTreeSet<String>>,
}

/// The protocol of one release.
pub struct Release {
    version: &'static str,
    server_requests: BTreeMap<String, ServerRequestSpec>,
    notifications: BTreeMap<String, NotificationSpec>,
    /// The whole `ServerNotification.json`: a notification message (`{method, params}`) is
    /// valid when it is exactly one of the release's notifications.
    notification_validator: jsonschema::Validator,
}

impl std::fmt::Debug for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Release")
            .field("version", &self.version)
            .field("server_requests", &self.server_requests.keys())
            .field("notifications", &self.notifications.len())
            .finish()
    }
}

/// The protocol of `version`, parsed and compiled on first use.
pub fn release(version: &str) -> Result<&'static Release, ReleaseError> {
    static LOADED: [OnceLock<Result<Release, ReleaseError>>; RELEASE_FILES.len()] =
        [const { OnceLock::new() }; RELEASE_FILES.len()];
    let Some(index) = RELEASE_FILES.iter().position(|f| f.version == version) else {
        return Err(ReleaseError::Unknown {
            asked: version.to_string(),
            known: releases().join(", "),
        });
    };
    LOADED[index]
        .get_or_init(|| load(&RELEASE_FILES[index]))
        .as_ref()
        .map_err(Clone::clone)
}

/// `(method, the name of its params definition)` of every variant of a `ServerRequest.json` or
/// `ServerNotification.json`.
fn variants(document: &Value) -> Result<Vec<(String, String)>, String> {
    let variants = document
        .get("oneOf")
        .and_then(Value::as_array)
        .ok_or("no `oneOf` list of messages")?;
    variants
        .iter()
        .map(|variant| {
            let method = variant
                .pointer("/properties/method/enum/0")
                .and_then(Value::as_str)
                .ok_or_else(|| format!("a message without a method: {}", excerpt(variant)))?;
            let params = variant
                .pointer("/properties/params/$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix("#/definitions/"))
                .ok_or_else(|| format!("`{method}` has no `params` $ref into its definitions"))?;
            Ok((method.to_string(), params.to_string()))
        })
        .collect()
}

fn excerpt(value: &Value) -> String {
    crate::excerpt::excerpt(&value.to_string(), 120)
}

fn parse(version: &str, name: &str, text: &str) -> Result<Value, ReleaseError> {
    serde_json::from_str(text).map_err(|e| ReleaseError::Broken {
        version: version.to_string(),
        why: format!("{name} is not JSON: {e}"),
    })
}

fn load(files: &Files) -> Result<Release, ReleaseError> {
    let version = files.version;
    let broken = |why: String| ReleaseError::Broken {
        version: version.to_string(),
        why,
    };
    let requests = parse(version, "ServerRequest.json", files.server_requests)?;
    let mut server_requests = BTreeMap::new();
    for (method, params) in
        variants(&requests).map_err(|e| broken(format!("ServerRequest.json: {e}")))?
    {
        let kind = params.strip_suffix("Params").ok_or_else(|| {
            broken(format!(
                "`{method}`'s params `{params}` is not named `<Type>Params`"
            ))
        })?;
        let response_type = format!("{kind}Response");
        let validator = match files
            .responses
            .iter()
            .find(|(name, _)| *name == response_type)
        {
            None => Err(format!(
                "graders/protocol/{version}/responses has no {response_type}.json"
            )),
            Some((_, text)) => {
                let schema = parse(version, &format!("{response_type}.json"), text)?;
                jsonschema::validator_for(&schema)
                    .map_err(|e| format!("{response_type}.json does not compile: {e}"))
            }
        };
        server_requests.insert(
            method,
            ServerRequestSpec {
                response_type,
                validator,
            },
        );
    }
    let notifications_doc = parse(
        version,
        "ServerNotification.json",
        files.server_notifications,
    )?;
    let mut notifications = BTreeMap::new();
    for (method, params) in
        variants(&notifications_doc).map_err(|e| broken(format!("ServerNotification.json: {e}")))?
    {
        let params_fields = notifications_doc
            .pointer(&format!("/definitions/{params}/properties"))
            .and_then(Value::as_object)
            .map(|fields| fields.keys().cloned().collect());
        notifications.insert(method, NotificationSpec { params_fields });
    }
    let notification_validator = jsonschema::validator_for(&notifications_doc)
        .map_err(|e| broken(format!("ServerNotification.json does not compile: {e}")))?;
    Ok(Release {
        version,
        server_requests,
        notifications,
        notification_validator,
    })
}

impl Release {
    pub fn version(&self) -> &'static str {
        self.version
    }

    /// The methods of the requests the app-server may send a client, sorted.
    pub fn server_requests(&self) -> impl Iterator<Item = &str> {
        self.server_requests.keys().map(String::as_str)
    }

    /// The methods of the notifications the app-server may send, sorted.
    pub fn notifications(&self) -> impl Iterator<Item = &str> {
        self.notifications.keys().map(String::as_str)
    }

    pub fn has_server_request(&self, method: &str) -> bool {
        self.server_requests.contains_key(method)
    }

    pub fn has_notification(&self, method: &str) -> bool {
        self.notifications.contains_key(method)
    }

    /// The schema type a client's answer to `method` must be (`CommandExecutionRequestApprovalResponse`).
    pub fn response_type(&self, method: &str) -> Option<&str> {
        self.server_requests
            .get(method)
            .map(|spec| spec.response_type.as_str())
    }

    /// Whether `result`, a client's answer to the server request `method`, validates against
    /// the release's `<Type>Response.json`: `invalid` names the first schema error and where.
    pub fn check_answer(&self, method: &str, result: &Value) -> SchemaVerdict {
        let Some(spec) = self.server_requests.get(method) else {
            return SchemaVerdict::Unchecked {
                why: format!(
                    "Codex {} has no server request `{method}`, so no answer schema",
                    self.version
                ),
            };
        };
        match &spec.validator {
            Err(why) => SchemaVerdict::Unchecked { why: why.clone() },
            Ok(validator) => match validator.validate(result) {
                Ok(()) => SchemaVerdict::Valid,
                Err(error) => SchemaVerdict::Invalid {
                    error: crate::excerpt::excerpt(&error.to_string(), SCHEMA_ERROR_CHARS),
                    path: error.instance_path.to_string(),
                    schema: format!("{}.json", spec.response_type),
                },
            },
        }
    }

    /// Whether a notification message (`{method, params}`) is one of the release's
    /// notifications, as its schema says.
    pub fn notification_is_valid(&self, message: &Value) -> bool {
        self.notification_validator.is_valid(message)
    }

    /// The top-level `params` fields of `params` that the release's schema does not name for
    /// `method`, counted; `None` when the schema names none for it (or has no such method).
    pub fn extra_params_fields(&self, method: &str, params: &Value) -> Option<usize> {
        let fields = self.notifications.get(method)?.params_fields.as_ref()?;
        Some(
            params
                .as_object()
                .map_or(0, |p| p.keys().filter(|k| !fields.contains(*k)).count()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_release_loads_and_every_response_schema_compiles() {
        for version in releases() {
            let release = release(version).unwrap_or_else(|e| panic!("{e}"));
            assert!(release.server_requests().count() >= 10, "{version}");
            assert!(release.notifications().count() >= 80, "{version}");
            for (method, spec) in &release.server_requests {
                if let Err(why) = &spec.validator {
                    panic!("{version} {method}: {why}");
                }
            }
        }
    }

    #[test]
    fn the_embedded_response_files_are_exactly_the_committed_ones() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("protocol");
        let mut on_disk: Vec<String> = std::fs::read_dir(&root)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        on_disk.sort();
        assert_eq!(on_disk, releases(), "a release folder is not embedded");
        for files in RELEASE_FILES {
            let mut names: Vec<String> =
                std::fs::read_dir(root.join(files.version).join("responses"))
                    .unwrap()
                    .filter_map(|e| e.ok())
                    .map(|e| {
                        e.file_name()
                            .to_string_lossy()
                            .trim_end_matches(".json")
                            .to_string()
                    })
                    .collect();
            names.sort();
            let embedded: Vec<&str> = files.responses.iter().map(|(n, _)| *n).collect();
            assert_eq!(names, embedded, "{}", files.version);
        }
    }

    #[test]
    fn a_release_without_data_is_an_error_naming_the_releases_there_are() {
        let err = release("0.1.0").unwrap_err();
        assert_eq!(
            err.to_string(),
            "no protocol data for Codex 0.1.0 in graders/protocol (releases there: 0.160.0, 0.169.0, 0.171.0)"
        );
    }

    #[test]
    fn current_time_is_a_server_request_of_0_169_only() {
        assert!(release("0.169.0")
            .unwrap()
            .has_server_request("currentTime/read"));
        let later = release("0.171.0").unwrap();
        assert!(!later.has_server_request("currentTime/read"));
        assert!(matches!(
            later.check_answer("currentTime/read", &json!({"currentTimeAt": 1})),
            SchemaVerdict::Unchecked { .. }
        ));
        assert!(later.has_notification("thread/search/partial"));
    }

    fn verdict(method: &str, answer: Value) -> SchemaVerdict {
        release("0.169.0").unwrap().check_answer(method, &answer)
    }

    fn valid(method: &str, answer: Value) {
        assert_eq!(
            verdict(method, answer.clone()),
            SchemaVerdict::Valid,
            "{method} {answer}"
        );
    }

    fn invalid(method: &str, answer: Value) -> (String, String) {
        match verdict(method, answer.clone()) {
            SchemaVerdict::Invalid { error, path, .. } => (error, path),
            other => panic!("{method} {answer}: {other:?}"),
        }
    }

    #[test]
    fn approval_answers() {
        let command = "item/commandExecution/requestApproval";
        valid(command, json!({"decision": "decline"}));
        valid(command, json!({"decision": "accept"}));
        valid(command, json!({"decision": "cancel"}));
        invalid(command, json!({"decision": "deny"}));
        invalid(command, json!({}));
        let file = "item/fileChange/requestApproval";
        valid(file, json!({"decision": "decline"}));
        invalid(file, json!({"decision": "approved"}));
        let legacy = "execCommandApproval";
        valid(legacy, json!({"decision": {"denied": {"rejection": "no"}}}));
        invalid(legacy, json!({"decision": "denied"}));
        invalid(legacy, json!({"decision": "decline"}));
        valid("applyPatchApproval", json!({"decision": "abort"}));
    }

    #[test]
    fn a_permissions_request_is_answered_with_permissions_not_a_decision() {
        let method = "item/permissions/requestApproval";
        let (error, path) = invalid(method, json!({"decision": "decline"}));
        assert!(error.contains("permissions"), "{error}");
        assert_eq!(path, "");
        valid(method, json!({"permissions": {}}));
        valid(method, json!({"permissions": {}, "scope": "turn"}));
    }

    #[test]
    fn other_answers() {
        let tool = "item/tool/call";
        invalid(tool, json!({}));
        valid(tool, json!({"success": false, "contentItems": []}));
        valid(
            tool,
            json!({"success": true, "contentItems": [{"type": "inputText", "text": "ok"}]}),
        );
        let (_, path) = invalid(
            tool,
            json!({"success": true, "contentItems": [{"type": "inputText"}]}),
        );
        assert_eq!(path, "/contentItems/0");
        valid("item/tool/requestUserInput", json!({"answers": {}}));
        invalid("item/tool/requestUserInput", json!({"answers": ["x"]}));
        valid(
            "mcpServer/elicitation/request",
            json!({"action": "decline"}),
        );
        invalid(
            "mcpServer/elicitation/request",
            json!({"decision": "decline"}),
        );
        valid(
            "account/chatgptAuthTokens/refresh",
            json!({"accessToken": "a", "chatgptAccountId": "b"}),
        );
        invalid("account/chatgptAuthTokens/refresh", json!({}));
        valid("attestation/generate", json!({"token": "t"}));
        valid("currentTime/read", json!({"currentTimeAt": 1_700_000_000}));
        invalid("currentTime/read", json!({"currentTimeAt": "now"}));
        assert!(matches!(
            verdict("harness/unknownRequest", json!({})),
            SchemaVerdict::Unchecked { .. }
        ));
    }

    #[test]
    fn notifications_validate_and_extra_fields_are_counted() {
        let release = release("0.169.0").unwrap();
        let status = json!({"method": "thread/status/changed",
            "params": {"threadId": "t", "status": {"type": "idle"}}});
        assert!(release.notification_is_valid(&status));
        let odd = json!({"method": "thread/status/changed",
            "params": {"threadId": "t", "status": {"type": "somethingNew"}}});
        assert!(!release.notification_is_valid(&odd));
        assert_eq!(
            release.extra_params_fields(
                "thread/status/changed",
                &json!({"threadId": "t", "status": {}, "x-new": 1})
            ),
            Some(1)
        );
        assert_eq!(release.extra_params_fields("no/such", &json!({})), None);
    }
}
