//! The `sessions` rows as `list()` reads them, packed into one buffer on the SQLite thread and
//! decoded by the caller, and the checks and errors of a stored summary (those of the listing
//! the thread keeps for `list_json` and `list_since` too).

use crate::engine::error::{Result, SessionError};
use crate::engine::session::{SessionStatus, SessionSummary};

/// A byte range of [`PackedSummaries::text`].
#[derive(Clone, Copy)]
struct Span {
    start: usize,
    end: usize,
}

/// One `sessions` row of [`PackedSummaries`].
struct PackedSummary {
    id: Span,
    updated_at_key: i64,
    /// The summary as JSON; none only in a damaged row.
    summary: Option<Span>,
}

/// Every `sessions` row, the text of all of them in one buffer: `list()` moves two allocations
/// from the thread to the caller, not a few per row, and the caller decodes (and frees) in its
/// own allocator arena, which measured about twice as fast as decoding on the thread.
#[derive(Default)]
pub(super) struct PackedSummaries {
    text: String,
    rows: Vec<PackedSummary>,
}

impl PackedSummaries {
    /// Appends the row of session `id`, its order key and its summary (none in a damaged row).
    pub(super) fn push_row(&mut self, id: &str, updated_at_key: i64, summary: Option<&str>) {
        let id = self.push(Some(id)).unwrap_or(Span { start: 0, end: 0 });
        let summary = self.push(summary);
        self.rows.push(PackedSummary {
            id,
            updated_at_key,
            summary,
        });
    }

    /// Appends `text`, if any, and gives its span.
    fn push(&mut self, text: Option<&str>) -> Option<Span> {
        let text = text?;
        let start = self.text.len();
        self.text.push_str(text);
        Some(Span {
            start,
            end: self.text.len(),
        })
    }

    fn str(&self, span: Span) -> &str {
        // Spans are made by `push` on this buffer, on `str` boundaries.
        self.text.get(span.start..span.end).unwrap_or_default()
    }

    /// Sorts the rows the most recently updated first, ties by id: the order of
    /// [`crate::engine::store::sort_newest_first`], since order keys sort like `f64::total_cmp`
    /// and ids are unique.
    fn newest_first(&mut self) -> Vec<PackedSummary> {
        let mut rows = std::mem::take(&mut self.rows);
        rows.sort_unstable_by(|a, b| {
            b.updated_at_key
                .cmp(&a.updated_at_key)
                .then_with(|| self.str(a.id).cmp(self.str(b.id)))
        });
        rows
    }

    /// The summary text of `row`.
    fn summary(&self, row: &PackedSummary) -> Result<&str> {
        row.summary
            .map(|span| self.str(span))
            .ok_or_else(|| damaged_summary(self.str(row.id)))
    }

    /// The summaries, newest first, each decoded once.
    ///
    /// A row that cannot be decoded is set aside: it is given, with why, in the second list.
    pub(super) fn into_newest_first(mut self) -> (Vec<SessionSummary>, Vec<Unreadable>) {
        let rows = self.newest_first();
        let mut summaries = Vec::with_capacity(rows.len());
        let mut unreadable = Vec::new();
        for row in &rows {
            let id = self.str(row.id);
            match self.summary(row).and_then(|text| decode_summary(id, text)) {
                Ok(summary) => summaries.push(summary),
                Err(error) => unreadable.push((id.to_owned(), error)),
            }
        }
        (summaries, unreadable)
    }
}

/// A session whose row could not be read, and why.
pub(super) type Unreadable = (String, SessionError);

/// Checks a stored summary: JSON, with a status this build knows.
pub(super) fn check_summary_json(id: &str, text: &str) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        status: std::borrow::Cow<'a, str>,
    }
    let probe: Probe<'_> = serde_json::from_str(text).map_err(|_| unreadable(id, "its summary"))?;
    if SessionStatus::ALL
        .iter()
        .any(|known| known.as_str() == probe.status)
    {
        Ok(())
    } else {
        Err(unreadable(id, "its status"))
    }
}

pub(super) fn damaged_summary(id: &str) -> SessionError {
    SessionError::host(format!(
        "the sqlite store holds a damaged summary for session {id}"
    ))
}

/// A summary from its JSON text.
pub(super) fn decode_summary(id: &str, text: &str) -> Result<SessionSummary> {
    serde_json::from_str(text).map_err(|_| unreadable(id, "its summary"))
}

pub(super) fn unreadable(id: &str, what: &str) -> SessionError {
    SessionError::host(format!(
        "the sqlite store holds an unreadable session {id}: {what} could not be decoded"
    ))
}
