//! Reading options and inputs: a JSON value into a typed struct, once, with every refusal naming
//! its field path (`sandboxes.capacity`, `limits.timeoutMs`, `ports[1]`, `env.HOME`).
//!
//! Each option is a serde struct (`deny_unknown_fields`, `camelCase`) in the module of its domain;
//! the rules that serde's own types do not say (a duration, a count, a port, a flag) are the field
//! types here, each with its one message. [`read`] runs serde under [`serde_path_to_error`], so a
//! refusal becomes a [`SessionError::Input`] whose `path` is the field's and whose message starts
//! with it: `idleTimeoutMs must be a number of milliseconds, zero or more`.
//!
//! A rule's error text is the tail of the sentence (`must be a boolean`); [`read`] puts the path
//! in front. JavaScript hands over plain data only: numbers JSON cannot carry (`NaN`, `Infinity`)
//! arrive as their names, strings, and are refused here like any other wrong type.

use std::time::Duration;

use serde::de::{self, DeserializeOwned, Deserializer};
use serde::Deserialize;
use serde_json::Value;

use crate::engine::error::{Result, SessionError};

/// Reads `value` as a `T`: `what` names the call in a refusal of an unknown option
/// (`nope is not an option of sharedSandbox()`), and `root` is the path of `value` itself (`options`),
/// used when the whole value is of the wrong shape.
///
/// # Errors
/// [`SessionError::Input`] at the path of the first field at fault.
pub fn read<T: DeserializeOwned>(value: Value, root: &str, what: &str) -> Result<T> {
    serde_path_to_error::deserialize(value).map_err(|error| {
        let path = field_path(error.path());
        let text = error.inner().to_string();
        refusal(&path, root, what, &text)
    })
}

/// Reads JSON text as [`read`] does; text that is not JSON is refused at `root`.
///
/// # Errors
/// [`SessionError::Input`] at the path of the first field at fault.
pub fn read_json<T: DeserializeOwned>(json: &str, root: &str, what: &str) -> Result<T> {
    let value: Value = serde_json::from_str(json)
        .map_err(|e| SessionError::input(root, format!("{root} must be JSON: {e}")))?;
    read(value, root, what)
}

/// The path of serde_path_to_error as the package writes it: `a.b[0].c`, empty at the root.
fn field_path(path: &serde_path_to_error::Path) -> String {
    use serde_path_to_error::Segment;
    let mut out = String::new();
    for segment in path.iter() {
        match segment {
            Segment::Seq { index } => out.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(key);
            }
            Segment::Unknown => {}
        }
    }
    out
}

/// The input error of serde's `text` at `path`.
fn refusal(path: &str, root: &str, what: &str, text: &str) -> SessionError {
    // serde's own words for a field the struct does not have ("unknown field `x`, expected
    // ..."), whose path already ends with the field.
    if text.starts_with("unknown field `") {
        return SessionError::input(path, format!("{path} is not an option of {what}"));
    }
    let at = if path.is_empty() { root } else { path };
    if text.starts_with("must ") || text.starts_with("is ") {
        SessionError::input(at, format!("{at} {text}"))
    } else if let Some(expected) = text.strip_prefix("invalid type: ").and_then(expected_of) {
        SessionError::input(at, format!("{at} must be {expected}"))
    } else {
        SessionError::input(at, format!("{at}: {text}"))
    }
}

/// What serde expected, from its "invalid type: X, expected Y" message, in the package's words.
fn expected_of(text: &str) -> Option<&str> {
    let (_, expected) = text.rsplit_once(", expected ")?;
    Some(match expected {
        "a map" => "an object",
        "a sequence" => "an array",
        struct_name if struct_name.starts_with("struct ") => "an object",
        other => other,
    })
}

/// For an optional field (`#[serde(default, deserialize_with = "input::present")]`): absent, it is
/// `None`; given, even as `null`, it must be a `T`. JavaScript's optional options take `undefined`,
/// never `null`, and a `null` is refused as any other value of the wrong type.
///
/// # Errors
/// The refusal of `T`.
pub fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> std::result::Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// The longest duration an option takes, in milliseconds (about 31,700 years).
const MOST_MILLIS: f64 = 1e15;

/// A duration in milliseconds: a finite number, zero or more (fractions kept to the microsecond).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Millis(pub Duration);

impl<'de> Deserialize<'de> for Millis {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let refuse = || de::Error::custom("must be a number of milliseconds, zero or more");
        match Value::deserialize(deserializer)? {
            Value::Number(n) => match n.as_f64() {
                Some(ms) if (0.0..=MOST_MILLIS).contains(&ms) => {
                    Ok(Millis(Duration::from_micros((ms * 1000.0) as u64)))
                }
                _ => Err(refuse()),
            },
            _ => Err(refuse()),
        }
    }
}

/// A whole number from `MIN` to `u32::MAX`: a count or a bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Count<const MIN: u32>(pub u32);

impl<'de, const MIN: u32> Deserialize<'de> for Count<MIN> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let refuse = || {
            de::Error::custom(match MIN {
                0 => "must be a whole number, zero or more".to_owned(),
                1 => "must be a whole number, one or more".to_owned(),
                min => format!("must be a whole number, {min} or more"),
            })
        };
        match Value::deserialize(deserializer)? {
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= MIN)
                .map(Count)
                .ok_or_else(refuse),
            _ => Err(refuse()),
        }
    }
}

/// A number of bytes: a whole number, zero or more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Number(n) => n.as_u64().map(Bytes),
            _ => None,
        }
        .ok_or_else(|| de::Error::custom("must be a whole number of bytes, zero or more"))
    }
}

/// A boolean, refused with its own words rather than serde's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Flag(pub bool);

impl<'de> Deserialize<'de> for Flag {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Bool(flag) => Ok(Flag(flag)),
            _ => Err(de::Error::custom("must be a boolean")),
        }
    }
}

/// A TCP port: a whole number from 1 to 65535.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Port(pub u16);

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        value
            .as_u64()
            .and_then(|port| u16::try_from(port).ok())
            .filter(|port| *port > 0)
            .map(Port)
            .ok_or_else(|| {
                de::Error::custom(format!("must be a port number (1 to 65535), not {value}"))
            })
    }
}

/// The ports of a list of [`Port`]s.
pub fn ports(list: Vec<Port>) -> Vec<u16> {
    list.into_iter().map(|Port(port)| port).collect()
}

/// A number: any finite one (bounds are the domain's to check).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Number(pub f64);

impl<'de> Deserialize<'de> for Number {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        match Value::deserialize(deserializer)? {
            Value::Number(n) => n
                .as_f64()
                .map(Number)
                .ok_or_else(|| de::Error::custom("must be a number")),
            _ => Err(de::Error::custom("must be a number")),
        }
    }
}

/// A domain rule's refusal as a serde error, for a field type that applies the rule: its message
/// without the path in front (`memory: ...`), which [`read`] puts back, whatever the field's path.
///
/// # Errors
/// The rule's refusal.
pub fn by_rule<T, E: de::Error>(result: Result<T>) -> std::result::Result<T, E> {
    result.map_err(|error| match error {
        SessionError::Input { path, message } => {
            let tail = message
                .strip_prefix(&format!("{path}: "))
                .or_else(|| message.strip_prefix(&format!("{path} ")))
                .unwrap_or(&message);
            E::custom(tail)
        }
        other => E::custom(other),
    })
}

/// Text a caller handed over, as the binding read it, before any rule is applied: the rules of
/// what it must be ([`session_id`], [`file_path`]) are here, the reading is the binding's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GivenText {
    /// A string of well-formed text.
    Text(String),
    /// Something other than a string (a number, `null`, an object...), or nothing.
    NotText,
    /// A string holding a lone surrogate: no UTF-8 text can carry it, and read as UTF-8 it would
    /// become another string (U+FFFD in its place).
    LoneSurrogate,
}

/// The words of a string that holds a lone surrogate, at `path`.
fn lone_surrogate(path: &str) -> SessionError {
    SessionError::input(
        path,
        format!("{path} must be well-formed text (it holds a lone surrogate)"),
    )
}

/// The session id `given` at `path` (`id`, `sessionId`): a non-empty string of well-formed text.
///
/// # Errors
/// [`SessionError::Input`] at `path` for anything else.
pub fn session_id(given: GivenText, path: &str) -> Result<String> {
    match given {
        GivenText::Text(id) => {
            check_session_id(&id, path)?;
            Ok(id)
        }
        GivenText::NotText => Err(not_an_id(path)),
        GivenText::LoneSurrogate => Err(lone_surrogate(path)),
    }
}

/// The rule of a session id, for one already read as text: not empty.
///
/// # Errors
/// [`SessionError::Input`] at `path` for an empty id.
pub fn check_session_id(id: &str, path: &str) -> Result<()> {
    if id.is_empty() {
        return Err(not_an_id(path));
    }
    Ok(())
}

fn not_an_id(path: &str) -> SessionError {
    SessionError::input(path, format!("{path} must be a non-empty string"))
}

/// The text `given` at `path`, `None` when it is not text at all (the caller decides whether that
/// is allowed).
///
/// # Errors
/// [`SessionError::Input`] at `path` for a string with a lone surrogate.
pub fn optional_text(given: GivenText, path: &str) -> Result<Option<String>> {
    match given {
        GivenText::Text(text) => Ok(Some(text)),
        GivenText::NotText => Ok(None),
        GivenText::LoneSurrogate => Err(lone_surrogate(path)),
    }
}

/// The path of a file `given` at `path`: a non-empty string of well-formed text with no NUL,
/// resolved against the working directory when relative.
///
/// # Errors
/// [`SessionError::Input`] at `path` for anything else.
pub fn file_path(given: GivenText, path: &str) -> Result<std::path::PathBuf> {
    let refused = || SessionError::input(path, format!("{path} must be the path of a file"));
    let text = match given {
        GivenText::Text(text) if !text.is_empty() && !text.contains('\0') => text,
        GivenText::Text(_) | GivenText::NotText | GivenText::LoneSurrogate => return Err(refused()),
    };
    std::path::absolute(&text)
        .map_err(|e| SessionError::input(path, format!("{path} must be the path of a file: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Sample {
        #[serde(default, deserialize_with = "present")]
        idle_timeout_ms: Option<Millis>,
        flag: Option<Flag>,
        nested: Option<Nested>,
        ports: Option<Vec<Port>>,
        env: Option<BTreeMap<String, String>>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields, rename_all = "camelCase")]
    struct Nested {
        capacity: Option<Count<1>>,
    }

    fn refused(value: Value) -> (String, String) {
        match read::<Sample>(value, "options", "sample()") {
            Err(SessionError::Input { path, message }) => (path, message),
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn each_refusal_names_its_field_path() {
        let cases = [
            (
                json!({ "idleTimeoutMs": -1 }),
                "idleTimeoutMs",
                "idleTimeoutMs must be a number of milliseconds, zero or more",
            ),
            (
                json!({ "idleTimeoutMs": "NaN" }),
                "idleTimeoutMs",
                "idleTimeoutMs must be a number of milliseconds, zero or more",
            ),
            (
                json!({ "idleTimeoutMs": null }),
                "idleTimeoutMs",
                "idleTimeoutMs must be a number of milliseconds, zero or more",
            ),
            (json!({ "flag": 1 }), "flag", "flag must be a boolean"),
            (
                json!({ "nested": { "capacity": 0 } }),
                "nested.capacity",
                "nested.capacity must be a whole number, one or more",
            ),
            (
                json!({ "ports": [4000, 70000] }),
                "ports[1]",
                "ports[1] must be a port number (1 to 65535), not 70000",
            ),
            (
                json!({ "env": { "A": "a", "B": 2 } }),
                "env.B",
                "env.B must be a string",
            ),
            (
                json!({ "nope": 1 }),
                "nope",
                "nope is not an option of sample()",
            ),
            (
                json!({ "nested": { "max": 1 } }),
                "nested.max",
                "nested.max is not an option of sample()",
            ),
            (json!(5), "options", "options must be an object"),
            (json!({ "nested": 2 }), "nested", "nested must be an object"),
        ];
        for (value, path, message) in cases {
            let (at, said) = refused(value.clone());
            assert_eq!((at.as_str(), said.as_str()), (path, message), "{value}");
        }
    }

    #[test]
    fn good_values_are_read() {
        let sample: Sample = read(
            json!({ "idleTimeoutMs": 1.5, "flag": true, "nested": { "capacity": 3 }, "ports": [1, 65535], "env": { "A": "a" } }),
            "options",
            "sample()",
        )
        .unwrap();
        assert_eq!(
            sample.idle_timeout_ms,
            Some(Millis(Duration::from_micros(1500)))
        );
        assert_eq!(sample.flag, Some(Flag(true)));
        assert_eq!(sample.nested.unwrap().capacity, Some(Count(3)));
        assert_eq!(ports(sample.ports.unwrap()), vec![1, 65535]);
        assert_eq!(sample.env.unwrap()["A"], "a");
    }

    #[test]
    fn a_session_id_is_non_empty_well_formed_text() {
        assert_eq!(
            session_id(GivenText::Text("a".into()), "id"),
            Ok("a".into())
        );
        assert_eq!(
            session_id(GivenText::Text("a\u{FFFD}".into()), "id"),
            Ok("a\u{FFFD}".into()),
            "U+FFFD itself is text like any other"
        );
        for (given, message) in [
            (
                GivenText::Text(String::new()),
                "sessionId must be a non-empty string",
            ),
            (GivenText::NotText, "sessionId must be a non-empty string"),
            (
                GivenText::LoneSurrogate,
                "sessionId must be well-formed text (it holds a lone surrogate)",
            ),
        ] {
            assert_eq!(
                session_id(given, "sessionId"),
                Err(SessionError::input("sessionId", message))
            );
        }
        assert_eq!(optional_text(GivenText::NotText, "name"), Ok(None));
        assert!(optional_text(GivenText::LoneSurrogate, "name").is_err());
    }

    #[test]
    fn a_file_path_is_resolved_and_never_empty_nor_holding_a_nul() {
        let path = file_path(GivenText::Text("x.db".into()), "path").unwrap();
        assert!(path.is_absolute() && path.ends_with("x.db"));
        for given in [
            GivenText::Text(String::new()),
            GivenText::Text("a\0b".into()),
            GivenText::NotText,
            GivenText::LoneSurrogate,
        ] {
            assert_eq!(
                file_path(given, "path"),
                Err(SessionError::input(
                    "path",
                    "path must be the path of a file"
                ))
            );
        }
    }
}
