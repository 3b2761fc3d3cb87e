//! Reading a turn's log as it grows, on any instance: register for wake-ups first, then read
//! after the cursor, then read again at each wake-up, or after `poll` without one (a wake-up can
//! be lost while a listener reconnects); a chunk at or before the cursor is never given twice.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{self, Stream};
use tokio::sync::broadcast::{self, error::RecvError};

use super::{Cluster, TurnKey};
use crate::engine::error::Result;

/// How long a reader waits for a wake-up before it reads again anyway.
pub const DEFAULT_POLL: Duration = Duration::from_millis(1000);

struct Reader {
    cluster: Arc<dyn Cluster>,
    turn: TurnKey,
    cursor: u64,
    ready: VecDeque<(u64, String)>,
    ended: bool,
    failed: bool,
    wakes: broadcast::Receiver<TurnKey>,
    poll: Duration,
}

impl Reader {
    /// Reads what follows the cursor; `true` when something came, or the turn closed.
    async fn read(&mut self) -> Result<bool> {
        let read = self.cluster.read_turn(&self.turn, self.cursor).await?;
        let mut came = false;
        for (seq, chunk) in read.chunks {
            if seq > self.cursor {
                self.cursor = seq;
                self.ready.push_back((seq, chunk));
                came = true;
            }
        }
        self.ended = read.ended;
        Ok(came || read.ended)
    }

    /// Waits for a wake-up of this turn, or for `poll`.
    async fn wait(&mut self) {
        let deadline = tokio::time::sleep(self.poll);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = &mut deadline => return,
                woken = self.wakes.recv() => match woken {
                    Ok(key) if key == self.turn => return,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => return,
                    // No more wake-ups: polling alone.
                    Err(RecvError::Closed) => {
                        (&mut deadline).await;
                        return;
                    }
                },
            }
        }
    }
}

/// The chunks of `turn` after seq `after`, `(seq, chunk)` in order, each once, until the turn's
/// log closes; a failed read ends the stream with its error.
pub fn follow(
    cluster: Arc<dyn Cluster>,
    turn: TurnKey,
    after: u64,
    poll: Duration,
) -> impl Stream<Item = Result<(u64, String)>> + Send {
    // Registered before the first read, so that no wake-up between the two is missed.
    let wakes = cluster.watch_turns();
    let reader = Reader {
        cluster,
        turn,
        cursor: after,
        ready: VecDeque::new(),
        ended: false,
        failed: false,
        wakes,
        poll,
    };
    stream::unfold(reader, |mut reader| async move {
        loop {
            if let Some(next) = reader.ready.pop_front() {
                return Some((Ok(next), reader));
            }
            if reader.ended || reader.failed {
                return None;
            }
            match reader.read().await {
                Ok(true) => {}
                Ok(false) => reader.wait().await,
                Err(error) => {
                    reader.failed = true;
                    return Some((Err(error), reader));
                }
            }
        }
    })
}
