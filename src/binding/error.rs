//! How engine errors cross into JavaScript, and how panics are kept from crossing at all.
//!
//! A [`SessionError`] crosses as a napi error whose reason is a JSON object (`code`, `message`,
//! and the fields of its class: `sessionId`, `status`, `capacity`, `path`, `origin`). `index.js`
//! turns it into the matching class (`SessionNotFoundError`, ...) before any user sees it.

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use serde_json::{json, Map, Value};

use crate::engine::error::{panic_message, SessionError};

/// The napi error that carries `error` to `index.js`.
pub(crate) fn to_js(error: SessionError) -> napi::Error {
    let mut fields = Map::new();
    fields.insert("code".into(), json!(error.code()));
    fields.insert("message".into(), json!(error.to_string()));
    match &error {
        SessionError::NotFound { session_id } => {
            fields.insert("sessionId".into(), json!(session_id));
        }
        SessionError::AlreadyExists { session_id, status }
        | SessionError::Conflict {
            session_id, status, ..
        } => {
            fields.insert("sessionId".into(), json!(session_id));
            fields.insert("status".into(), json!(status.as_str()));
        }
        SessionError::Capacity { capacity } => {
            fields.insert("capacity".into(), json!(capacity));
        }
        SessionError::Input { path, .. } => {
            fields.insert("path".into(), json!(path));
        }
        SessionError::Host {
            origin: Some(origin),
            ..
        } => {
            fields.insert("origin".into(), json!(origin));
        }
        SessionError::Host { origin: None, .. }
        | SessionError::ShutDown
        | SessionError::Internal { .. } => {}
    }
    napi::Error::new(
        napi::Status::GenericFailure,
        Value::Object(fields).to_string(),
    )
}

/// Runs `future` so that an engine error becomes its JavaScript error, and a panic an internal
/// error rather than an aborted process.
pub(crate) async fn guard<T, F>(future: F) -> napi::Result<T>
where
    F: Future<Output = Result<T, SessionError>>,
{
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(to_js(error)),
        Err(payload) => Err(to_js(SessionError::internal(panic_message(&*payload)))),
    }
}

/// Runs `f` so that an engine error becomes its JavaScript error and a panic an internal error.
pub(crate) fn guard_sync<T>(f: impl FnOnce() -> Result<T, SessionError>) -> napi::Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(to_js(error)),
        Err(payload) => Err(to_js(SessionError::internal(panic_message(&*payload)))),
    }
}
