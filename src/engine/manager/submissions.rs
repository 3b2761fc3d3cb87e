//! Idempotent turns: a `submissionId` given to `send()` or `continue()` is kept with the session
//! (its last [`KEPT_SUBMISSIONS`]), so that the same id again finds the turn it started rather
//! than starting another, and the same id with another request is refused.

use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionRecord, Submission};

/// How many submissions a session keeps, the newest.
pub const KEPT_SUBMISSIONS: usize = 100;

/// A request's `submissionId`, with the digest of what it submits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionAsk {
    /// The caller's id.
    pub id: String,
    /// The digest of the request (its message, or its answers).
    pub digest: String,
}

/// What a session knows of a submission: the reply id of the turn it started, if any.
///
/// # Errors
/// [`SessionError::Conflict`] when the id was submitted with another request.
pub fn seen(record: &SessionRecord, ask: &SubmissionAsk) -> Result<Option<String>> {
    match record.submissions.iter().rev().find(|s| s.id == ask.id) {
        None => Ok(None),
        Some(known) if known.digest == ask.digest => Ok(Some(known.reply_id.clone())),
        Some(_) => Err(SessionError::conflict(
            &record.summary.id,
            record.summary.status,
            format!(
                "The submission {} was sent before with another message.",
                ask.id
            ),
        )),
    }
}

/// Keeps `ask` as the submission of the turn writing `reply_id`, forgetting the oldest past
/// [`KEPT_SUBMISSIONS`].
pub fn remember(record: &mut SessionRecord, ask: &SubmissionAsk, reply_id: &str) {
    record.submissions.retain(|s| s.id != ask.id);
    record.submissions.push(Submission {
        id: ask.id.clone(),
        digest: ask.digest.clone(),
        reply_id: reply_id.to_owned(),
    });
    let extra = record.submissions.len().saturating_sub(KEPT_SUBMISSIONS);
    record.submissions.drain(..extra);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::session::{SessionStatus, SessionSummary, Timestamp};
    use serde_json::json;

    fn record() -> SessionRecord {
        SessionRecord {
            summary: SessionSummary::new(
                "s".into(),
                SessionStatus::Idle,
                json!({}),
                Timestamp::from_millis(0.0),
            ),
            messages: Vec::new(),
            command_results: Vec::new(),
            submissions: Vec::new(),
        }
    }

    fn ask(id: &str, digest: &str) -> SubmissionAsk {
        SubmissionAsk {
            id: id.into(),
            digest: digest.into(),
        }
    }

    #[test]
    fn the_same_submission_finds_its_turn_another_request_is_refused() {
        let mut record = record();
        assert_eq!(seen(&record, &ask("a", "d1")).unwrap(), None);
        remember(&mut record, &ask("a", "d1"), "reply-a");
        assert_eq!(
            seen(&record, &ask("a", "d1")).unwrap().as_deref(),
            Some("reply-a")
        );
        assert!(matches!(
            seen(&record, &ask("a", "d2")),
            Err(SessionError::Conflict { .. })
        ));
    }

    #[test]
    fn only_the_last_hundred_are_kept() {
        let mut record = record();
        for i in 0..150 {
            remember(&mut record, &ask(&format!("s{i}"), "d"), &format!("r{i}"));
        }
        assert_eq!(record.submissions.len(), KEPT_SUBMISSIONS);
        assert_eq!(record.submissions[0].id, "s50");
        assert_eq!(seen(&record, &ask("s49", "d")).unwrap(), None);
        assert_eq!(
            seen(&record, &ask("s149", "d")).unwrap().as_deref(),
            Some("r149")
        );
    }
}
