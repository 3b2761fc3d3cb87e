//! The host: the one JavaScript function the binding calls to reach what the application supplied.
//!
//! `js/host.js` hands the binding a function `host(call)`; every call the engine makes into
//! JavaScript (an agent's `createSession`, a store's `save`, a chunk for a client, an event) goes
//! through it, as one [`HostOp`] in JSON (see [`super::protocol`]), in order. It answers with a
//! promise of a JSON text: `{"ok":true,"value":...}` or `{"ok":false,"error":{"message":...,
//! "origin":n}}`, where `origin` numbers the original JavaScript error, kept on that side. One
//! function, so one queue: what the engine sends arrives in the order it was sent.
//!
//! The function is held weakly: it never keeps Node's event loop alive by itself.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use napi::bindgen_prelude::{Function, Promise};
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi::Status;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::protocol::{op_name, HostOp};
use crate::engine::error::{Result, SessionError};

type HostFunction = ThreadsafeFunction<String, Promise<String>, String, Status, false, true>;

/// The function `host(call)` JavaScript hands the binding, `call` the JSON text of a [`HostOp`].
pub(crate) type HostFn<'a> = Function<'a, String, Promise<String>>;

/// The JavaScript host of one manager, or of one sandbox strategy.
pub(crate) struct Host {
    function: HostFunction,
    /// How many calls and notifications were ever queued.
    queued: AtomicU64,
    /// How many of them JavaScript was handed.
    handed: Arc<AtomicU64>,
}

/// What [`Host::capture`] keeps: whose it is, the notifications kept, and whether something was
/// queued meanwhile (a call, and what was kept before it).
struct Capture {
    host: usize,
    kept: Vec<String>,
    queued: bool,
}

thread_local! {
    /// The notifications made on this thread while a call runs on Node's thread
    /// ([`Host::capture`]): handed to JavaScript by the caller, in order, rather than queued.
    static CAPTURED: RefCell<Option<Capture>> = const { RefCell::new(None) };
}

impl Host {
    /// Wraps the JavaScript function `host(call)`.
    pub(crate) fn new(function: HostFn<'_>) -> napi::Result<Host> {
        let handed = Arc::new(AtomicU64::new(0));
        let counter = handed.clone();
        let function = function
            .build_threadsafe_function()
            .callee_handled::<false>()
            .weak::<true>()
            .build_callback(move |context| {
                counter.fetch_add(1, Ordering::SeqCst);
                Ok(context.value)
            })?;
        Ok(Host {
            function,
            queued: AtomicU64::new(0),
            handed,
        })
    }

    /// A mark of what was queued so far, for [`Host::handed_up_to`].
    pub(crate) fn mark(&self) -> u64 {
        self.queued.load(Ordering::SeqCst)
    }

    /// Whether JavaScript was handed everything queued before `mark` was taken.
    pub(crate) fn handed_up_to(&self, mark: u64) -> bool {
        self.handed.load(Ordering::SeqCst) >= mark
    }

    /// Runs `f` with the notifications it makes on this thread kept rather than queued (until it
    /// makes a call: those before are queued then, in order); returns what `f` gave, and the
    /// notifications kept, as JSON texts in order.
    /// Whether `f` queued anything for JavaScript meanwhile is the third of what it returns.
    pub(crate) fn capture<T>(&self, f: impl FnOnce() -> T) -> (T, Vec<String>, bool) {
        let outer = CAPTURED.with(|captured| {
            captured.borrow_mut().replace(Capture {
                host: self.key(),
                kept: Vec::new(),
                queued: false,
            })
        });
        let value = f();
        let capture =
            CAPTURED.with(|captured| std::mem::replace(&mut *captured.borrow_mut(), outer));
        match capture {
            Some(capture) => (value, capture.kept, capture.queued),
            None => (value, Vec::new(), true),
        }
    }

    /// What tells this host from another on the same thread.
    fn key(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }

    /// Queues notifications (JSON texts of [`HostOp`]s) in order.
    pub(crate) fn queue(&self, calls: Vec<String>) {
        for call in calls {
            self.enqueue(call);
        }
    }

    fn enqueue(&self, call: String) {
        self.queued.fetch_add(1, Ordering::SeqCst);
        self.function
            .call(call, ThreadsafeFunctionCallMode::NonBlocking);
    }

    /// What was kept on this thread so far is queued: a call must not overtake it.
    fn release_captured(&self) {
        let kept = CAPTURED.with(|captured| match captured.borrow_mut().as_mut() {
            Some(capture) if capture.host == self.key() => {
                capture.queued = true;
                Some(std::mem::take(&mut capture.kept))
            }
            _ => None,
        });
        if let Some(kept) = kept {
            self.queue(kept);
        }
    }

    /// Asks JavaScript for `op`, and reads its answer as a `T`.
    ///
    /// # Errors
    /// What the JavaScript side failed with, as [`SessionError::Host`] with its original error;
    /// an answer of the wrong shape, as [`SessionError::Host`].
    pub(crate) async fn call<T: DeserializeOwned>(&self, op: HostOp<'_>) -> Result<T> {
        let call = op.to_json();
        let text = self.send(&call).await?;
        serde_json::from_str(&text).map_err(|e| {
            SessionError::host(format!(
                "the answer to {} is not of the right shape: {e}",
                op_name(&call)
            ))
        })
    }

    /// Asks JavaScript for `op`, and gives its answer's value as JSON text, for the caller to
    /// read into its own type (records keep their messages as text).
    ///
    /// # Errors
    /// What the JavaScript side failed with, as [`SessionError::Host`] with its original error.
    pub(crate) async fn call_raw(&self, op: HostOp<'_>) -> Result<String> {
        self.send(&op.to_json()).await
    }

    async fn send(&self, call: &str) -> Result<String> {
        #[derive(serde::Deserialize)]
        struct Answer<'a> {
            ok: bool,
            #[serde(borrow, default)]
            value: Option<&'a serde_json::value::RawValue>,
            #[serde(default)]
            error: Option<Value>,
        }
        let op = op_name(call);
        self.release_captured();
        self.queued.fetch_add(1, Ordering::SeqCst);
        let promise = self
            .function
            .call_async_catch(call.to_owned())
            .await
            .map_err(|e| lost(op, &e.reason))?;
        let text = promise.await.map_err(|e| lost(op, &e.reason))?;
        let answer: Answer<'_> = serde_json::from_str(&text).map_err(|e| {
            SessionError::internal(format!("the host answered {op} with no JSON: {e}"))
        })?;
        if !answer.ok {
            return Err(host_error(answer.error.as_ref()));
        }
        Ok(answer
            .value
            .map_or_else(|| "null".to_owned(), |v| v.get().to_owned()))
    }

    /// Sends `op` without waiting: events, chunks for a client.
    pub(crate) fn notify(&self, op: HostOp<'_>) {
        let call = op.to_json();
        let call = CAPTURED.with(|captured| match captured.borrow_mut().as_mut() {
            Some(capture) if capture.host == self.key() => {
                capture.kept.push(call);
                None
            }
            _ => Some(call),
        });
        if let Some(call) = call {
            self.enqueue(call);
        }
    }
}

/// The error a failed host operation reported.
pub(crate) fn host_error(error: Option<&Value>) -> SessionError {
    let (message, origin) = host_failure(error);
    SessionError::Host { message, origin }
}

/// The message and original error of a failure JavaScript reported.
pub(crate) fn host_failure(error: Option<&Value>) -> (String, Option<u64>) {
    let message = error
        .and_then(|e| e.get("message"))
        .and_then(Value::as_str)
        .unwrap_or("an application callback failed")
        .to_owned();
    let origin = error.and_then(|e| e.get("origin")).and_then(Value::as_u64);
    (message, origin)
}

fn lost(op: &str, reason: &str) -> SessionError {
    SessionError::internal(format!(
        "the JavaScript side of {op} could not be reached: {reason}"
    ))
}
