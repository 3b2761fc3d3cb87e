//! What crosses between instances: an engine error as JSON and back, so that the answer of a
//! command the owner ran reaches its caller on another instance as the same error.

use serde_json::{json, Map, Value};

use crate::engine::error::SessionError;
use crate::engine::session::SessionStatus;

/// `error` as JSON: `{ code, message, sessionId?, status?, capacity?, path? }`. An application's
/// original error (`origin`) stays in its process: only its message crosses.
pub fn error_to_wire(error: &SessionError) -> Value {
    let mut fields = Map::new();
    fields.insert("code".into(), json!(error.code()));
    fields.insert("message".into(), json!(error.to_string()));
    match error {
        SessionError::NotFound { session_id } | SessionError::LeaseLost { session_id } => {
            fields.insert("sessionId".into(), json!(session_id));
        }
        SessionError::AlreadyExists { session_id, status } => {
            fields.insert("sessionId".into(), json!(session_id));
            fields.insert("status".into(), json!(status));
            fields.insert("exists".into(), json!(true));
        }
        SessionError::Conflict {
            session_id, status, ..
        } => {
            fields.insert("sessionId".into(), json!(session_id));
            fields.insert("status".into(), json!(status));
        }
        SessionError::Capacity { capacity } => {
            fields.insert("capacity".into(), json!(capacity));
        }
        SessionError::Input { path, .. } => {
            fields.insert("path".into(), json!(path));
        }
        SessionError::CutBeforeStart
        | SessionError::ShutDown
        | SessionError::Host { .. }
        | SessionError::StoreUnavailable { .. }
        | SessionError::Internal { .. } => {}
    }
    Value::Object(fields)
}

/// The error [`error_to_wire`] wrote; anything unreadable becomes an internal error.
pub fn error_from_wire(value: &Value) -> SessionError {
    let text = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let message = text("message").unwrap_or_else(|| "An instance failed.".to_owned());
    let session_id = text("sessionId").unwrap_or_default();
    let status = value
        .get("status")
        .and_then(|s| serde_json::from_value::<SessionStatus>(s.clone()).ok());
    match (text("code").as_deref(), status) {
        (Some("SESSION_NOT_FOUND"), _) => SessionError::NotFound { session_id },
        (Some("SESSION_LEASE_LOST"), _) => SessionError::LeaseLost { session_id },
        (Some("SESSION_CONFLICT"), Some(status)) if value.get("exists").is_some() => {
            SessionError::AlreadyExists { session_id, status }
        }
        (Some("SESSION_CONFLICT"), Some(status)) => SessionError::Conflict {
            session_id,
            status,
            message,
        },
        (Some("SESSION_CAPACITY"), _) => SessionError::Capacity {
            capacity: value
                .get("capacity")
                .and_then(Value::as_u64)
                .and_then(|c| u32::try_from(c).ok())
                .unwrap_or(0),
        },
        (Some("SESSION_INPUT"), _) => SessionError::Input {
            path: text("path").unwrap_or_default(),
            message,
        },
        (Some("SESSION_CUT_BEFORE_START"), _) => SessionError::CutBeforeStart,
        (Some("SESSION_SHUT_DOWN"), _) => SessionError::ShutDown,
        (Some("SESSION_STORE_UNAVAILABLE"), _) => SessionError::StoreUnavailable { message },
        (Some("SESSION_HOST"), _) => SessionError::Host {
            message,
            origin: None,
        },
        _ => SessionError::Internal { message },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_crosses_as_itself() {
        let errors = [
            SessionError::NotFound {
                session_id: "s".into(),
            },
            SessionError::LeaseLost {
                session_id: "s".into(),
            },
            SessionError::AlreadyExists {
                session_id: "s".into(),
                status: SessionStatus::Idle,
            },
            SessionError::in_status("s", SessionStatus::Busy, None),
            SessionError::Capacity { capacity: 3 },
            SessionError::input("message.parts[0]", "message.parts[0] is wrong"),
            SessionError::CutBeforeStart,
            SessionError::ShutDown,
            SessionError::host("the agent failed"),
            SessionError::StoreUnavailable {
                message: "the server refused".into(),
            },
            SessionError::internal("a bug"),
        ];
        for error in errors {
            assert_eq!(error_from_wire(&error_to_wire(&error)), error);
        }
    }

    #[test]
    fn an_unreadable_answer_is_an_internal_error() {
        assert!(matches!(
            error_from_wire(&json!(7)),
            SessionError::Internal { .. }
        ));
    }
}
