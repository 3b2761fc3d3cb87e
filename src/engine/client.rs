//! The client seam: where the chunks the engine itself sends reach the client of a turn.
//!
//! Most chunks of a turn go to the client by the agent's own path (see [`crate::engine::agent`]);
//! the engine sends only what it decides: the held-back `finish`, an `error` when the agent could
//! not start the turn, the answers of the `approve` policy. Then it ends the client's stream, once
//! the session is written.

use crate::engine::session::SessionSummary;
use crate::engine::ui::UiChunk;

/// The clients of the turns under way, by turn number.
pub trait TurnClients: Send + Sync {
    /// Sends `chunks` to the client of turn `turn_id`, after everything sent before.
    fn deliver(&self, turn_id: u64, chunks: Vec<UiChunk>);

    /// Ends the client's stream of turn `turn_id`: the turn is over, and the session written as
    /// `session` says (what `turn.done` resolves to).
    fn finish(&self, turn_id: u64, session: &SessionSummary);

    /// Tells the caller of turn `turn_id` what became of the structured answer it asked for
    /// (`turn.output`): `{ value }`, or `{ code, message, errors }`. Sent before
    /// [`TurnClients::finish`]; a turn that ends without it (cut short by a close or a shutdown)
    /// has no answer.
    fn answer(&self, _turn_id: u64, _outcome: &serde_json::Value) {}
}
