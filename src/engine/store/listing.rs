//! What a store lists: every session's summary as JSON, each under the stamp it was written
//! with, and their list order (the most recently updated first, ties by id), so that `list()`
//! only joins text and [`super::SessionStore::list_since`] writes only what changed.
//!
//! A write costs a hash-map insert: the order is made when a list first asks for it, then kept
//! by the moves the writes since have queued, applied at the next list (writes are the hot path
//! of a store, lists the rare one). Too many moves queued, and the order is made again instead.
//!
//! Invariants:
//! - every change (a summary put, a session removed) and every new listing takes a new stamp
//!   from the store's [`Stamps`], greater than any the store gave before: a listing whose stamp
//!   is a caller's `known` has not changed since the answer that gave that caller `known`;
//! - a stamp names one summary as it was written, once, in this store;
//! - the order, once applied, holds each listed session once, at the place of its summary's
//!   [`order_key`]: that of [`super::sort_newest_first`] ([`order_key`]s sort like
//!   `f64::total_cmp`, and ids are unique).

use std::cmp::Reverse;
use std::collections::{BTreeSet, HashMap};
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Where a store's stamps come from: shared by every listing the store builds (the SQLite store
/// builds a new one when another connection wrote the file), so that stamps only grow.
pub type Stamps = Arc<AtomicU64>;

/// The place of a summary in the list: newest first, ties by id.
type Place = (Reverse<i64>, String);

/// A listed summary.
struct Listed {
    /// The summary as JSON text.
    json: Box<str>,
    /// The stamp it was written with.
    stamp: u64,
    /// Its `updatedAt`'s [`order_key`]: its place in the list.
    key: i64,
}

/// A session that changed place since the order was last applied: from its old key (none when
/// it is new) to its new one (none when it was removed).
struct Move {
    id: String,
    from: Option<i64>,
    to: Option<i64>,
}

/// Every summary of a store, as JSON, and their list order.
pub struct Listing {
    stamps: Stamps,
    /// The summaries, by session id.
    listed: HashMap<String, Listed>,
    /// The list order, once a list asked for it; `None` until then, or after too many moves.
    order: Option<BTreeSet<Place>>,
    /// The moves not applied to `order` yet (none while there is no order).
    moves: Vec<Move>,
    /// The stamp of the last change, or of the listing's making.
    stamp: u64,
}

impl Listing {
    /// An empty listing, stamped from `stamps`.
    pub fn new(stamps: Stamps) -> Self {
        let stamp = next(&stamps);
        Listing {
            stamps,
            listed: HashMap::new(),
            order: None,
            moves: Vec::new(),
            stamp,
        }
    }

    /// Lists the summary `json` of session `id`, in place of any before, at the place of
    /// `updated_at_key` (its `updatedAt`'s [`order_key`]).
    pub fn put(&mut self, id: &str, updated_at_key: i64, json: impl Into<Box<str>>) {
        self.stamp = next(&self.stamps);
        let listed = Listed {
            json: json.into(),
            stamp: self.stamp,
            key: updated_at_key,
        };
        let from = match self.listed.get_mut(id) {
            Some(kept) => Some(std::mem::replace(kept, listed).key),
            None => {
                self.listed.insert(id.to_owned(), listed);
                None
            }
        };
        if from != Some(updated_at_key) {
            self.queue(id, from, Some(updated_at_key));
        }
    }

    /// Takes session `id` off the list; whether it was on it.
    pub fn remove(&mut self, id: &str) -> bool {
        let Some(listed) = self.listed.remove(id) else {
            return false;
        };
        self.stamp = next(&self.stamps);
        self.queue(id, Some(listed.key), None);
        true
    }

    /// Queues a move for the order, when there is one to keep.
    fn queue(&mut self, id: &str, from: Option<i64>, to: Option<i64>) {
        if self.order.is_none() {
            return;
        }
        if self.moves.len() >= self.listed.len().max(64) {
            // Making the order again costs less than applying more moves than there are sessions.
            self.order = None;
            self.moves.clear();
            return;
        }
        self.moves.push(Move {
            id: id.to_owned(),
            from,
            to,
        });
    }

    /// The list order, made or brought up to date.
    fn order(&mut self) -> &BTreeSet<Place> {
        let listed = &self.listed;
        let order = self.order.get_or_insert_with(|| {
            self.moves.clear();
            listed
                .iter()
                .map(|(id, l)| (Reverse(l.key), id.clone()))
                .collect()
        });
        for change in self.moves.drain(..) {
            if let Some(from) = change.from {
                order.remove(&(Reverse(from), change.id.clone()));
            }
            if let Some(to) = change.to {
                order.insert((Reverse(to), change.id));
            }
        }
        order
    }

    /// The summaries, in list order.
    fn in_order(&mut self) -> impl Iterator<Item = (&str, &Listed)> {
        self.order();
        let listed = &self.listed;
        self.order.iter().flatten().filter_map(move |(_, id)| {
            listed
                .get_key_value(id.as_str())
                .map(|(id, l)| (id.as_str(), l))
        })
    }

    /// The number of summaries listed.
    pub fn len(&self) -> usize {
        self.listed.len()
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.listed.is_empty()
    }

    /// The ids, in list order.
    pub fn ids(&mut self) -> impl Iterator<Item = &str> {
        self.in_order().map(|(id, _)| id)
    }

    /// The list as JSON text: `[summary, ...]`.
    pub fn json(&mut self) -> String {
        let size = self
            .listed
            .values()
            .map(|l| l.json.len() + 1)
            .sum::<usize>();
        let mut json = String::with_capacity(size + 2);
        json.push('[');
        for (index, (_, listed)) in self.in_order().enumerate() {
            if index > 0 {
                json.push(',');
            }
            json.push_str(&listed.json);
        }
        json.push(']');
        json
    }

    /// The answer of [`super::SessionStore::list_since`] to a caller that was given the
    /// summaries stamped at most `known`: `[stamp]` alone when nothing changed since (`known` is
    /// the listing's stamp), else `[stamp, rows]`, a bare stamp for each summary stamped at most
    /// `known`, `[stamp, summary]` for the others.
    pub fn since(&mut self, known: u64) -> String {
        if known == self.stamp {
            return format!("[{known}]");
        }
        let fresh = self
            .listed
            .values()
            .filter(|l| l.stamp > known)
            .map(|l| l.json.len() + 24)
            .sum::<usize>();
        let mut json = String::with_capacity(fresh + self.listed.len() * 8 + 24);
        let _ = write!(json, "[{},[", self.stamp);
        for (index, (_, listed)) in self.in_order().enumerate() {
            if index > 0 {
                json.push(',');
            }
            if listed.stamp <= known {
                let _ = write!(json, "{}", listed.stamp);
            } else {
                let _ = write!(json, "[{},{}]", listed.stamp, listed.json);
            }
        }
        json.push_str("]]");
        json
    }
}

/// The next stamp of `stamps`.
fn next(stamps: &Stamps) -> u64 {
    stamps.fetch_add(1, Ordering::Relaxed) + 1
}

/// `x` as an integer that sorts like `f64::total_cmp` and turns back into the same bits.
pub fn order_key(x: f64) -> i64 {
    flip_negatives(x.to_bits() as i64)
}

/// The `f64` of an [`order_key`].
pub fn from_order_key(key: i64) -> f64 {
    f64::from_bits(flip_negatives(key) as u64)
}

/// Flips every bit but the sign of a negative number (`f64::total_cmp`'s trick: negative floats
/// sort backwards by their bits). It keeps the sign bit, which decides the flip, so it is its own
/// inverse.
fn flip_negatives(bits: i64) -> i64 {
    bits ^ ((((bits >> 63) as u64) >> 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn listing() -> Listing {
        Listing::new(Stamps::default())
    }

    fn answer(text: &str) -> Value {
        serde_json::from_str(text).expect("an answer is JSON")
    }

    #[test]
    fn lists_newest_first_ties_by_id_and_moves_a_summary_put_again() {
        let mut l = listing();
        l.put("b", order_key(1.0), r#"{"id":"b"}"#);
        l.put("a", order_key(1.0), r#"{"id":"a"}"#);
        l.put("c", order_key(-5.0), r#"{"id":"c"}"#);
        l.put("d", order_key(3.0), r#"{"id":"d"}"#);
        assert_eq!(l.ids().collect::<Vec<_>>(), ["d", "a", "b", "c"]);
        l.put("c", order_key(9.0), r#"{"id":"c","v":2}"#);
        assert_eq!(l.ids().collect::<Vec<_>>(), ["c", "d", "a", "b"]);
        assert_eq!(l.len(), 4, "put again replaces");
        assert_eq!(
            answer(&l.json()),
            json!([{"id":"c","v":2},{"id":"d"},{"id":"a"},{"id":"b"}])
        );
    }

    #[test]
    fn since_gives_only_what_changed_and_says_when_nothing_did() {
        let mut l = listing();
        l.put("a", order_key(1.0), r#"{"id":"a"}"#);
        l.put("b", order_key(2.0), r#"{"id":"b"}"#);
        let all = answer(&l.since(0));
        let stamp = all[0].as_u64().unwrap();
        assert_eq!(all[1][0][1], json!({"id":"b"}));
        assert_eq!(all[1][1][1], json!({"id":"a"}));
        let (a, b) = (all[1][1][0].clone(), all[1][0][0].clone());

        assert_eq!(answer(&l.since(stamp)), json!([stamp]), "unchanged");

        l.put("c", order_key(0.5), r#"{"id":"c"}"#);
        let after = answer(&l.since(stamp));
        assert!(after[0].as_u64().unwrap() > stamp);
        assert_eq!(after[1][0], b);
        assert_eq!(after[1][1], a);
        assert_eq!(after[1][2][1], json!({"id":"c"}));
    }

    #[test]
    fn a_removal_is_a_change() {
        let mut l = listing();
        l.put("a", order_key(1.0), r#"{"id":"a"}"#);
        l.put("b", order_key(2.0), r#"{"id":"b"}"#);
        let stamp = answer(&l.since(0))[0].as_u64().unwrap();
        assert!(l.remove("b"));
        assert!(!l.remove("b"), "gone already");
        let after = answer(&l.since(stamp));
        assert_ne!(after, json!([stamp]), "a removal is not nothing");
        assert_eq!(after[1].as_array().unwrap().len(), 1);
    }

    /// The order kept by queued moves, and made again after too many, is the order made from
    /// scratch: checked against a sort of the summaries after every step of a mixed workload.
    #[test]
    fn the_kept_order_is_always_the_sorted_order() {
        let mut l = listing();
        let mut expected: HashMap<String, i64> = HashMap::new();
        let mut seed = 7_u64;
        let mut random = move |below: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % below
        };
        for step in 0..3000 {
            let id = format!("s{}", random(90));
            if random(5) == 0 {
                assert_eq!(l.remove(&id), expected.remove(&id).is_some());
            } else {
                let key = order_key(random(40) as f64 - 20.0);
                l.put(&id, key, format!(r#"{{"id":"{id}"}}"#));
                expected.insert(id, key);
            }
            // Lists now and then, so that moves pile up (past the limit, too) between lists.
            if random(if step < 1500 { 3 } else { 200 }) == 0 {
                let mut sorted: Vec<(Reverse<i64>, String)> = expected
                    .iter()
                    .map(|(id, key)| (Reverse(*key), id.clone()))
                    .collect();
                sorted.sort();
                let want: Vec<&str> = sorted.iter().map(|(_, id)| id.as_str()).collect();
                assert_eq!(l.ids().collect::<Vec<_>>(), want, "at step {step}");
                assert_eq!(l.len(), expected.len());
            }
        }
    }

    #[test]
    fn a_new_listing_from_the_same_stamps_never_reuses_a_stamp() {
        let stamps = Stamps::default();
        let mut first = Listing::new(stamps.clone());
        first.put("a", order_key(1.0), r#"{"id":"a"}"#);
        let known = answer(&first.since(0))[0].as_u64().unwrap();
        let mut empty = Listing::new(stamps);
        assert_eq!(
            answer(&empty.since(known))[1],
            json!([]),
            "emptied is a change"
        );
    }
}
