//! `NativeManager`: the engine's [`SessionManager`] as a JavaScript class, driven by `index.js`.
//!
//! Arguments and results cross as JSON text (one string each way, the cheapest crossing for
//! nested values); what a turn reports crosses through [`NativeManager::feed`], a synchronous call
//! that only queues the text for the engine, so that the hot path does no work on Node's thread.

use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::{Function, FunctionRef, Promise};
use napi::threadsafe_function::ThreadsafeFunction;
use napi::{Env, Status};
use napi_derive::napi;
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;

use super::error::{guard, guard_sync, Settled};
use super::host::{host_failure, Host};
use super::js_store::{JsStore, DEFAULT_STORE_TIMEOUT};
use super::now_or_later::{now_or_later, NowOrLater};
use super::seams::{Feeds, JsAgent, JsClients, JsHooks, JsSandboxes};
use super::store::NativeStore;
use super::strategies::NativeSessionSandboxes;
use crate::engine::agent::{EncodedChunks, TurnEnd, TurnFailure, TurnReport};
use crate::engine::error::{Result, SessionError};
use crate::engine::input::{self, Bytes, Count, Flag, GivenText, Millis};
use crate::engine::manager::{
    turn_options, ContinueRequest, ExecRequest, ManagerOptions, Seams, SendRequest, SessionManager,
    SubmissionAsk, DEFAULT_MAX_OUTPUT_BYTES,
};
use crate::engine::session::import;
use crate::engine::store::SessionStore;
use crate::engine::ui::UiChunk;

/// The function of `update()` given by the application, wrapped by `index.js`: metadata JSON in,
/// new metadata JSON out (`null` when the application's function threw).
type MetadataChange = ThreadsafeFunction<String, Promise<Option<String>>, String, Status, false>;

/// The error of an `update()` whose function threw; `index.js` throws what it threw instead.
const CHANGE_THREW: &str = "update()'s function of the metadata threw";

/// The options `index.js` passes, as JSON, once the functions are taken out.
/// What `js/manager.js` passes: the data options of `createSessionManager()` (the functions
/// taken out, `sandboxes` as `{ capacity }`), and whether it was given `approve`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Settings {
    options: Value,
    approves: bool,
}

/// The data options of `createSessionManager()`: each checked here, once.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Options {
    #[serde(default, deserialize_with = "input::present")]
    idle_timeout_ms: Option<Millis>,
    #[serde(default, deserialize_with = "input::present")]
    close_suspended_after_ms: Option<Millis>,
    #[serde(default, deserialize_with = "input::present")]
    turn_timeout_ms: Option<Millis>,
    #[serde(default, deserialize_with = "input::present")]
    wind_down_ms: Option<Millis>,
    #[serde(default, deserialize_with = "input::present")]
    suspend_idle_when_full: Option<Flag>,
    #[serde(default, deserialize_with = "input::present")]
    store_timeout_ms: Option<Millis>,
    /// Used by `js/turns.js`; checked here with the others.
    #[allow(dead_code)]
    #[serde(default, deserialize_with = "input::present")]
    reconnect_buffer_chunks: Option<Count<0>>,
    /// Used by `js/turns.js`; checked here with the others.
    #[allow(dead_code)]
    #[serde(default, deserialize_with = "input::present")]
    reader_buffer_bytes: Option<Bytes>,
    /// Used by `js/turns.js`; checked here with the others.
    #[allow(dead_code)]
    #[serde(default, deserialize_with = "input::present")]
    reconnect_buffer_bytes: Option<Bytes>,
    #[serde(default, deserialize_with = "input::present")]
    sandboxes: Option<SandboxesOptions>,
}

/// What the manager reads of its `sandboxes`, besides `acquire`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct SandboxesOptions {
    #[serde(default, deserialize_with = "input::present")]
    capacity: Option<Count<1>>,
}

/// The manager's options, its sandboxes' capacity, whether `approve` was given, and the bound of
/// each call into a store written in JavaScript.
fn read_options(json: &str) -> Result<(ManagerOptions, Option<u32>, bool, Duration)> {
    let settings: Settings = input::read_json(json, "options", "createSessionManager()")?;
    let options: Options = input::read(settings.options, "options", "createSessionManager()")?;
    let defaults = ManagerOptions::default();
    let manager = ManagerOptions {
        idle_timeout: options.idle_timeout_ms.map(|Millis(d)| d),
        close_suspended_after: options.close_suspended_after_ms.map(|Millis(d)| d),
        turn_timeout: options.turn_timeout_ms.map(|Millis(d)| d),
        wind_down: options
            .wind_down_ms
            .map_or(defaults.wind_down, |Millis(d)| d),
        suspend_idle_when_full: options
            .suspend_idle_when_full
            .map_or(defaults.suspend_idle_when_full, |Flag(flag)| flag),
        ..defaults
    };
    let capacity = options
        .sandboxes
        .and_then(|sandboxes| sandboxes.capacity)
        .map(|Count(capacity)| capacity);
    let store_timeout = options
        .store_timeout_ms
        .map_or(DEFAULT_STORE_TIMEOUT, |Millis(d)| d);
    Ok((manager, capacity, settings.approves, store_timeout))
}

/// Parses a JSON argument, naming it when it is not what it should be.
fn argument<T: DeserializeOwned>(json: &str, name: &str) -> Result<T> {
    serde_json::from_str(json)
        .map_err(|e| SessionError::input(name, format!("{name} is not valid JSON: {e}")))
}

/// Chunks as `feed()` gets them from JavaScript, `[chunk, ...]` as JSON text: decoded by the
/// engine's turn loop, not on the JavaScript thread.
fn json_chunks(text: String) -> EncodedChunks {
    EncodedChunks::new(move || {
        serde_json::from_str::<Vec<UiChunk>>(&text).map_err(|e| e.to_string())
    })
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<String> {
    serde_json::to_string(value)
        .map_err(|e| SessionError::internal(format!("a result could not be written as JSON: {e}")))
}

/// An imported transcript, each item kept as its JSON text until it is checked.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ImportArgs {
    items: Vec<Box<serde_json::value::RawValue>>,
    message_ids: Vec<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SendArgs {
    turn_id: u64,
    /// Absent, it is refused as any message that is neither text nor a `UIMessage`.
    #[serde(default)]
    message: Value,
    #[serde(default, deserialize_with = "input::present")]
    prompt: Option<String>,
    reply_id: String,
    message_id: String,
    #[serde(default, deserialize_with = "input::present")]
    instruction_addendum: Option<Value>,
    #[serde(default, deserialize_with = "input::present")]
    limits: Option<Value>,
    output: Option<Value>,
    #[serde(default)]
    submission: Option<SubmissionArgs>,
}

/// A request's `submissionId` with the digest of what it submits.
#[derive(Deserialize)]
struct SubmissionArgs {
    id: String,
    digest: String,
}

impl From<SubmissionArgs> for SubmissionAsk {
    fn from(args: SubmissionArgs) -> Self {
        SubmissionAsk {
            id: args.id,
            digest: args.digest,
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ContinueArgs {
    turn_id: u64,
    message: Option<Value>,
    #[serde(default, deserialize_with = "input::present")]
    tool_approval_continuations: Option<Vec<Value>>,
    #[serde(default, deserialize_with = "input::present")]
    tool_result_continuations: Option<Vec<Value>>,
    #[serde(default, deserialize_with = "input::present")]
    instruction_addendum: Option<Value>,
    #[serde(default, deserialize_with = "input::present")]
    limits: Option<Value>,
    output: Option<Value>,
    #[serde(default)]
    submission: Option<SubmissionArgs>,
}

/// What `js/manager.js` passes to `exec()`: the number of the command, and its options.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExecArgs {
    exec_id: u64,
    options: Value,
}

/// The options of `exec()` but `abortSignal`: their rules are the engine's (`exec.rs`).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExecOptions {
    command: String,
    #[serde(default, deserialize_with = "input::present")]
    key: Option<String>,
    #[serde(default, deserialize_with = "input::present")]
    max_output_bytes: Option<Bytes>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct EndArgs {
    usage: Option<Value>,
    error: Option<Value>,
    /// Whether the harness session holds an unfinished turn once the stream ended, which the
    /// engine asks next; absent when it could not be read.
    unfinished: Option<bool>,
    #[serde(default)]
    caller_aborted: bool,
}

/// The session manager, as `index.js` drives it.
#[napi]
pub struct NativeManager {
    manager: SessionManager,
    feeds: Arc<Feeds>,
    /// The host the manager's seams call: what a call answered at once sent is told by it.
    host: Arc<Host>,
    /// The host's JavaScript function, to hand it what a call running on Node's thread sent.
    host_function: FunctionRef<String, Promise<String>>,
}

#[napi]
impl NativeManager {
    /// A manager whose seams are reached through `host(op, payload)`; `store`, when given, is one
    /// of the engine's own stores, used directly; so is `sandboxes`, one of the engine's own
    /// strategies (`sharedSandbox()`, `sandboxPerSession()`).
    #[napi(constructor)]
    pub fn new(
        env: Env,
        host: Function<'_, String, Promise<String>>,
        options_json: String,
        store: Option<&NativeStore>,
        sandboxes: Option<&NativeSessionSandboxes>,
    ) -> napi::Result<NativeManager> {
        // The options first: bad ones are refused before anything is made.
        let (options, capacity, approves, store_timeout) =
            guard_sync(&env, || read_options(&options_json))?;
        let host_function = host.create_ref()?;
        let host = Arc::new(Host::new(host)?);
        guard_sync(&env, || {
            let feeds = Arc::new(Feeds::default());
            let store: Arc<dyn SessionStore> = match store {
                Some(store) => store.store(),
                None => Arc::new(JsStore::new(host.clone(), store_timeout)),
            };
            let seams = Seams {
                agent: Arc::new(JsAgent {
                    host: host.clone(),
                    feeds: feeds.clone(),
                    native_sandboxes: sandboxes.is_some(),
                }),
                sandboxes: match sandboxes {
                    Some(sandboxes) => sandboxes.strategy(),
                    None => Arc::new(JsSandboxes {
                        host: host.clone(),
                        capacity,
                    }),
                },
                store,
                hooks: Arc::new(JsHooks {
                    host: host.clone(),
                    approves,
                }),
                clients: Arc::new(JsClients { host: host.clone() }),
            };
            Ok(NativeManager {
                manager: SessionManager::new(seams, options),
                feeds,
                host: host.clone(),
                host_function,
            })
        })
    }

    /// `create({ id, metadata, initialHistory? })`: the session, as JSON. `history_json` is
    /// `{ items, messageIds }`: the imported transcript, and an id for each message it may make.
    #[napi(ts_return_type = "string | Promise<string>")]
    pub fn create<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
        metadata_json: String,
        history_json: Option<String>,
    ) -> napi::Result<NowOrLater<'env, String>> {
        let manager = self.manager.clone();
        now_or_later(
            env,
            &self.host,
            &self.host_function,
            guard(async move {
                let id = input::session_id(id, "id")?;
                let metadata = argument(&metadata_json, "metadata")?;
                let history = match history_json {
                    Some(text) => {
                        let args: ImportArgs = argument(&text, "initialHistory")?;
                        import::read_history(&args.items, &args.message_ids)?
                    }
                    None => Vec::new(),
                };
                to_json(&manager.create_with_history(id, metadata, history).await?)
            }),
        )
    }

    /// `get(id)`: the record as JSON, or nothing.
    #[napi(ts_return_type = "string | null | Promise<string | null>")]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
    ) -> napi::Result<NowOrLater<'env, Option<String>>> {
        let manager = self.manager.clone();
        now_or_later(
            env,
            &self.host,
            &self.host_function,
            guard(async move {
                let id = input::session_id(id, "id")?;
                match manager.get(&id).await? {
                    Some(record) => to_json(&record).map(Some),
                    None => Ok(None),
                }
            }),
        )
    }

    /// `list()`: the summaries as JSON.
    #[napi]
    pub async fn list(&self) -> Settled<String> {
        guard(self.manager.list_json()).await
    }

    /// `list()` for a caller that keeps the summaries it was given (`js/summaries.js`): `[stamp,
    /// rows]`, the summaries stamped at most `known` left out, or `[stamp]` alone when nothing
    /// changed since `known` (see `SessionStore::list_since`).
    #[napi(ts_return_type = "string | Promise<string>")]
    pub fn list_since<'env>(
        &self,
        env: &'env Env,
        known: f64,
    ) -> napi::Result<NowOrLater<'env, String>> {
        let manager = self.manager.clone();
        now_or_later(
            env,
            &self.host,
            &self.host_function,
            guard(async move { manager.list_since(super::store::stamp(known)).await }),
        )
    }

    /// `send(id, ...)`: `{ turnId, message, prompt?, replyId, messageId }` as JSON; answers
    /// `{ messageId, session }`.
    #[napi(ts_return_type = "string | Promise<string>")]
    pub fn send<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
        request_json: String,
    ) -> napi::Result<NowOrLater<'env, String>> {
        let manager = self.manager.clone();
        now_or_later(
            env,
            &self.host,
            &self.host_function,
            guard(async move {
                let id = input::session_id(id, "id")?;
                let args: SendArgs = input::read_json(&request_json, "options", "send()")?;
                let started = manager
                    .send(
                        &id,
                        SendRequest {
                            turn_id: args.turn_id,
                            message: args.message,
                            prompt: args.prompt,
                            reply_id: args.reply_id,
                            message_id: args.message_id,
                            options: turn_options::read(
                                args.instruction_addendum,
                                args.limits,
                                args.output,
                            )?,
                            submission: args.submission.map(Into::into),
                        },
                    )
                    .await?;
                to_json(
                    &serde_json::json!({ "messageId": started.message_id, "session": started.session, "replayed": started.replayed }),
                )
            }),
        )
    }

    /// `continue(id, ...)`: `{ turnId, message?, toolApprovalContinuations?,
    /// toolResultContinuations? }` as JSON; answers `{ messageId, session }`.
    #[napi(js_name = "continue", ts_return_type = "string | Promise<string>")]
    pub fn continue_turn<'env>(
        &self,
        env: &'env Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
        request_json: String,
    ) -> napi::Result<NowOrLater<'env, String>> {
        let manager = self.manager.clone();
        now_or_later(
            env,
            &self.host,
            &self.host_function,
            guard(async move {
                let id = input::session_id(id, "id")?;
                let args: ContinueArgs = input::read_json(&request_json, "options", "continue()")?;
                let started = manager
                    .continue_turn(
                        &id,
                        ContinueRequest {
                            turn_id: args.turn_id,
                            message: args.message,
                            approvals: args.tool_approval_continuations.unwrap_or_default(),
                            tool_results: args.tool_result_continuations.unwrap_or_default(),
                            options: turn_options::read(
                                args.instruction_addendum,
                                args.limits,
                                args.output,
                            )?,
                            submission: args.submission.map(Into::into),
                        },
                    )
                    .await?;
                to_json(
                    &serde_json::json!({ "messageId": started.message_id, "session": started.session, "replayed": started.replayed }),
                )
            }),
        )
    }

    /// `exec(id, ...)`: `{ execId, command, key?, maxOutputBytes? }` as JSON; answers the result.
    #[napi]
    pub async fn exec(
        &self,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
        request_json: String,
    ) -> Settled<String> {
        guard(async {
            let id = input::session_id(id, "id")?;
            let args: ExecArgs = argument(&request_json, "options")?;
            let options: ExecOptions = input::read(args.options, "options", "exec()")?;
            let result = self
                .manager
                .exec(
                    &id,
                    ExecRequest {
                        exec_id: args.exec_id,
                        command: options.command,
                        key: options.key,
                        max_output_bytes: options
                            .max_output_bytes
                            .map_or(DEFAULT_MAX_OUTPUT_BYTES, |Bytes(bytes)| bytes),
                    },
                )
                .await?;
            to_json(&result)
        })
        .await
    }

    /// Registers command or turn `id` before it is asked for, so that its caller can cut it.
    #[napi]
    pub fn will_wait(&self, id: u32) {
        self.manager.will_wait(u64::from(id));
    }

    /// Forgets `id` registered by `willWait()` when its command or turn was never asked for.
    #[napi]
    pub fn forget_waiting(&self, id: u32) {
        self.manager.forget_waiting(u64::from(id));
    }

    /// The caller of command or turn `id` cut it: if it still waits to start, it never does.
    #[napi]
    pub fn cancel_waiting(&self, id: u32) {
        self.manager.cancel_waiting(u64::from(id));
    }

    /// `update(id, { metadata })`, the metadata as JSON.
    #[napi]
    pub async fn update(
        &self,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
        metadata_json: String,
    ) -> Settled<String> {
        guard(async {
            let id = input::session_id(id, "id")?;
            let metadata = argument(&metadata_json, "metadata")?;
            to_json(&self.manager.update(&id, metadata).await?)
        })
        .await
    }

    /// `update(id, { metadata: change })` with a function: under the session's command lock,
    /// `change` is called with the metadata as they stand (JSON) and answers the new ones (JSON),
    /// or `null` when the application's function threw (nothing changes then, and `index.js`
    /// throws what it threw).
    #[napi(ts_args_type = "id: unknown, change: (metadataJson: string) => Promise<string | null>")]
    pub async fn update_with(&self, id: GivenText, change: MetadataChange) -> Settled<String> {
        guard(async {
            let id = input::session_id(id, "id")?;
            let change = &change;
            let summary = self
                .manager
                .update_with(&id, |metadata| async move {
                    let promise = change
                        .call_async(to_json(&metadata)?)
                        .await
                        .map_err(|e| SessionError::host(e.reason.clone()))?;
                    match promise
                        .await
                        .map_err(|e| SessionError::host(e.reason.clone()))?
                    {
                        Some(text) => argument(&text, "metadata"),
                        None => Err(SessionError::host(CHANGE_THREW)),
                    }
                })
                .await?;
            to_json(&summary)
        })
        .await
    }

    /// `interrupt(id)`.
    #[napi]
    pub async fn interrupt(&self, #[napi(ts_arg_type = "unknown")] id: GivenText) -> Settled<()> {
        guard(async { self.manager.interrupt(&input::session_id(id, "id")?).await }).await
    }

    /// Cuts turn `turn_id` short, if it is still under way: the caller's `abortSignal` fired.
    #[napi]
    pub fn cut_turn(&self, turn_id: u32, reason: String) {
        self.manager.cut_turn(u64::from(turn_id), &reason);
    }

    /// `suspend(id)`.
    #[napi]
    pub async fn suspend(&self, #[napi(ts_arg_type = "unknown")] id: GivenText) -> Settled<String> {
        guard(async { to_json(&self.manager.suspend(&input::session_id(id, "id")?).await?) }).await
    }

    /// `close(id)`.
    #[napi]
    pub async fn close(&self, #[napi(ts_arg_type = "unknown")] id: GivenText) -> Settled<String> {
        guard(async { to_json(&self.manager.close(&input::session_id(id, "id")?).await?) }).await
    }

    /// `delete(id)`.
    #[napi]
    pub async fn delete(&self, #[napi(ts_arg_type = "unknown")] id: GivenText) -> Settled<()> {
        guard(async { self.manager.delete(&input::session_id(id, "id")?).await }).await
    }

    /// Refuses `id` as every method taking a session id does, with nothing else done: for
    /// `reconnect()`, whose turns JavaScript keeps.
    #[napi]
    pub fn check_id(
        &self,
        env: Env,
        #[napi(ts_arg_type = "unknown")] id: GivenText,
    ) -> napi::Result<()> {
        guard_sync(&env, || input::session_id(id, "id").map(drop))
    }

    /// `shutdown()`.
    #[napi]
    pub async fn shutdown(&self) -> Settled<()> {
        guard(self.manager.shutdown()).await
    }

    /// What a turn's stream produced, `[chunk, ...]` as JSON: queued for the engine, nothing more.
    #[napi]
    pub fn feed(&self, turn_id: u32, chunks_json: String) -> bool {
        match self.feeds.get(u64::from(turn_id)) {
            Some(feed) => feed.report(TurnReport::Encoded(json_chunks(chunks_json))),
            None => false,
        }
    }

    /// The reply of turn `turn_id` as it stands once the chunks fed before are taken (see
    /// `MessageAccumulator::message_so_far`), as JSON; `null` once the turn is over.
    #[napi]
    pub async fn reply_so_far(&self, turn_id: u32) -> Option<String> {
        let feed = self.feeds.get(u64::from(turn_id))?;
        let (answer, reply) = tokio::sync::oneshot::channel();
        if !feed.report(TurnReport::Reply(answer)) {
            return None;
        }
        reply.await.ok().flatten()
    }

    /// The end of a turn's stream: `{ usage?, error?: { message, origin? }, unfinished? }` as
    /// JSON, `unfinished` whether the harness session then holds an unfinished turn (kept for the
    /// engine's next question, so that it need not cross to ask).
    #[napi]
    pub fn feed_end(&self, turn_id: u32, end_json: String) -> bool {
        let args: EndArgs = serde_json::from_str(&end_json).unwrap_or_default();
        let Some(feed) = self.feeds.end(u64::from(turn_id), args.unfinished) else {
            return false;
        };
        let failure = args.error.map(|error| {
            let (message, origin) = host_failure(Some(&error));
            TurnFailure { message, origin }
        });
        feed.report(TurnReport::End(TurnEnd {
            usage: args.usage,
            failure,
            caller_aborted: args.caller_aborted,
        }))
    }

    /// The client of turn `turn_id` went away: the turn goes on, read to its end.
    #[napi]
    pub fn client_gone(&self, turn_id: u32) {
        self.manager.client_gone(u64::from(turn_id));
    }

    /// What the manager holds, for tests and benchmarks: `{ sessionsInMemory, turnsUnderWay,
    /// clientsGone }` as JSON.
    #[napi]
    pub fn diagnostics(&self) -> String {
        serde_json::json!({
            "sessionsInMemory": self.manager.sessions_in_memory(),
            "turnsUnderWay": self.feeds.len(),
            "clientsGone": self.manager.clients_gone(),
        })
        .to_string()
    }
}
