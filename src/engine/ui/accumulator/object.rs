//! JavaScript objects in `serde_json`: assignment with `undefined` (a key that keeps its place,
//! absent from the JSON: the [`Ghosts`] of an object), object literals ([`Literal`]), and the
//! values of a chunk's fields as JavaScript sees them.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// The key order of a JavaScript object whose keys include some assigned `undefined`: every own
/// key in order, those absent from the JSON object included. `None` when there are none.
#[derive(Debug, Clone, Default)]
pub(super) struct Ghosts {
    order: Option<Vec<Cow<'static, str>>>,
}

/// `object[key] = value` as JavaScript does it, `None` standing for `undefined`.
pub(super) fn assign(
    object: &mut Map<String, Value>,
    ghosts: &mut Ghosts,
    key: &'static str,
    value: Option<Value>,
) {
    match value {
        Some(value) => {
            if let Some(slot) = object.get_mut(key) {
                *slot = value;
                return;
            }
            if let Some(order) = &mut ghosts.order {
                if let Some(position) = order.iter().position(|k| k == key) {
                    let index = order[..position]
                        .iter()
                        .filter(|k| object.contains_key(k.as_ref()))
                        .count();
                    object.shift_insert(index, key.to_owned(), value);
                    return;
                }
                order.push(Cow::Borrowed(key));
            }
            object.insert(key.to_owned(), value);
        }
        None => {
            let order = ghosts
                .order
                .get_or_insert_with(|| object.keys().map(|k| Cow::Owned(k.clone())).collect());
            if object.shift_remove(key).is_none() && !order.iter().any(|k| k == key) {
                order.push(Cow::Borrowed(key));
            }
        }
    }
}

/// `object[key] = value ?? object[key]` (and `object[key] = object[key]` for `None`): the key
/// becomes an own property, `undefined` if it was not one.
pub(super) fn assign_or_keep(
    object: &mut Map<String, Value>,
    ghosts: &mut Ghosts,
    key: &'static str,
    value: Option<Value>,
) {
    match value {
        Some(value) => assign(object, ghosts, key, Some(value)),
        None if object.contains_key(key) => {}
        None => assign(object, ghosts, key, None),
    }
}

/// A JavaScript object literal under construction.
pub(super) struct Literal {
    map: Map<String, Value>,
    order: Vec<Cow<'static, str>>,
    has_ghost: bool,
}

impl Literal {
    pub(super) fn new() -> Literal {
        Literal {
            map: Map::new(),
            order: Vec::new(),
            has_ghost: false,
        }
    }

    /// `key: value`, `None` being `undefined`.
    pub(super) fn field(mut self, key: &'static str, value: Option<Value>) -> Literal {
        self.order.push(Cow::Borrowed(key));
        match value {
            Some(value) => {
                self.map.insert(key.to_owned(), value);
            }
            None => self.has_ghost = true,
        }
        self
    }

    /// `...(value !== undefined ? { key: value } : {})`.
    pub(super) fn field_if(self, key: &'static str, value: Option<Value>) -> Literal {
        match value {
            Some(value) => self.field(key, Some(value)),
            None => self,
        }
    }

    pub(super) fn build(self) -> (Value, Ghosts) {
        let ghosts = Ghosts {
            order: self.has_ghost.then_some(self.order),
        };
        (Value::Object(self.map), ghosts)
    }
}

pub(super) fn string(s: &str) -> Option<Value> {
    Some(Value::String(s.to_owned()))
}

pub(super) fn object(map: &Option<Map<String, Value>>) -> Option<Value> {
    map.as_ref().map(|m| Value::Object(m.clone()))
}

/// A value of a chunk's own, for an assignment from a tool part's existing field.
#[derive(Debug)]
pub(super) enum Slot {
    /// `part.key = part.key`.
    Keep,
    /// `part.key = value`.
    Set(Option<Value>),
}

impl Slot {
    pub(super) fn into_value(self) -> Option<Value> {
        match self {
            Slot::Keep => None,
            Slot::Set(value) => value,
        }
    }
}

/// `part.key = value` for a [`Slot`].
pub(super) fn set_slot(
    part: &mut Map<String, Value>,
    ghosts: &mut Ghosts,
    key: &'static str,
    slot: Slot,
) {
    match slot {
        Slot::Keep => assign_or_keep(part, ghosts, key, None),
        Slot::Set(value) => assign(part, ghosts, key, value),
    }
}
