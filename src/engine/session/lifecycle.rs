//! The session lifecycle as one pure function: [`decide`] takes a session's status and what
//! reaches it (a caller's [`Command`], or an [`Event`] of the manager: a start or a turn that
//! ended, a harness session that stopped or would not, a timer, the shutdown, the recovery), and
//! says what the manager must do: the status the session takes ([`Decision::Become`]), the work to
//! do first, or a refusal with the words users see. No status is set anywhere else: the manager
//! applies `Become` and nothing else changes a status.
//!
//! ```text
//!              create()                         send() / continue()
//!   [*] ───────────────► preparing ──ready──► idle ─────────────────► busy
//!                          │   ▲               ▲ │ ▲                 │  │
//!             could not ───┘   │ next message  │ │ └──the turn ends──┘  │ the harness keeps an
//!             start: failed ───┘ / continue()  │ │                      ▼ unfinished turn
//!                              │               │ │ idle timeout,   awaiting-input
//!                   suspended ◄┴───────────────┼─┘ suspend(), ◄────────┘ │
//!                        │                     │   shutdown()            │ continue()
//!                        │ close(), closeSuspendedAfterMs                └──► busy
//!                        ▼
//!                     closed            a crash: every live status ──► interrupted
//! ```
//!
//! The commands:
//!
//! | status           | send()           | continue()          | suspend()  | close()        | interrupt() |
//! |------------------|------------------|---------------------|------------|----------------|-------------|
//! | `preparing`      | wait, then again | wait, then again    | wait, again| cut the start  | nothing     |
//! | `idle`           | turn             | refuse: no input    | suspend    | close          | nothing     |
//! | `busy`           | refuse           | refuse              | refuse     | cut the turn   | cut the turn|
//! | `awaiting-input` | refuse: continue | turn                | suspend    | close          | nothing     |
//! | `suspended`      | resume, again    | resume, again       | nothing    | discard        | nothing     |
//! | `failed`         | start again      | start again         | refuse     | close          | nothing     |
//! | `closed`         | refuse           | refuse              | refuse     | nothing        | nothing     |
//! | `interrupted`    | refuse           | refuse              | refuse     | close          | nothing     |
//!
//! `exec()` (a shell command in the session's sandbox) changes no status: it waits for a
//! `preparing` session, and for the turn of a `busy` one, to end; runs in `idle` and
//! `awaiting-input`; resumes a `suspended` session and starts a `failed` one again first; and is
//! refused by `closed` and `interrupted` ones.
//!
//! The events (`·`: cannot happen in that status, nothing changes):
//!
//! | event                      | preparing          | idle, awaiting-input | busy        | suspended | failed    | closed | interrupted |
//! |----------------------------|--------------------|----------------------|-------------|-----------|-----------|--------|-------------|
//! | brought back               | ·                  | ·                    | ·           | preparing | preparing | ·      | ·           |
//! | turn began                 | ·                  | busy                 | ·           | ·         | ·         | ·      | ·           |
//! | turn ended (unfinished?)   | ·                  | ·                    | awaiting-input / idle | · | ·     | ·      | ·           |
//! | start succeeded (waits?)   | awaiting-input / idle | ·                 | ·           | ·         | ·         | ·      | ·           |
//! | start failed (resuming?)   | suspended / failed | ·                    | ·           | ·         | ·         | ·      | ·           |
//! | nothing to resume from     | ·                  | ·                    | ·           | interrupted | ·       | ·      | ·           |
//! | stopped with its state     | ·                  | suspended            | suspended   | ·         | ·         | ·      | ·           |
//! | stop failed                | ·                  | interrupted          | interrupted | ·         | ·         | ·      | ·           |
//! | closed                     | closed             | closed               | closed      | closed    | closed    | ·      | closed      |
//! | idle timeout               | ·                  | suspend              | ·           | ·         | ·         | ·      | ·           |
//! | suspended too long         | ·                  | ·                    | ·           | discard   | ·         | ·      | ·           |
//! | shutdown                   | cut the start      | suspend              | cut the turn| ·         | ·         | ·      | ·           |
//! | found live at start        | interrupted        | interrupted          | interrupted | ·         | ·         | ·      | ·           |

use super::SessionStatus;

/// What a caller asks of a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    /// `send()`: a user message.
    Send,
    /// `continue()`: the answers a paused turn waits for.
    Continue,
    /// `suspend()`.
    Suspend,
    /// `close()`.
    Close,
    /// `interrupt()`.
    Interrupt,
    /// `exec()`: a shell command in the session's sandbox.
    Exec,
}

/// What happens to a session besides the callers' commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// A suspended or failed session is brought back: its start begins.
    BroughtBack,
    /// A turn began.
    TurnBegan,
    /// The turn ended, however it ended; `unfinished`: the harness session still holds an
    /// unfinished turn (`hasUnfinishedTurn()`), or the session still waits for answers.
    TurnEnded {
        /// Whether the session waits for input.
        unfinished: bool,
    },
    /// The start succeeded; `waits`: the harness session holds an unfinished turn, or the session
    /// was suspended while it waited for input.
    StartSucceeded {
        /// Whether the session waits for input.
        waits: bool,
    },
    /// The start failed, or was cut short; `resuming`: it was a resume.
    StartFailed {
        /// Whether it was a resume (the session then stays suspended).
        resuming: bool,
    },
    /// A resume found no state to resume from.
    NothingToResume,
    /// The harness session stopped and gave its state: the session is suspended.
    Stopped,
    /// The harness session could not be stopped: its state is lost.
    StopFailed,
    /// What the session held is given back for good: it is closed.
    Closed,
    /// `idleTimeoutMs` passed.
    IdleTimeout,
    /// `closeSuspendedAfterMs` passed.
    SuspendedTooLong,
    /// `shutdown()`.
    Shutdown,
    /// At start, the store has the session live: the process that held it stopped without
    /// suspending it.
    FoundLiveAtStart,
}

/// What reaches a session: a command or an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A caller's command.
    Command(Command),
    /// One of the manager's events.
    Event(Event),
}

/// What the manager must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// The session takes this status.
    Become(SessionStatus),
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
    /// Cut the start under way short.
    CutStart,
    /// Cut the start under way short, then close.
    CutStartAndClose,
    /// Cut the turn under way short, then close.
    CutTurnAndClose,
    /// Stop what the session holds and end it: `closed`.
    Close,
    /// A suspended session ends: let the sandboxes free what they keep for it, then `closed`.
    Discard,
    /// Cut the turn under way short.
    CutTurn,
    /// Nothing to do.
    Nothing,
    /// Refuse with a conflict; `None` means the standard `The session is <status>.`
    Refuse(Option<&'static str>),
    /// Run the command now, the status unchanged.
    RunCommand,
    /// Wait until the turn under way ends, then decide again.
    WaitTurnOver,
}

/// The words of a refused `send()` while the session waits for input.
pub const WAITS_FOR_INPUT: &str = "The session waits for input: answer it with continue() first.";
/// The words of a `continue()` when nothing is awaited.
pub const WAITS_FOR_NO_INPUT: &str = "The session waits for no input: send it a message.";

/// The status of a new session.
pub const NEW: SessionStatus = SessionStatus::Preparing;

/// What the manager must do when `input` reaches a session in `status`.
pub fn decide(status: SessionStatus, input: Input) -> Decision {
    match input {
        Input::Command(command) => on_command(status, command),
        Input::Event(event) => on_event(status, event),
    }
}

fn on_command(status: SessionStatus, command: Command) -> Decision {
    use Command as C;
    use Decision as D;
    use SessionStatus as S;
    match (status, command) {
        (S::Preparing, C::Send | C::Continue | C::Suspend) => D::WaitReady,
        (S::Preparing, C::Close) => D::CutStartAndClose,
        (S::Idle, C::Send) | (S::AwaitingInput, C::Continue) => D::StartTurn,
        (S::Idle, C::Continue) => D::Refuse(Some(WAITS_FOR_NO_INPUT)),
        (S::AwaitingInput, C::Send) => D::Refuse(Some(WAITS_FOR_INPUT)),
        (S::Idle | S::AwaitingInput, C::Suspend) => D::Suspend,
        (S::Idle | S::AwaitingInput | S::Failed | S::Interrupted, C::Close) => D::Close,
        (S::Busy, C::Close) => D::CutTurnAndClose,
        (S::Busy, C::Interrupt) => D::CutTurn,
        (S::Suspended, C::Send | C::Continue) => D::Resume,
        (S::Suspended, C::Suspend) | (S::Closed, C::Close) => D::Nothing,
        (S::Suspended, C::Close) => D::Discard,
        (S::Failed, C::Send | C::Continue) => D::StartAgain,
        (S::Busy | S::Failed | S::Closed | S::Interrupted, C::Send | C::Continue | C::Suspend) => {
            D::Refuse(None)
        }
        (_, C::Interrupt) => D::Nothing,
        (S::Preparing, C::Exec) => D::WaitReady,
        (S::Idle | S::AwaitingInput, C::Exec) => D::RunCommand,
        (S::Busy, C::Exec) => D::WaitTurnOver,
        (S::Suspended, C::Exec) => D::Resume,
        (S::Failed, C::Exec) => D::StartAgain,
        (S::Closed | S::Interrupted, C::Exec) => D::Refuse(None),
    }
}

fn on_event(status: SessionStatus, event: Event) -> Decision {
    use Decision as D;
    use Event as E;
    use SessionStatus as S;
    let waiting = |waits: bool| {
        if waits {
            S::AwaitingInput
        } else {
            S::Idle
        }
    };
    match (status, event) {
        (S::Suspended | S::Failed, E::BroughtBack) => D::Become(S::Preparing),
        (S::Idle | S::AwaitingInput, E::TurnBegan) => D::Become(S::Busy),
        (S::Busy, E::TurnEnded { unfinished }) => D::Become(waiting(unfinished)),
        (S::Preparing, E::StartSucceeded { waits }) => D::Become(waiting(waits)),
        (S::Preparing, E::StartFailed { resuming: true }) => D::Become(S::Suspended),
        (S::Preparing, E::StartFailed { resuming: false }) => D::Become(S::Failed),
        (S::Suspended, E::NothingToResume) => D::Become(S::Interrupted),
        (S::Idle | S::AwaitingInput | S::Busy, E::Stopped) => D::Become(S::Suspended),
        (S::Idle | S::AwaitingInput | S::Busy, E::StopFailed) => D::Become(S::Interrupted),
        (status, E::Closed) if status != S::Closed => D::Become(S::Closed),
        (S::Idle | S::AwaitingInput, E::IdleTimeout | E::Shutdown) => D::Suspend,
        (S::Suspended, E::SuspendedTooLong) => D::Discard,
        (S::Preparing, E::Shutdown) => D::CutStart,
        (S::Busy, E::Shutdown) => D::CutTurn,
        (status, E::FoundLiveAtStart) if status.is_live() => D::Become(S::Interrupted),
        _ => D::Nothing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Command as C;
    use Decision as D;
    use Event as E;
    use SessionStatus as S;

    /// The statuses in the order of the tables' columns.
    const STATUSES: [S; 8] = [
        S::Preparing,
        S::Idle,
        S::Busy,
        S::AwaitingInput,
        S::Suspended,
        S::Failed,
        S::Closed,
        S::Interrupted,
    ];

    fn check(input: Input, row: [D; 8]) {
        for (status, want) in STATUSES.into_iter().zip(row) {
            assert_eq!(decide(status, input), want, "{input:?} in {status}");
        }
    }

    const WAIT: D = D::WaitReady;
    const NO: D = D::Refuse(None);
    const NOP: D = D::Nothing;
    const fn to(status: S) -> D {
        D::Become(status)
    }

    // Columns: preparing, idle, busy, awaiting-input, suspended, failed, closed, interrupted.

    #[test]
    fn send() {
        let row = [
            WAIT,
            D::StartTurn,
            NO,
            D::Refuse(Some(WAITS_FOR_INPUT)),
            D::Resume,
            D::StartAgain,
            NO,
            NO,
        ];
        check(Input::Command(C::Send), row);
    }

    #[test]
    fn continue_() {
        let row = [
            WAIT,
            D::Refuse(Some(WAITS_FOR_NO_INPUT)),
            NO,
            D::StartTurn,
            D::Resume,
            D::StartAgain,
            NO,
            NO,
        ];
        check(Input::Command(C::Continue), row);
    }

    #[test]
    fn suspend() {
        let row = [WAIT, D::Suspend, NO, D::Suspend, NOP, NO, NO, NO];
        check(Input::Command(C::Suspend), row);
    }

    #[test]
    fn close() {
        let row = [
            D::CutStartAndClose,
            D::Close,
            D::CutTurnAndClose,
            D::Close,
            D::Discard,
            D::Close,
            NOP,
            D::Close,
        ];
        check(Input::Command(C::Close), row);
    }

    #[test]
    fn interrupt() {
        let row = [NOP, NOP, D::CutTurn, NOP, NOP, NOP, NOP, NOP];
        check(Input::Command(C::Interrupt), row);
    }

    #[test]
    fn exec() {
        let row = [
            WAIT,
            D::RunCommand,
            D::WaitTurnOver,
            D::RunCommand,
            D::Resume,
            D::StartAgain,
            NO,
            NO,
        ];
        check(Input::Command(C::Exec), row);
    }

    #[test]
    fn brought_back() {
        let row = [
            NOP,
            NOP,
            NOP,
            NOP,
            to(S::Preparing),
            to(S::Preparing),
            NOP,
            NOP,
        ];
        check(Input::Event(E::BroughtBack), row);
    }

    #[test]
    fn turn_began() {
        let row = [NOP, to(S::Busy), NOP, to(S::Busy), NOP, NOP, NOP, NOP];
        check(Input::Event(E::TurnBegan), row);
    }

    #[test]
    fn turn_ended_with_an_unfinished_harness_turn() {
        let row = [NOP, NOP, to(S::AwaitingInput), NOP, NOP, NOP, NOP, NOP];
        check(Input::Event(E::TurnEnded { unfinished: true }), row);
    }

    #[test]
    fn turn_ended_without_an_unfinished_harness_turn() {
        let row = [NOP, NOP, to(S::Idle), NOP, NOP, NOP, NOP, NOP];
        check(Input::Event(E::TurnEnded { unfinished: false }), row);
    }

    #[test]
    fn start_succeeded_waiting_for_input() {
        let row = [to(S::AwaitingInput), NOP, NOP, NOP, NOP, NOP, NOP, NOP];
        check(Input::Event(E::StartSucceeded { waits: true }), row);
    }

    #[test]
    fn start_succeeded() {
        let row = [to(S::Idle), NOP, NOP, NOP, NOP, NOP, NOP, NOP];
        check(Input::Event(E::StartSucceeded { waits: false }), row);
    }

    #[test]
    fn start_failed() {
        let row = [to(S::Failed), NOP, NOP, NOP, NOP, NOP, NOP, NOP];
        check(Input::Event(E::StartFailed { resuming: false }), row);
    }

    #[test]
    fn resume_failed() {
        let row = [to(S::Suspended), NOP, NOP, NOP, NOP, NOP, NOP, NOP];
        check(Input::Event(E::StartFailed { resuming: true }), row);
    }

    #[test]
    fn nothing_to_resume_from() {
        let row = [NOP, NOP, NOP, NOP, to(S::Interrupted), NOP, NOP, NOP];
        check(Input::Event(E::NothingToResume), row);
    }

    #[test]
    fn stopped_with_its_state() {
        let s = to(S::Suspended);
        let row = [NOP, s.clone(), s.clone(), s, NOP, NOP, NOP, NOP];
        check(Input::Event(E::Stopped), row);
    }

    #[test]
    fn stop_failed() {
        let x = to(S::Interrupted);
        let row = [NOP, x.clone(), x.clone(), x, NOP, NOP, NOP, NOP];
        check(Input::Event(E::StopFailed), row);
    }

    #[test]
    fn closed() {
        let c = to(S::Closed);
        let row = [
            c.clone(),
            c.clone(),
            c.clone(),
            c.clone(),
            c.clone(),
            c.clone(),
            NOP,
            c,
        ];
        check(Input::Event(E::Closed), row);
    }

    #[test]
    fn idle_timeout() {
        let row = [NOP, D::Suspend, NOP, D::Suspend, NOP, NOP, NOP, NOP];
        check(Input::Event(E::IdleTimeout), row);
    }

    #[test]
    fn suspended_too_long() {
        let row = [NOP, NOP, NOP, NOP, D::Discard, NOP, NOP, NOP];
        check(Input::Event(E::SuspendedTooLong), row);
    }

    #[test]
    fn shutdown() {
        let row = [
            D::CutStart,
            D::Suspend,
            D::CutTurn,
            D::Suspend,
            NOP,
            NOP,
            NOP,
            NOP,
        ];
        check(Input::Event(E::Shutdown), row);
    }

    #[test]
    fn found_live_at_start() {
        let x = to(S::Interrupted);
        let row = [x.clone(), x.clone(), x.clone(), x, NOP, NOP, NOP, NOP];
        check(Input::Event(E::FoundLiveAtStart), row);
    }

    /// Every input reaches every status: the tests above are the whole table.
    #[test]
    fn the_tables_cover_every_input() {
        let commands = [
            C::Send,
            C::Continue,
            C::Suspend,
            C::Close,
            C::Interrupt,
            C::Exec,
        ];
        let events = [
            E::BroughtBack,
            E::TurnBegan,
            E::TurnEnded { unfinished: true },
            E::TurnEnded { unfinished: false },
            E::StartSucceeded { waits: true },
            E::StartSucceeded { waits: false },
            E::StartFailed { resuming: true },
            E::StartFailed { resuming: false },
            E::NothingToResume,
            E::Stopped,
            E::StopFailed,
            E::Closed,
            E::IdleTimeout,
            E::SuspendedTooLong,
            E::Shutdown,
            E::FoundLiveAtStart,
        ];
        // Written as a match so that a new command or event fails to compile until it is listed.
        for command in commands {
            match command {
                C::Send | C::Continue | C::Suspend | C::Close | C::Interrupt | C::Exec => {}
            }
        }
        for event in events {
            match event {
                E::BroughtBack
                | E::TurnBegan
                | E::TurnEnded { .. }
                | E::StartSucceeded { .. }
                | E::StartFailed { .. }
                | E::NothingToResume
                | E::Stopped
                | E::StopFailed
                | E::Closed
                | E::IdleTimeout
                | E::SuspendedTooLong
                | E::Shutdown
                | E::FoundLiveAtStart => {}
            }
        }
        assert_eq!(commands.len() + events.len(), 22);
    }
}
