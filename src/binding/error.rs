//! How engine errors cross into JavaScript, and how panics are kept from crossing at all.
//!
//! A [`SessionError`] crosses as data: a JavaScript `Error` whose `message` is the error's text,
//! `code` its stable code (`SESSION_NOT_FOUND`, ...) and `details` the fields of its class
//! (`sessionId`, `status`, `capacity`, `path`, `origin`). `js/errors.js` (`fromNative`) turns it
//! into the matching class (`SessionNotFoundError`, ...) before any user sees it.
//!
//! The object is made on Node's thread: an async entry point gives a [`Settled`], whose
//! conversion builds it (a rejection of the very object); a synchronous one builds it at once
//! ([`guard_sync`], with the call's `Env`).

use std::future::Future;
use std::panic::AssertUnwindSafe;

use futures::FutureExt;
use napi::bindgen_prelude::{ToNapiValue, TypeName, ValidateNapiValue};
use napi::{sys, Env, ValueType};
use serde_json::{json, Map, Value};

use crate::engine::error::{panic_message, SessionError};

/// The fields of `error`'s class, for `details`.
fn details(error: &SessionError) -> Map<String, Value> {
    let mut fields = Map::new();
    match error {
        SessionError::NotFound { session_id } | SessionError::LeaseLost { session_id } => {
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
        | SessionError::CutBeforeStart
        | SessionError::StoreUnavailable { .. }
        | SessionError::Internal { .. } => {}
    }
    fields
}

/// `error` as data, for the host (`onError`, `errorMessage`): `{ code, message, ...details }`,
/// what `js/errors.js` (`fromDetails`) reads.
pub(crate) fn error_data(error: &SessionError) -> Value {
    let mut fields = details(error);
    fields.insert("code".into(), json!(error.code()));
    fields.insert("message".into(), json!(error.to_string()));
    Value::Object(fields)
}

/// The JavaScript error that carries `error`: `{ message, code, details }`, as a napi error that
/// hands back that very object.
fn to_js(env: &Env, error: &SessionError) -> napi::Error {
    let build = || -> napi::Result<napi::Error> {
        let mut object = env.create_error(napi::Error::from_reason(error.to_string()))?;
        object.set("code", error.code())?;
        object.set("details", Value::Object(details(error)))?;
        Ok(napi::Error::from(object.into_unknown(env)?))
    };
    build().unwrap_or_else(|e| e)
}

/// What an async entry point gives JavaScript: its value, or the engine's error, which
/// rejects its promise as the object [`to_js`] builds.
pub struct Settled<T>(Result<T, SessionError>);

/// `Settled<T>` as `binding.d.ts` names it: the value itself (a failure rejects the promise).
#[napi_derive::napi(js_name = "Settled<T>")]
#[allow(dead_code)]
pub type SettledValue<T> = T;

impl<T> Settled<T> {
    /// The value, or the engine's error as the JavaScript error [`to_js`] builds, on Node's
    /// thread (`env` the call's): for a call answered at once.
    pub(crate) fn now(self, env: &Env) -> napi::Result<T> {
        self.0.map_err(|error| to_js(env, &error))
    }
}

impl<T> From<Result<T, SessionError>> for Settled<T> {
    fn from(result: Result<T, SessionError>) -> Self {
        Settled(result)
    }
}

impl<T: ToNapiValue> ToNapiValue for Settled<T> {
    unsafe fn to_napi_value(env: sys::napi_env, value: Self) -> napi::Result<sys::napi_value> {
        match value.0 {
            // SAFETY: napi calls this on Node's thread with its `env`, as it would for `T`.
            Ok(value) => unsafe { T::to_napi_value(env, value) },
            Err(error) => Err(to_js(&Env::from_raw(env), &error)),
        }
    }
}

impl<T: TypeName> TypeName for Settled<T> {
    fn type_name() -> &'static str {
        T::type_name()
    }

    fn value_type() -> ValueType {
        T::value_type()
    }
}

impl<T: ValidateNapiValue> ValidateNapiValue for Settled<T> {}

/// Runs `future` so that an engine error becomes its JavaScript error, and a panic an internal
/// error rather than an aborted process.
pub(crate) async fn guard<T, F>(future: F) -> Settled<T>
where
    F: Future<Output = Result<T, SessionError>>,
{
    match AssertUnwindSafe(future).catch_unwind().await {
        Ok(result) => Settled(result),
        Err(payload) => Settled(Err(SessionError::internal(panic_message(&*payload)))),
    }
}

/// Runs `f` so that an engine error becomes its JavaScript error and a panic an internal error;
/// `env` is the call's.
pub(crate) fn guard_sync<T>(
    env: &Env,
    f: impl FnOnce() -> Result<T, SessionError>,
) -> napi::Result<T> {
    match std::panic::catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(error)) => Err(to_js(env, &error)),
        Err(payload) => Err(to_js(
            env,
            &SessionError::internal(panic_message(&*payload)),
        )),
    }
}
