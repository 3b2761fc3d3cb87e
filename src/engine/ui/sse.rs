//! The UI message stream on the wire, byte for byte as `createUIMessageStreamResponse` of `ai`
//! writes it: the response headers, `data: <json>\n\n` per chunk, `data: [DONE]\n\n` at the end.
//!
//! The JSON is what `JSON.stringify` gives for the chunk: keys in the chunk's order, the same
//! string escapes (serde_json's and V8's agree), and numbers as JavaScript prints them (`1e+21`,
//! `1e-7`, `100` for `100.0`, integers beyond 2^53 rounded to a double). [`to_json`] writes any
//! value that way, for the other JSON the addon hands to JavaScript.

use std::io;

use serde::Serialize;
use serde_json::ser::Formatter;

use super::chunk::UiChunk;
use super::js::number_to_string;

/// The headers of a UI message stream response, in the order `ai` sets them.
pub const UI_MESSAGE_STREAM_HEADERS: [(&str, &str); 5] = [
    ("content-type", "text/event-stream"),
    ("cache-control", "no-cache"),
    ("connection", "keep-alive"),
    ("x-vercel-ai-ui-message-stream", "v1"),
    ("x-accel-buffering", "no"),
];

/// The last event of every stream.
pub const SSE_DONE: &[u8] = b"data: [DONE]\n\n";

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
/// When `value`'s `Serialize` fails (never for [`UiChunk`] or `serde_json::Value`); `out` is
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

/// Appends the SSE events of a batch of chunks to a byte buffer.
#[derive(Debug, Default)]
pub struct SseEncoder {
    chunks: u64,
}

impl SseEncoder {
    /// A fresh encoder.
    pub fn new() -> SseEncoder {
        SseEncoder::default()
    }

    /// Appends `data: <json>\n\n` for `chunk`.
    ///
    /// # Errors
    ///
    /// As [`write_json`]; `out` is then left as it was.
    pub fn encode(&mut self, chunk: &UiChunk, out: &mut Vec<u8>) -> Result<(), serde_json::Error> {
        let start = out.len();
        out.extend_from_slice(b"data: ");
        if let Err(error) = write_json(chunk, out) {
            out.truncate(start);
            return Err(error);
        }
        out.extend_from_slice(b"\n\n");
        self.chunks += 1;
        Ok(())
    }

    /// Appends the events of `chunks`, in order.
    ///
    /// # Errors
    ///
    /// As [`write_json`]; the events of the chunks before the failing one stay in `out`.
    pub fn encode_batch<'a>(
        &mut self,
        chunks: impl IntoIterator<Item = &'a UiChunk>,
        out: &mut Vec<u8>,
    ) -> Result<(), serde_json::Error> {
        for chunk in chunks {
            self.encode(chunk, out)?;
        }
        Ok(())
    }

    /// Appends `data: [DONE]\n\n`, the end of the stream.
    pub fn finish(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(SSE_DONE);
    }

    /// How many chunks this encoder has written.
    pub fn chunks_written(&self) -> u64 {
        self.chunks
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_are_data_lines_then_done() {
        let chunks = [
            UiChunk::start(Some("m1".into())),
            UiChunk::text_delta("t", "a \"quoted\"\n\u{1f}é\u{2028}"),
            UiChunk::finish(None),
        ];
        let mut out = Vec::new();
        let mut encoder = SseEncoder::new();
        encoder.encode_batch(&chunks, &mut out).unwrap();
        encoder.finish(&mut out);
        let expected = concat!(
            "data: {\"type\":\"start\",\"messageId\":\"m1\"}\n\n",
            "data: {\"type\":\"text-delta\",\"id\":\"t\",\"delta\":\"a \\\"quoted\\\"\\n\\u001fé\u{2028}\"}\n\n",
            "data: {\"type\":\"finish\"}\n\n",
            "data: [DONE]\n\n",
        );
        assert_eq!(String::from_utf8(out).unwrap(), expected);
        assert_eq!(encoder.chunks_written(), 3);
    }

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
    fn headers_are_the_five_of_ai() {
        assert_eq!(UI_MESSAGE_STREAM_HEADERS.len(), 5);
        assert_eq!(
            UI_MESSAGE_STREAM_HEADERS[0],
            ("content-type", "text/event-stream")
        );
        assert_eq!(
            UI_MESSAGE_STREAM_HEADERS[3],
            ("x-vercel-ai-ui-message-stream", "v1")
        );
    }

    #[test]
    fn a_chunk_read_from_json_is_written_back_unchanged() {
        let text = r#"{"type":"data-x","data":{"b":1,"a":[1.5,"s"]},"id":"p","zzz":null}"#;
        let chunk = UiChunk::from_json(text).unwrap();
        let mut out = Vec::new();
        SseEncoder::new().encode(&chunk, &mut out).unwrap();
        assert_eq!(out, format!("data: {text}\n\n").into_bytes());
        assert_eq!(to_json(&json!({"k": 2.0})).unwrap(), "{\"k\":2}");
    }
}
