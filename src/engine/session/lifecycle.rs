//! The session lifecycle as one pure function: [`decide`] takes a session's status and a
//! command, and says what the manager must do, or refuses with the words users see.
//!
//! ```text
//!              create()                         send() / continue()
//!   [*] ───────────────► preparing ──ready──► idle ─────────────────► busy
//!                          │   ▲               ▲ │ ▲                 │  │
//!             could not ───┘   │ next message  │ │ └──the turn ends──┘  │ the turn asks
//!             start: failed ───┘ / continue()  │ │                      ▼ for an answer
//!                              │               │ │ idle timeout,   awaiting-input
//!                   suspended ◄┴───────────────┼─┘ suspend(), ◄────────┘ │
//!                        │                     │   shutdown()            │ continue()
//!                        │ close(), closeSuspendedAfterMs                └──► busy
//!                        ▼
//!                     closed            a crash: every live status ──► interrupted
//! ```
//!
//! | status           | send()           | continue()          | suspend()  | close()        |
//! |------------------|------------------|---------------------|------------|----------------|
//! | `preparing`      | wait, then turn  | wait, then decide   | refuse     | cut the start  |
//! | `idle`           | turn             | refuse: no input    | suspend    | close          |
//! | `busy`           | refuse           | refuse              | refuse     | cut the turn   |
//! | `awaiting-input` | refuse: continue | continue            | suspend    | close          |
//! | `suspended`      | resume, turn     | resume, continue    | nothing    | discard        |
//! | `failed`         | start again      | refuse              | refuse     | close          |
//! | `closed`         | refuse           | refuse              | refuse     | refuse         |
//! | `interrupted`    | refuse           | refuse              | refuse     | refuse         |

use super::SessionStatus;

/// What a caller asks of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `send()`: a user message.
    Send,
    /// `continue()`: the answers a paused turn waits for.
    Continue,
    /// `suspend()`, or the idle timeout.
    Suspend,
    /// `close()`.
    Close,
    /// `interrupt()`.
    Interrupt,
}

/// What the manager must do for a command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Start the turn now.
    StartTurn,
    /// Wait until the session is ready, then decide again.
    WaitReady,
    /// Bring the session back from `suspended` (harness resumed from its state), then decide again.
    Resume,
    /// Open the sandbox and harness session again (after a failed start), then decide again.
    StartAgain,
    /// Stop the harness session with its state, free the sandbox: `suspended`.
    Suspend,
    /// Cut the start under way short, then close.
    CutStartAndClose,
    /// Cut the turn under way short, then close.
    CutTurnAndClose,
    /// Stop what the session holds and end it: `closed`.
    Close,
    /// A suspended session ends: let the sandboxes free what they keep for it.
    Discard,
    /// Cut the turn under way short.
    CutTurn,
    /// Nothing to do: the command is already satisfied.
    Nothing,
    /// Refuse with a conflict; `None` means the standard `The session is <status>.`
    Refuse(Option<&'static str>),
}

/// The words of a refused `send()` while the session waits for input.
pub const WAITS_FOR_INPUT: &str = "The session waits for input: answer it with continue() first.";
/// The words of a `continue()` when nothing is awaited.
pub const WAITS_FOR_NO_INPUT: &str = "The session waits for no input: send it a message.";

/// What the manager must do when `command` reaches a session in `status`.
///
/// `awaits_input` tells whether a suspended session was suspended while it waited for input: then
/// `continue()` resumes it and `send()` refuses, as it would have before the suspension.
pub fn decide(status: SessionStatus, command: Command, awaits_input: bool) -> Decision {
    use Command as C;
    use Decision as D;
    use SessionStatus as S;
    match (status, command) {
        (S::Preparing, C::Send | C::Continue) => D::WaitReady,
        (S::Preparing, C::Suspend) => D::Refuse(None),
        (S::Preparing, C::Close) => D::CutStartAndClose,
        (S::Idle, C::Send) => D::StartTurn,
        (S::Idle, C::Continue) => D::Refuse(Some(WAITS_FOR_NO_INPUT)),
        (S::Idle | S::AwaitingInput, C::Suspend) => D::Suspend,
        (S::Idle | S::AwaitingInput | S::Failed, C::Close) => D::Close,
        (S::Busy, C::Send | C::Continue | C::Suspend) => D::Refuse(None),
        (S::Busy, C::Close) => D::CutTurnAndClose,
        (S::Busy, C::Interrupt) => D::CutTurn,
        (S::AwaitingInput, C::Send) => D::Refuse(Some(WAITS_FOR_INPUT)),
        (S::AwaitingInput, C::Continue) => D::StartTurn,
        (S::Suspended, C::Send) if awaits_input => D::Refuse(Some(WAITS_FOR_INPUT)),
        (S::Suspended, C::Continue) if !awaits_input => D::Refuse(Some(WAITS_FOR_NO_INPUT)),
        (S::Suspended, C::Send | C::Continue) => D::Resume,
        (S::Suspended, C::Suspend) => D::Nothing,
        (S::Suspended, C::Close) => D::Discard,
        (S::Failed, C::Send) => D::StartAgain,
        (S::Failed, C::Continue | C::Suspend) => D::Refuse(None),
        (S::Closed | S::Interrupted, C::Send | C::Continue | C::Suspend | C::Close) => {
            D::Refuse(None)
        }
        (_, C::Interrupt) => D::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Command as C;
    use Decision as D;
    use SessionStatus as S;

    /// Every row of the table in the module's documentation, and the interrupt column.
    #[test]
    fn every_row_of_the_table() {
        let rows: [(S, [D; 4]); 8] = [
            (
                S::Preparing,
                [
                    D::WaitReady,
                    D::WaitReady,
                    D::Refuse(None),
                    D::CutStartAndClose,
                ],
            ),
            (
                S::Idle,
                [
                    D::StartTurn,
                    D::Refuse(Some(WAITS_FOR_NO_INPUT)),
                    D::Suspend,
                    D::Close,
                ],
            ),
            (
                S::Busy,
                [
                    D::Refuse(None),
                    D::Refuse(None),
                    D::Refuse(None),
                    D::CutTurnAndClose,
                ],
            ),
            (
                S::AwaitingInput,
                [
                    D::Refuse(Some(WAITS_FOR_INPUT)),
                    D::StartTurn,
                    D::Suspend,
                    D::Close,
                ],
            ),
            (
                S::Suspended,
                [
                    D::Resume,
                    D::Refuse(Some(WAITS_FOR_NO_INPUT)),
                    D::Nothing,
                    D::Discard,
                ],
            ),
            (
                S::Failed,
                [D::StartAgain, D::Refuse(None), D::Refuse(None), D::Close],
            ),
            (
                S::Closed,
                [
                    D::Refuse(None),
                    D::Refuse(None),
                    D::Refuse(None),
                    D::Refuse(None),
                ],
            ),
            (
                S::Interrupted,
                [
                    D::Refuse(None),
                    D::Refuse(None),
                    D::Refuse(None),
                    D::Refuse(None),
                ],
            ),
        ];
        for (status, expected) in rows {
            let got =
                [C::Send, C::Continue, C::Suspend, C::Close].map(|c| decide(status, c, false));
            assert_eq!(got, expected, "row {status}");
            let interrupt = decide(status, C::Interrupt, false);
            let want = if status == S::Busy {
                D::CutTurn
            } else {
                D::Nothing
            };
            assert_eq!(interrupt, want, "interrupt of {status}");
        }
    }

    #[test]
    fn a_session_suspended_while_it_waited_still_waits() {
        assert_eq!(decide(S::Suspended, C::Continue, true), D::Resume);
        assert_eq!(
            decide(S::Suspended, C::Send, true),
            D::Refuse(Some(WAITS_FOR_INPUT))
        );
    }
}
