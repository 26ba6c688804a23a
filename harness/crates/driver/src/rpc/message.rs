//! Classifying JSON-RPC lines. Server requests carry their own small integer ids that can
//! collide with the client's, so a message is a request when it has a `method` *and* an `id`,
//! a notification when it has only a `method`, and a response when it has no `method`.

use serde_json::Value;

/// A JSON-RPC error object, verbatim.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JSON-RPC error {}: {}", self.code, self.message)
    }
}

/// One message from the server.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to one of the client's requests.
    Response {
        id: Value,
        result: Result<Value, RpcError>,
    },
    Notification {
        method: String,
        params: Value,
    },
    /// A request the client must answer (approvals, dynamic tool calls, …).
    Request {
        id: Value,
        method: String,
        params: Value,
    },
}

impl Incoming {
    /// The method of a notification or request.
    pub fn method(&self) -> Option<&str> {
        match self {
            Incoming::Notification { method, .. } | Incoming::Request { method, .. } => {
                Some(method)
            }
            Incoming::Response { .. } => None,
        }
    }
}

/// Why a line is not a JSON-RPC message.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum MalformedMessage {
    #[error("not JSON: {0}")]
    NotJson(String),
    #[error("not a JSON object")]
    NotObject,
    #[error("`method` is not a string")]
    MethodNotString,
    #[error("a response without an `id`")]
    ResponseWithoutId,
    #[error("a response with neither `result` nor `error`")]
    ResponseWithoutOutcome,
    #[error("`error` is not an object with an integer `code` and a string `message`")]
    BadError,
}

pub(crate) fn parse_line(line: &str) -> Result<Incoming, MalformedMessage> {
    let value: Value =
        serde_json::from_str(line).map_err(|e| MalformedMessage::NotJson(e.to_string()))?;
    let Value::Object(mut obj) = value else {
        return Err(MalformedMessage::NotObject);
    };
    if let Some(method) = obj.remove("method") {
        let Value::String(method) = method else {
            return Err(MalformedMessage::MethodNotString);
        };
        let params = obj.remove("params").unwrap_or(Value::Null);
        return Ok(match obj.remove("id") {
            Some(id) if !id.is_null() => Incoming::Request { id, method, params },
            _ => Incoming::Notification { method, params },
        });
    }
    let id = obj
        .remove("id")
        .ok_or(MalformedMessage::ResponseWithoutId)?;
    if let Some(result) = obj.remove("result") {
        return Ok(Incoming::Response {
            id,
            result: Ok(result),
        });
    }
    let error = obj
        .remove("error")
        .ok_or(MalformedMessage::ResponseWithoutOutcome)?;
    let code = error["code"].as_i64().ok_or(MalformedMessage::BadError)?;
    let message = error["message"]
        .as_str()
        .ok_or(MalformedMessage::BadError)?
        .to_string();
    let data = error.get("data").cloned();
    Ok(Incoming::Response {
        id,
        result: Err(RpcError {
            code,
            message,
            data,
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn server_requests_are_told_apart_by_method_even_when_ids_collide() {
        let req = parse_line(r#"{"id":1,"method":"item/tool/call","params":{"a":1}}"#).unwrap();
        assert!(matches!(req, Incoming::Request { ref method, .. } if method == "item/tool/call"));
        let resp = parse_line(r#"{"id":1,"result":{"ok":true}}"#).unwrap();
        assert_eq!(
            resp,
            Incoming::Response {
                id: json!(1),
                result: Ok(json!({"ok": true}))
            }
        );
        let note = parse_line(r#"{"method":"turn/started","params":{}}"#).unwrap();
        assert!(matches!(note, Incoming::Notification { .. }));
    }

    #[test]
    fn errors_and_malformed_lines() {
        let err = parse_line(r#"{"id":4,"error":{"code":-32600,"message":"nope"}}"#).unwrap();
        assert!(matches!(
            err,
            Incoming::Response {
                result: Err(RpcError { code: -32600, .. }),
                ..
            }
        ));
        assert!(matches!(
            parse_line("{oops"),
            Err(MalformedMessage::NotJson(_))
        ));
        assert_eq!(parse_line("[1]"), Err(MalformedMessage::NotObject));
        assert_eq!(
            parse_line(r#"{"id":1}"#),
            Err(MalformedMessage::ResponseWithoutOutcome)
        );
        assert_eq!(
            parse_line(r#"{"result":1}"#),
            Err(MalformedMessage::ResponseWithoutId)
        );
        assert_eq!(
            parse_line(r#"{"id":1,"error":{"code":"x","message":"m"}}"#),
            Err(MalformedMessage::BadError)
        );
    }
}
