//! JSON as `JSON.stringify` writes it: keys in the value's order, the same string escapes
//! (serde_json's and V8's agree), and numbers as JavaScript prints them (`1e+21`, `1e-7`, `100`
//! for `100.0`, integers beyond 2^53 rounded to a double). [`to_json`] writes the JSON the addon
//! hands to JavaScript. (The UI message stream's server-sent events are written in JavaScript, by
//! `js/sse.js`.)

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

use super::js::number_to_string;

/// A serde_json formatter that writes numbers as `JSON.stringify` does.
#[derive(Debug, Clone, Copy, Default)]
pub struct JsFormatter;

/// The largest integer a JavaScript number holds exactly.
const MAX_SAFE: u64 = 1 << 53;

impl Formatter for JsFormatter {
    fn write_i64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: i64) -> io::Result<()> {
        if value.unsigned_abs() <= MAX_SAFE {
            write!(writer, "{value}")
        } else {
            writer.write_all(number_to_string(value as f64).as_bytes())
        }
    }

    fn write_u64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: u64) -> io::Result<()> {
        if value <= MAX_SAFE {
            write!(writer, "{value}")
        } else {
            writer.write_all(number_to_string(value as f64).as_bytes())
        }
    }

    fn write_i128<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: i128) -> io::Result<()> {
        writer.write_all(number_to_string(value as f64).as_bytes())
    }

    fn write_u128<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: u128) -> io::Result<()> {
        writer.write_all(number_to_string(value as f64).as_bytes())
    }

    fn write_f32<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(number_to_string(f64::from(value)).as_bytes())
    }

    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(number_to_string(value).as_bytes())
    }
}

/// Appends `value` as `JSON.stringify` writes it to `out`.
///
/// # Errors
///
/// When `value`'s `Serialize` fails (never for a [`super::UiChunk`] or a `serde_json::Value`); `out` is
/// then left as it was.
pub fn write_json<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), serde_json::Error> {
    let start = out.len();
    let mut serializer = serde_json::Serializer::with_formatter(&mut *out, JsFormatter);
    let result = value.serialize(&mut serializer);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// `value` as `JSON.stringify` writes it.
///
/// # Errors
///
/// As [`write_json`].
pub fn to_json<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut out = Vec::new();
    write_json(value, &mut out)?;
    // The serializer writes UTF-8 only.
    String::from_utf8(out).map_err(|e| serde::ser::Error::custom(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::ui::UiChunk;
    use serde_json::json;

    #[test]
    fn numbers_are_written_as_javascript_writes_them() {
        let value: serde_json::Value = serde_json::from_str(
            "[1.0, 1e21, 1e-7, 9007199254740993, -0, 12345678901234567890123, 0.5]",
        )
        .unwrap();
        assert_eq!(
            to_json(&value).unwrap(),
            "[1,1e+21,1e-7,9007199254740992,0,1.2345678901234568e+22,0.5]"
        );
    }

    #[test]
    fn a_chunk_read_from_json_is_written_back_unchanged() {
        let text = r#"{"type":"data-x","data":{"b":1,"a":[1.5,"s"]},"id":"p","zzz":null}"#;
        let chunk = UiChunk::from_json(text).unwrap();
        assert_eq!(to_json(&chunk).unwrap(), text);
        assert_eq!(to_json(&json!({"k": 2.0})).unwrap(), "{\"k\":2}");
    }
}
