//! What a store lists: every session's summary as JSON, kept in list order (the most recently
//! updated first, ties by id), each under the stamp it was written with, so that `list()` only
//! joins text and [`super::SessionStore::list_since`] writes only what changed.
//!
//! Invariants:
//! - every change (a summary put, a session removed) and every new listing takes a new stamp
//!   from the store's [`Stamps`], greater than any the store gave before: a listing whose stamp
//!   is a caller's `known` has not changed since the answer that gave that caller `known`;
//! - a stamp names one summary as it was written, once, in this store;
//! - the order is that of [`super::sort_newest_first`]: [`order_key`]s sort like
//!   `f64::total_cmp`, and ids are unique.

use std::cmp::Reverse;
use std::collections::{BTreeMap, HashMap};
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
}

/// Every summary of a store, in list order, as JSON.
pub struct Listing {
    stamps: Stamps,
    /// The summaries, in list order.
    order: BTreeMap<Place, Listed>,
    /// The order key of each session's summary: where to find it in `order`.
    keys: HashMap<String, i64>,
    /// The stamp of the last change, or of the listing's making.
    stamp: u64,
}

impl Listing {
    /// An empty listing, stamped from `stamps`.
    pub fn new(stamps: Stamps) -> Self {
        let stamp = next(&stamps);
        Listing {
            stamps,
            order: BTreeMap::new(),
            keys: HashMap::new(),
            stamp,
        }
    }

    /// Lists the summary `json` of session `id`, in place of any before, at the place of
    /// `updated_at_key` (its `updatedAt`'s [`order_key`]).
    pub fn put(&mut self, id: &str, updated_at_key: i64, json: impl Into<Box<str>>) {
        self.stamp = next(&self.stamps);
        if let Some(key) = self.keys.insert(id.to_owned(), updated_at_key) {
            if key != updated_at_key {
                self.order.remove(&(Reverse(key), id.to_owned()));
            }
        }
        self.order.insert(
            (Reverse(updated_at_key), id.to_owned()),
            Listed {
                json: json.into(),
                stamp: self.stamp,
            },
        );
    }

    /// Takes session `id` off the list; whether it was on it.
    pub fn remove(&mut self, id: &str) -> bool {
        let Some(key) = self.keys.remove(id) else {
            return false;
        };
        self.order.remove(&(Reverse(key), id.to_owned()));
        self.stamp = next(&self.stamps);
        true
    }

    /// The number of summaries listed.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether nothing is listed.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The ids, in list order.
    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.order.keys().map(|(_, id)| id.as_str())
    }

    /// The list as JSON text: `[summary, ...]`.
    pub fn json(&self) -> String {
        let size = self.order.values().map(|l| l.json.len() + 1).sum::<usize>();
        let mut json = String::with_capacity(size + 2);
        json.push('[');
        for (index, listed) in self.order.values().enumerate() {
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
    pub fn since(&self, known: u64) -> String {
        if known == self.stamp {
            return format!("[{known}]");
        }
        let fresh = self
            .order
            .values()
            .filter(|l| l.stamp > known)
            .map(|l| l.json.len() + 24)
            .sum::<usize>();
        let mut json = String::with_capacity(fresh + self.order.len() * 8 + 24);
        let _ = write!(json, "[{},[", self.stamp);
        for (index, listed) in self.order.values().enumerate() {
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

    #[test]
    fn a_new_listing_from_the_same_stamps_never_reuses_a_stamp() {
        let stamps = Stamps::default();
        let mut first = Listing::new(stamps.clone());
        first.put("a", order_key(1.0), r#"{"id":"a"}"#);
        let known = answer(&first.since(0))[0].as_u64().unwrap();
        let empty = Listing::new(stamps);
        assert_eq!(
            answer(&empty.since(known))[1],
            json!([]),
            "emptied is a change"
        );
    }
}
