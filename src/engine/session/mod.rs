//! Sessions: what a session is ([`record`]), how its status may change ([`lifecycle`]), its
//! conversation's messages ([`messages`]), the answers to a paused turn ([`answers`]), and
//! conversations imported into a new one ([`import`]): the pure rules the manager applies,
//! without I/O.

pub mod answers;
pub mod import;
pub mod lifecycle;
pub mod messages;
pub mod record;
pub mod timestamp;

pub use record::{
    ApprovalVerdict, ExecResult, KeyedCommand, PendingApproval, PendingInput, PendingToolCall,
    SessionRecord, SessionStatus, SessionSummary, SessionUsage, StoredMessage, Submission,
    Timestamp,
};
