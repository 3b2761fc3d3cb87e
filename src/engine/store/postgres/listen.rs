//! The one connection per store that `LISTEN`s, and the fan-out of its notifications in the
//! process.
//!
//! Invariants:
//! - one dedicated connection (to `listenUrl`, else `url`: it must not go through a
//!   transaction-mode pooler), opened by the first [`Listener::listen`] and kept open while the
//!   listener lives; when it is lost it is opened again (after 50 ms, doubling to 2 s) and every
//!   channel listened so far is listened again, and [`ListenState::generation`] goes up;
//! - notifications that arrive while the connection is down are lost (PostgreSQL keeps none for
//!   a listener that is not connected): a reader must subscribe ([`Listener::notifications`]),
//!   then listen, then read what it follows from the tables, and read again whenever the
//!   generation goes up, when it lags behind the broadcast (`RecvError::Lagged`), and on a poll of
//!   its own;
//! - dropping the listener closes its connection.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::future::poll_fn;
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::config::ConnectionTarget;
use super::connection::{describe, unreachable};
use super::tls;
use crate::engine::error::{Result, SessionError};

/// How many notifications the fan-out keeps for a slow reader before it lags.
const FAN_OUT: usize = 4096;

/// A notification: its channel and its payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Notification {
    /// The channel it was sent on.
    pub(crate) channel: String,
    /// Its payload (at most 8000 bytes).
    pub(crate) payload: String,
}

/// The listening connection's state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ListenState {
    /// Goes up each time the connection is (re)opened with every channel listened: a reader
    /// reads again from the tables then.
    pub(crate) generation: u64,
    /// The server process of the connection while it is open (`pg_backend_pid()`).
    pub(crate) backend_pid: Option<i32>,
}

enum Command {
    Listen(String, oneshot::Sender<Result<()>>),
}

/// The store's listening connection.
pub(crate) struct Listener {
    commands: mpsc::UnboundedSender<Command>,
    notifications: broadcast::Sender<Arc<Notification>>,
    state: watch::Receiver<ListenState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Listener {
    /// A listener on `target` (no connection opened until the first [`Listener::listen`]).
    ///
    /// # Errors
    /// [`SessionError::Input`] when its TLS roots cannot be read.
    pub(crate) fn start(target: &ConnectionTarget, option: &str) -> Result<Listener> {
        let (config, connector) = tls::connector(target, option)?;
        let (commands, received) = mpsc::unbounded_channel();
        let (notifications, _) = broadcast::channel(FAN_OUT);
        let (state_sender, state) = watch::channel(ListenState::default());
        let task = tokio::spawn(run(
            target.clone(),
            config,
            connector,
            received,
            notifications.clone(),
            state_sender,
        ));
        Ok(Listener {
            commands,
            notifications,
            state,
            task,
        })
    }

    /// Listens on `channel` (kept across reconnections); returns once the server listens.
    ///
    /// # Errors
    /// [`SessionError::Input`] for a channel name that is empty or longer than 63 bytes;
    /// [`SessionError::StoreUnavailable`] when the connection cannot be opened now (the channel is
    /// listened all the same once it can).
    pub(crate) async fn listen(&self, channel: &str) -> Result<()> {
        if channel.is_empty() || channel.len() > 63 {
            return Err(SessionError::input(
                "channel",
                "a channel name is 1 to 63 bytes",
            ));
        }
        let (reply, answer) = oneshot::channel();
        self.commands
            .send(Command::Listen(channel.to_owned(), reply))
            .map_err(|_| SessionError::internal("the postgres listener has stopped"))?;
        answer
            .await
            .map_err(|_| SessionError::internal("the postgres listener has stopped"))?
    }

    /// Every notification of the channels listened, from now on.
    pub(crate) fn notifications(&self) -> broadcast::Receiver<Arc<Notification>> {
        self.notifications.subscribe()
    }

    /// The connection's state, to follow its reconnections.
    pub(crate) fn state(&self) -> watch::Receiver<ListenState> {
        self.state.clone()
    }
}

/// `LISTEN "<channel>"`, the name quoted.
fn listen_sql(channel: &str) -> String {
    format!("LISTEN \"{}\"", channel.replace('"', "\"\""))
}

/// The listener's task: connects, listens, answers commands, reconnects; ends when the
/// [`Listener`] is dropped.
async fn run(
    target: ConnectionTarget,
    config: tokio_postgres::Config,
    connector: MakeRustlsConnect,
    mut commands: mpsc::UnboundedReceiver<Command>,
    notifications: broadcast::Sender<Arc<Notification>>,
    state: watch::Sender<ListenState>,
) {
    let mut channels = BTreeSet::new();
    let mut waiting: Vec<oneshot::Sender<Result<()>>> = Vec::new();
    let mut backoff = Duration::from_millis(50);
    // Wait for the first command: no connection before something is to be listened.
    match commands.recv().await {
        Some(Command::Listen(channel, reply)) => {
            channels.insert(channel);
            waiting.push(reply);
        }
        None => return,
    }
    loop {
        let connected = config.connect(connector.clone()).await;
        let (client, mut connection) = match connected {
            Ok(pair) => pair,
            Err(error) => {
                let error = unreachable(&target, &error);
                for reply in waiting.drain(..) {
                    let _ = reply.send(Err(error.clone()));
                }
                // Wait out the backoff, taking commands meanwhile.
                let sleep = tokio::time::sleep(backoff);
                tokio::pin!(sleep);
                loop {
                    tokio::select! {
                        () = &mut sleep => break,
                        command = commands.recv() => match command {
                            Some(Command::Listen(channel, reply)) => {
                                channels.insert(channel);
                                let _ = reply.send(Err(error.clone()));
                            }
                            None => return,
                        },
                    }
                }
                backoff = (backoff * 2).min(Duration::from_secs(2));
                continue;
            }
        };
        // The connection, driven apart: notifications fanned out; `closed` fires when it ends.
        let fan_out = notifications.clone();
        let (closed_sender, mut closed) = oneshot::channel::<()>();
        let driver = tokio::spawn(async move {
            loop {
                match poll_fn(|cx| connection.poll_message(cx)).await {
                    Some(Ok(AsyncMessage::Notification(notification))) => {
                        let _ = fan_out.send(Arc::new(Notification {
                            channel: notification.channel().to_owned(),
                            payload: notification.payload().to_owned(),
                        }));
                    }
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => break,
                }
            }
            let _ = closed_sender.send(());
        });
        let listened = async {
            let all: Vec<String> = channels.iter().map(|c| listen_sql(c)).collect();
            if !all.is_empty() {
                client.batch_execute(&all.join(";")).await?;
            }
            let pid: i32 = client
                .query_one("SELECT pg_backend_pid()", &[])
                .await?
                .get(0);
            Ok::<_, tokio_postgres::Error>(pid)
        }
        .await;
        match listened {
            Ok(pid) => {
                backoff = Duration::from_millis(50);
                state.send_modify(|state| {
                    state.generation += 1;
                    state.backend_pid = Some(pid);
                });
                for reply in waiting.drain(..) {
                    let _ = reply.send(Ok(()));
                }
            }
            Err(error) => {
                let error = lost(&target, &error);
                for reply in waiting.drain(..) {
                    let _ = reply.send(Err(error.clone()));
                }
                driver.abort();
                tokio::time::sleep(backoff).await;
                continue;
            }
        }
        // Connected: take commands until the connection ends.
        loop {
            tokio::select! {
                _ = &mut closed => break,
                command = commands.recv() => match command {
                    Some(Command::Listen(channel, reply)) => {
                        let sql = listen_sql(&channel);
                        channels.insert(channel);
                        let done = client
                            .batch_execute(&sql)
                            .await
                            .map_err(|error| lost(&target, &error));
                        let _ = reply.send(done);
                    }
                    None => {
                        driver.abort();
                        return;
                    }
                },
            }
        }
        state.send_modify(|state| state.backend_pid = None);
        driver.abort();
        tokio::time::sleep(backoff).await;
    }
}

fn lost(target: &ConnectionTarget, error: &tokio_postgres::Error) -> SessionError {
    SessionError::StoreUnavailable {
        message: target.scrub(&format!(
            "the postgres store's listening connection to {} failed: {}",
            target.describe(),
            describe(error)
        )),
    }
}
