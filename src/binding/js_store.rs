//! `JsStore`: a `SessionStore` written in JavaScript, held to its word.
//!
//! Every call is one `HostOp` through the [`Host`], bounded: by the store timeout
//! (`storeTimeoutMs`), and once the manager shuts down by the end of its wind-down, so that a
//! promise that never settles is an error, never a hang of its session (whose lock a write holds)
//! or of the shutdown. What the store answers is checked: a record whose `id` is not the one asked
//! for is refused; a `list()` entry that is not a summary (`null`, a number, one without an id) is
//! set aside and reported once, as the SQLite store does with a bad row.

use std::future::Future;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use super::host::Host;
use super::protocol::HostOp;
use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, SessionSummary};
use crate::engine::store::{SessionStore, UnreadableRows};

/// The store timeout when `storeTimeoutMs` is not given.
pub(crate) const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(30);

/// The key under which `list()` entries without an id are noted: no session id is empty.
const ENTRY_WITHOUT_ID: &str = "";

/// A `SessionStore` written in JavaScript.
pub(crate) struct JsStore {
    host: std::sync::Arc<Host>,
    /// The sessions whose summaries `list()` could not read: skipped, each reported once.
    unreadable: UnreadableRows,
    /// How long any one call may take.
    timeout: Duration,
    /// The end of the shutdown's wind-down, once the manager shuts down.
    deadline: watch::Sender<Option<Instant>>,
}

impl JsStore {
    /// The store behind `host`, each call bounded by `timeout`.
    pub(crate) fn new(host: std::sync::Arc<Host>, timeout: Duration) -> JsStore {
        JsStore {
            host,
            unreadable: UnreadableRows::default(),
            timeout,
            deadline: watch::Sender::new(None),
        }
    }

    /// `call` (the store's `what`), or an error once the store timeout or the shutdown's
    /// deadline passes first.
    async fn bounded<T>(&self, what: &str, call: impl Future<Output = Result<T>>) -> Result<T> {
        let mut deadline = self.deadline.subscribe();
        if deadline
            .borrow_and_update()
            .is_some_and(|at| at <= Instant::now())
        {
            return Err(SessionError::host(format!(
                "the store's {what} was not called: the shutdown's wind-down is over"
            )));
        }
        let shutdown = async {
            loop {
                let at = *deadline.borrow_and_update();
                if let Some(at) = at {
                    tokio::time::sleep_until(at).await;
                    return;
                }
                if deadline.changed().await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        tokio::select! {
            answer = call => answer,
            () = tokio::time::sleep(self.timeout) => Err(SessionError::host(format!(
                "the store's {what} did not settle within {} ms (storeTimeoutMs)",
                self.timeout.as_millis()
            ))),
            () = shutdown => Err(SessionError::host(format!(
                "the store's {what} did not settle before the shutdown's wind-down (windDownMs) was over"
            ))),
        }
    }
}

fn from_json<T: serde::de::DeserializeOwned>(text: &str, what: &str) -> Result<T> {
    serde_json::from_str(text)
        .map_err(|e| SessionError::host(format!("the store gave {what} of the wrong shape: {e}")))
}

#[async_trait]
impl SessionStore for JsStore {
    async fn save(&self, record: &SessionRecord, resume_state: Option<&Value>) -> Result<()> {
        let id = &record.summary.id;
        let op = HostOp::StoreSave {
            record,
            resume_state,
        };
        self.bounded(&format!("save() of session {id}"), self.host.call::<()>(op))
            .await?;
        self.unreadable.forget(id);
        Ok(())
    }

    async fn get(&self, id: &str) -> Result<Option<SessionRecord>> {
        let what = format!("get() of session {id}");
        let answer = self
            .bounded(&what, self.host.call_raw(HostOp::StoreGet { id }))
            .await?;
        if answer == "null" {
            return Ok(None);
        }
        let record = from_json::<SessionRecord>(&answer, "a session").and_then(|record| {
            if record.summary.id == id {
                Ok(record)
            } else {
                Err(SessionError::host(format!(
                    "the store answered get() of session {id} with session {}: refused",
                    record.summary.id
                )))
            }
        });
        if let Err(error) = &record {
            self.unreadable.note(id, error.clone());
        }
        record.map(Some)
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        let answer = self
            .bounded("list()", self.host.call_raw(HostOp::StoreList))
            .await?;
        let entries: Vec<Box<serde_json::value::RawValue>> = from_json(&answer, "a list")?;
        let mut summaries = Vec::with_capacity(entries.len());
        for entry in entries {
            match serde_json::from_str::<SessionSummary>(entry.get()) {
                Ok(summary) => summaries.push(summary),
                Err(error) => {
                    // One entry of the wrong shape is set aside, not fatal to the list.
                    let id = serde_json::from_str::<Value>(entry.get())
                        .ok()
                        .and_then(|v| v.get("id").and_then(Value::as_str).map(str::to_owned))
                        .filter(|id| !id.is_empty());
                    let (key, error) = match id {
                        Some(id) => {
                            let error = SessionError::host(format!(
                                "the store gave an unreadable session {id}: {error}"
                            ));
                            (id, error)
                        }
                        None => (
                            ENTRY_WITHOUT_ID.to_owned(),
                            SessionError::host(format!(
                                "the store's list() gave an entry that is not a session (set aside): {error}"
                            )),
                        ),
                    };
                    self.unreadable.note(&key, error);
                }
            }
        }
        crate::engine::store::sort_newest_first(&mut summaries);
        Ok(summaries)
    }

    async fn get_resume_state(&self, id: &str) -> Result<Option<Value>> {
        let what = format!("getResumeState() of session {id}");
        let answer: Value = self
            .bounded(&what, self.host.call(HostOp::StoreGetResumeState { id }))
            .await?;
        Ok((!answer.is_null()).then_some(answer))
    }

    async fn delete(&self, id: &str) -> Result<()> {
        let what = format!("delete() of session {id}");
        self.bounded(&what, self.host.call::<()>(HostOp::StoreDelete { id }))
            .await?;
        self.unreadable.forget(id);
        Ok(())
    }

    fn bound_calls_until(&self, deadline: Instant) {
        self.deadline.send_replace(Some(deadline));
    }

    fn past_bound(&self) -> bool {
        self.deadline
            .borrow()
            .is_some_and(|at| at <= Instant::now())
    }

    fn take_unreadable(&self) -> Vec<(String, SessionError)> {
        self.unreadable.take()
    }

    fn is_unreadable(&self, id: &str) -> bool {
        self.unreadable.contains(id)
    }
}
