//! Sessions: what a session is ([`record`]) and how its status may change ([`lifecycle`]).

pub mod lifecycle;
pub mod record;
pub mod timestamp;

pub use record::{
    ApprovalVerdict, ExecResult, KeyedCommand, PendingApproval, PendingInput, PendingToolCall,
    SessionRecord, SessionStatus, SessionSummary, SessionUsage, StoredMessage, Submission,
    Timestamp,
};
