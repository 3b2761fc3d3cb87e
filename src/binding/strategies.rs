//! The session strategies in JavaScript: `sharedSandbox()` and `sandboxPerSession()` as one napi
//! class, [`NativeSessionSandboxes`], around the engine's [`SharedSandbox`] and
//! [`SandboxPerSession`].
//!
//! `js/strategies.js` builds the public objects on it. Each strategy has a host function of its
//! own (`host(op, payload)`, the protocol of [`Host`]) through which the engine reaches the
//! application's `open`, `create` and `resume` and the JavaScript sandboxes they give:
//!
//! | op        | payload                          | answer                                   |
//! | --------- | -------------------------------- | ---------------------------------------- |
//! | `open`    | `{}`                             | `{ sandbox: h }` or `{ native: a }`      |
//! | `create`  | `{ sessionId }`                  | `{ sandbox: h }` or `{ native: a }`      |
//! | `resume`  | `{ sessionId }`                  | the same, or `null` when there is none   |
//! | `fork`    | `{ sandbox: h, sessionId, port }`| `{ sandbox: h }` or `{ native: a }`      |
//! | `release`, `stop`, `destroy` | `{ sandbox: h }`      | `null`                                   |
//! | `forget`  | `{ sandbox: h }` (not awaited)   |                                          |
//!
//! `h` numbers a JavaScript object kept in JavaScript; `a` a [`NativeSandboxSession`] JavaScript
//! handed over with [`NativeSessionSandboxes::adopt`]: from then on it is driven natively (a
//! `dockerSandbox()` sandbox is forked in Rust, with no crossing). A provider given natively
//! (`sandboxPerSession({ provider: dockerSandbox() })`) is never reached through the host.
//!
//! The sandboxes handed to agents, native or kept in JavaScript ([`HandedSandbox`]), are numbered
//! in the strategy's [`Handouts`] while their lease holds them (the number of their
//! [`SandboxRef`]): the engine holds only the reference. JavaScript gets the object of a number
//! with [`NativeSessionSandboxes::native_sandbox`] or [`NativeSessionSandboxes::js_sandbox`].

// Exports are reached from JavaScript, not from Rust: `pub` is what napi needs of them.
#![allow(unreachable_pub)]
// Test builds do not register napi exports, so the free functions look unused there.
#![cfg_attr(test, allow(dead_code))]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use async_trait::async_trait;
use napi::bindgen_prelude::{Function, Promise};
use napi::Env;
use napi_derive::napi;
use serde::Deserialize;

use super::error::{guard, guard_sync, Settled};
use super::host::Host;
use super::protocol::{HostOp, SandboxGiven};
use super::sandbox::{NativeSandboxProvider, NativeSandboxSession};
use crate::engine::error::{Result, SessionError};
use crate::engine::input::{self, Count, Flag, GivenText, Port};
use crate::engine::lease::{Lease, SandboxRef, SessionSandboxes};
use crate::engine::sandbox::handout::{HandedOut, Handouts, SandboxHandouts};
use crate::engine::sandbox::per_session::{ProviderMaker, SandboxMaker, SandboxPerSession};
use crate::engine::sandbox::shared::{
    HeldSandbox, NativeSandbox, SandboxOpener, SharedSandbox, SharedSandboxOptions, PORTS_MESSAGE,
};
use crate::engine::sandbox::SandboxSession;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A sandbox handed to an agent, as JavaScript gets it back by its number.
#[derive(Clone)]
enum HandedSandbox {
    /// One of the engine's own sandbox sessions.
    Native(Arc<dyn SandboxSession>),
    /// A JavaScript object, by the number its strategy keeps it under in JavaScript.
    Js(u64),
}

impl SandboxHandouts for Handouts<HandedSandbox> {
    fn hand_out(&self, session: Arc<dyn SandboxSession>) -> HandedOut {
        self.register(HandedSandbox::Native(session))
    }
}

/// What a strategy shares with the sandboxes it holds: its host, the sandboxes it handed out, and
/// the native sessions JavaScript handed over and Rust has not taken yet.
struct Kit {
    host: Arc<Host>,
    handouts: Handouts<HandedSandbox>,
    adopted: Mutex<HashMap<u64, Arc<dyn SandboxSession>>>,
    next_adopted: AtomicU64,
}

impl Kit {
    /// The engine's view of the sandboxes handed out.
    fn native_handouts(&self) -> Arc<dyn SandboxHandouts> {
        Arc::new(self.handouts.clone())
    }

    /// The sandbox a host answer names; numbered among the handouts when it is `handed_out`.
    fn held(
        self: &Arc<Self>,
        given: SandboxGiven,
        handed_out: bool,
        op: &str,
    ) -> Result<Arc<dyn HeldSandbox>> {
        let handle = match given {
            SandboxGiven::Sandbox(handle) => handle,
            SandboxGiven::Native(number) => {
                let session = lock(&self.adopted).remove(&number).ok_or_else(|| {
                    SessionError::internal(format!("{op} named a sandbox that was not handed over"))
                })?;
                let handouts = self.native_handouts();
                return Ok(Arc::new(if handed_out {
                    NativeSandbox::handed_out(session, handouts)
                } else {
                    NativeSandbox::kept(session, handouts)
                }));
            }
        };
        let handed_out = handed_out.then(|| self.handouts.register(HandedSandbox::Js(handle)));
        Ok(Arc::new(JsSandbox {
            kit: self.clone(),
            handle,
            handed_out,
        }))
    }
}

/// A sandbox, or a view of one, kept in JavaScript and driven through the strategy's host.
struct JsSandbox {
    kit: Arc<Kit>,
    handle: u64,
    handed_out: Option<HandedOut>,
}

#[async_trait]
impl HeldSandbox for JsSandbox {
    fn sandbox_ref(&self) -> SandboxRef {
        self.handed_out
            .as_ref()
            .map_or(SandboxRef::NONE, HandedOut::sandbox_ref)
    }

    async fn fork(&self, session_id: &str, port: u16) -> Result<Arc<dyn HeldSandbox>> {
        let op = HostOp::SandboxFork {
            sandbox: self.handle,
            session_id,
            port,
        };
        let given = self.kit.host.call(op).await?;
        self.kit.held(given, true, "fork()")
    }

    async fn release(&self) -> Result<()> {
        let op = HostOp::SandboxRelease {
            sandbox: self.handle,
        };
        self.kit.host.call(op).await
    }

    async fn stop(&self) -> Result<()> {
        let op = HostOp::SandboxStop {
            sandbox: self.handle,
        };
        self.kit.host.call(op).await
    }

    async fn destroy(&self) -> Result<()> {
        let op = HostOp::SandboxDestroy {
            sandbox: self.handle,
        };
        self.kit.host.call(op).await
    }
}

impl Drop for JsSandbox {
    fn drop(&mut self) {
        self.kit.host.notify(HostOp::SandboxForget {
            sandbox: self.handle,
        });
    }
}

/// `sharedSandbox({ open })`: the application's `open`.
struct JsOpener {
    kit: Arc<Kit>,
}

#[async_trait]
impl SandboxOpener for JsOpener {
    async fn open(&self) -> Result<Arc<dyn HeldSandbox>> {
        let given = self.kit.host.call(HostOp::SandboxOpen).await?;
        self.kit.held(given, false, "open()")
    }
}

/// `sandboxPerSession({ create, resume })`: the application's functions.
struct JsMaker {
    kit: Arc<Kit>,
}

#[async_trait]
impl SandboxMaker for JsMaker {
    async fn create(&self, session_id: &str) -> Result<Arc<dyn HeldSandbox>> {
        let given = self
            .kit
            .host
            .call(HostOp::SandboxCreate { session_id })
            .await?;
        self.kit.held(given, true, "create()")
    }

    async fn resume(&self, session_id: &str) -> Result<Option<Arc<dyn HeldSandbox>>> {
        let given: Option<SandboxGiven> = self
            .kit
            .host
            .call(HostOp::SandboxResume { session_id })
            .await?;
        match given {
            Some(given) => self.kit.held(given, true, "resume()").map(Some),
            None => Ok(None),
        }
    }
}

/// The options of `sharedSandbox()` as `js/strategies.js` passes them, `open` taken out.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SharedInit {
    #[serde(default)]
    ports: Vec<Port>,
    #[serde(default, deserialize_with = "input::present")]
    stop_when_unused: Option<Flag>,
}

/// The options of `sandboxPerSession()`, `create`, `resume` and `provider` taken out.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct PerSessionInit {
    #[serde(default, deserialize_with = "input::present")]
    max_sessions: Option<Count<1>>,
}

/// The options of `sharedSandbox()`. Ports that are not a list are refused as missing ones are,
/// with [`PORTS_MESSAGE`]; emptiness and repeats are the engine's to refuse.
fn shared_options(json: &str) -> Result<SharedSandboxOptions> {
    let init: SharedInit =
        input::read_json(json, "options", "sharedSandbox()").map_err(|error| match error {
            SessionError::Input { path, .. } if path == "ports" => {
                SessionError::input("ports", PORTS_MESSAGE)
            }
            other => other,
        })?;
    Ok(SharedSandboxOptions {
        ports: input::ports(init.ports),
        stop_when_unused: init.stop_when_unused.is_some_and(|Flag(flag)| flag),
    })
}

fn kit(host: Function<'_, String, Promise<String>>) -> napi::Result<Arc<Kit>> {
    Ok(Arc::new(Kit {
        host: Arc::new(Host::new(host)?),
        handouts: Handouts::new(),
        adopted: Mutex::new(HashMap::new()),
        next_adopted: AtomicU64::new(1),
    }))
}

/// `sharedSandbox({ ports, stopWhenUnused })`, its `open` reached through `host`. Empty or
/// repeated ports are refused at once (`js/strategies.js` throws them as a `TypeError`).
#[napi]
pub fn create_shared_sandbox(
    env: Env,
    host: Function<'_, String, Promise<String>>,
    options_json: String,
) -> napi::Result<NativeSessionSandboxes> {
    let kit = kit(host)?;
    guard_sync(&env, || {
        let options = shared_options(&options_json)?;
        let opener = Arc::new(JsOpener { kit: kit.clone() });
        let strategy = SharedSandbox::new(opener, options)?;
        Ok(NativeSessionSandboxes {
            strategy: Arc::new(strategy),
            kit,
        })
    })
}

/// `sandboxPerSession({ maxSessions })`: its sandboxes made by `provider` natively when it is
/// given, else by the application's `create` and `resume` reached through `host`.
#[napi]
pub fn create_sandbox_per_session(
    env: Env,
    host: Function<'_, String, Promise<String>>,
    options_json: String,
    provider: Option<&NativeSandboxProvider>,
) -> napi::Result<NativeSessionSandboxes> {
    let kit = kit(host)?;
    guard_sync(&env, || {
        let init: PerSessionInit =
            input::read_json(&options_json, "options", "sandboxPerSession()")?;
        let max_sessions = init.max_sessions.map(|Count(max)| max);
        let maker: Arc<dyn SandboxMaker> = match provider {
            Some(provider) => Arc::new(ProviderMaker::new(
                provider.provider(),
                kit.native_handouts(),
            )),
            None => Arc::new(JsMaker { kit: kit.clone() }),
        };
        let strategy = SandboxPerSession::new(maker, max_sessions)?;
        Ok(NativeSessionSandboxes {
            strategy: Arc::new(strategy),
            kit,
        })
    })
}

/// A strategy of the engine's own: `sharedSandbox()` or `sandboxPerSession()`.
#[napi]
pub struct NativeSessionSandboxes {
    strategy: Arc<dyn SessionSandboxes>,
    kit: Arc<Kit>,
}

impl NativeSessionSandboxes {
    /// The engine's strategy, for a manager to use directly.
    pub(crate) fn strategy(&self) -> Arc<dyn SessionSandboxes> {
        self.strategy.clone()
    }
}

#[napi]
impl NativeSessionSandboxes {
    /// How many sessions can hold a sandbox at once; `null` when unbounded.
    #[napi(getter)]
    pub fn capacity(&self) -> Option<u32> {
        self.strategy.capacity()
    }

    /// How many sandboxes are handed out now (held by a lease).
    #[napi(getter)]
    pub fn handed_out(&self) -> u32 {
        u32::try_from(self.kit.handouts.len()).unwrap_or(u32::MAX)
    }

    /// A sandbox for session `sessionId` (`resume` when it comes back from suspended).
    #[napi]
    pub async fn acquire(
        &self,
        #[napi(ts_arg_type = "unknown")] session_id: GivenText,
        resume: Option<bool>,
    ) -> Settled<NativeLease> {
        let strategy = self.strategy.clone();
        guard(async move {
            let session_id = input::session_id(session_id, "sessionId")?;
            let lease = strategy
                .acquire(&session_id, resume.unwrap_or(false))
                .await?;
            Ok(NativeLease::new(lease))
        })
        .await
    }

    /// Frees what is kept for suspended session `sessionId`, which ends.
    #[napi]
    pub async fn discard(
        &self,
        #[napi(ts_arg_type = "unknown")] session_id: GivenText,
    ) -> Settled<()> {
        let strategy = self.strategy.clone();
        guard(async move {
            let session_id = input::session_id(session_id, "sessionId")?;
            strategy.discard(&session_id).await
        })
        .await
    }

    /// Stops what the strategy keeps running.
    #[napi]
    pub async fn shutdown(&self) -> Settled<()> {
        let strategy = self.strategy.clone();
        guard(async move { strategy.shutdown().await }).await
    }

    /// The native sandbox handed out as number `number`, as a new JavaScript object over it.
    #[napi]
    pub fn native_sandbox(&self, number: u32) -> Option<NativeSandboxSession> {
        match self
            .kit
            .handouts
            .get(&SandboxRef::handle(u64::from(number)))
        {
            Some(HandedSandbox::Native(session)) => Some(NativeSandboxSession::new(session)),
            _ => None,
        }
    }

    /// The JavaScript handle of the sandbox handed out as number `number`, when it is one.
    #[napi]
    pub fn js_sandbox(&self, number: u32) -> Option<u32> {
        match self
            .kit
            .handouts
            .get(&SandboxRef::handle(u64::from(number)))
        {
            Some(HandedSandbox::Js(handle)) => u32::try_from(handle).ok(),
            _ => None,
        }
    }

    /// Hands `session` over, to be driven natively: the number a host answer names it by
    /// (`{ native: n }`).
    #[napi]
    pub fn adopt(&self, session: &NativeSandboxSession) -> u32 {
        let number = self.kit.next_adopted.fetch_add(1, Ordering::Relaxed);
        lock(&self.kit.adopted).insert(number, session.session());
        u32::try_from(number).unwrap_or(u32::MAX)
    }
}

/// A session's hold on its sandbox, for JavaScript that uses a strategy directly. `suspend` and
/// `close` may be called again, in any order: what each does then is the strategy's (a
/// `sandboxPerSession()` lease stops or destroys its sandbox at every call, as the reference's).
#[napi]
pub struct NativeLease {
    lease: Box<dyn Lease>,
    sandbox: SandboxRef,
}

impl NativeLease {
    fn new(lease: Box<dyn Lease>) -> Self {
        NativeLease {
            sandbox: lease.sandbox(),
            lease,
        }
    }
}

#[napi]
impl NativeLease {
    /// The number of the sandbox it holds (see [`NativeSessionSandboxes::native_sandbox`]).
    #[napi(getter)]
    pub fn sandbox(&self) -> Option<u32> {
        self.sandbox
            .number()
            .and_then(|number| u32::try_from(number).ok())
    }

    /// The session is suspended: gives back what it need not keep.
    #[napi]
    pub async fn suspend(&self) -> Settled<()> {
        guard(self.lease.suspend()).await
    }

    /// The session ends: gives back everything.
    #[napi]
    pub async fn close(&self) -> Settled<()> {
        guard(self.lease.close()).await
    }
}
