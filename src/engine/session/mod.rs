//! Sessions: what a session is ([`record`]), how its status may change ([`lifecycle`]), and
//! conversations imported into a new one ([`import`]).

pub mod import;
pub mod lifecycle;
pub mod record;
pub mod timestamp;

pub use record::{
    ApprovalVerdict, ExecResult, KeyedCommand, PendingApproval, PendingInput, PendingToolCall,
    SessionRecord, SessionStatus, SessionSummary, SessionUsage, StoredMessage, Submission,
    Timestamp,
};
