//! JSON-RPC framing and the real server's error texts (measured with Codex 0.169.0); the lists
//! of methods and notifications are the persona's (`crate::persona`).

pub mod instances;
pub mod release_schema;
pub mod shapes;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// The error code Codex uses for every request it rejects.
pub const INVALID_REQUEST: i64 = -32600;
/// The error code Codex uses for a method it knows but does not serve in that state.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// The error code of internal failures (e.g. thread/start's sandbox helper failing).
pub const INTERNAL_ERROR: i64 = -32603;

/// Every client request method the played Codex knows, in the order its "unknown variant"
/// error lists them. Each persona's lists are checked against its real Codex at test time
/// (`harness/tests/needs_root_runc_codex/codex_protocol_lists.rs`); `harness drift` records
/// them for a new release.
pub fn client_methods() -> impl Iterator<Item = &'static str> {
    crate::persona::current().client_methods()
}

/// Every notification the played Codex can send (the `method` enums of its generated
/// `ServerNotification.json`).
pub fn server_notifications() -> impl Iterator<Item = &'static str> {
    crate::persona::current().server_notifications()
}

pub fn is_server_notification(method: &str) -> bool {
    crate::persona::current().is_server_notification(method)
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

impl RpcError {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            code: INVALID_REQUEST,
            message: message.into(),
        }
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: INTERNAL_ERROR,
            message: message.into(),
        }
    }
    pub fn to_json(&self) -> Value {
        json!({"code": self.code, "message": self.message})
    }
}

/// `Invalid request: unknown variant `X`, expected one of …`.
pub fn unknown_method(method: &str) -> RpcError {
    let expected = client_methods()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    RpcError::invalid(format!(
        "Invalid request: unknown variant `{method}`, expected one of {expected}"
    ))
}

pub fn is_client_method(method: &str) -> bool {
    crate::persona::current().is_client_method(method)
}

/// Parse request params into `T`, with serde's own texts behind `Invalid request: `.
pub fn parse_params<T: DeserializeOwned>(params: Option<&Value>) -> Result<T, RpcError> {
    let params =
        params.ok_or_else(|| RpcError::invalid("Invalid request: missing field `params`"))?;
    serde_json::from_value(params.clone())
        .map_err(|err| RpcError::invalid(format!("Invalid request: {err}")))
}

/// What one incoming line is.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    Notification {
        method: String,
        params: Option<Value>,
    },
    /// A response to one of the server's requests.
    Response { id: Value, message: Value },
    /// Valid JSON that is no JSON-RPC message.
    Invalid(String),
}

/// Classify one line. `Err` carries the JSON parse error (the real server logs it and goes on).
pub fn classify(line: &str) -> Result<Incoming, serde_json::Error> {
    let value: Value = serde_json::from_str(line)?;
    let Some(object) = value.as_object() else {
        return Ok(Incoming::Invalid("not a JSON object".into()));
    };
    let id = object
        .get("id")
        .filter(|id| id.is_string() || id.is_number())
        .cloned();
    let method = object
        .get("method")
        .and_then(Value::as_str)
        .map(str::to_string);
    let params = object.get("params").cloned();
    Ok(match (id, method) {
        (Some(id), Some(method)) => Incoming::Request { id, method, params },
        (None, Some(method)) => Incoming::Notification { method, params },
        (Some(id), None) if object.contains_key("result") || object.contains_key("error") => {
            Incoming::Response { id, message: value }
        }
        _ => Incoming::Invalid("neither a request, a notification nor a response".into()),
    })
}

/// A stable key for a JSON-RPC id (number or string).
pub fn id_key(id: &Value) -> String {
    id.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_variant_lists_every_method() {
        let err = unknown_method("no/such");
        assert!(err.message.starts_with("Invalid request: unknown variant `no/such`, expected one of `initialize`, `server/diagnostics`"));
        assert!(err.message.ends_with("`fuzzyFileSearch/sessionStop`"));
        assert_eq!(client_methods().count(), 187);
    }

    #[test]
    fn missing_params_and_type_errors_read_like_codex() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct P {
            cwd: Option<String>,
        }
        assert_eq!(
            parse_params::<P>(None).unwrap_err().message,
            "Invalid request: missing field `params`"
        );
        assert_eq!(
            parse_params::<P>(Some(&json!({"cwd": 5})))
                .unwrap_err()
                .message,
            "Invalid request: invalid type: integer `5`, expected a string"
        );
    }

    #[test]
    fn classify_lines() {
        assert!(classify("not json").is_err());
        assert!(matches!(
            classify(r#"{"id":1,"method":"x"}"#).unwrap(),
            Incoming::Request { .. }
        ));
        assert!(matches!(
            classify(r#"{"jsonrpc":"2.0","method":"initialized"}"#).unwrap(),
            Incoming::Notification { .. }
        ));
        assert!(matches!(
            classify(r#"{"id":0,"result":{}}"#).unwrap(),
            Incoming::Response { .. }
        ));
    }
}
