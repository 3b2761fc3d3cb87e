//! The AI SDK v7 UI message stream: its chunks and the `UIMessage` they build.
//!
//! - [`chunk`]: [`UiChunk`], every chunk type of `ai` 7.0.112, read and written without loss.
//! - [`accumulator`]: [`MessageAccumulator`], the assistant message built from chunks exactly as
//!   `readUIMessageStream` builds it.
//! - [`json`]: JSON written as `JSON.stringify` writes it, for what the addon hands to JavaScript.
//!
//! The stream's server-sent events are written in JavaScript (`js/sse.js`), where the chunks are.

pub mod accumulator;
pub mod chunk;
mod js;
pub mod json;

pub use accumulator::{AccumulateError, Changed, MessageAccumulator, ReaderError};
pub use chunk::{ChunkError, ChunkKind, DataChunk, Extra, UiChunk};
pub use json::{to_json, write_json};

/// The recorded vectors of `__test__/fixtures/ui-message-stream`, for the tests of this module.
#[cfg(test)]
pub(crate) fn fixtures() -> Vec<(String, serde_json::Value)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("__test__/fixtures/ui-message-stream");
    let mut fixtures: Vec<(String, serde_json::Value)> = std::fs::read_dir(dir)
        .expect("the fixtures folder")
        .map(|entry| entry.expect("a fixture").path())
        .filter(|path| path.extension().and_then(|e| e.to_str()) == Some("json"))
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("a readable fixture");
            let fixture = serde_json::from_str(&text).expect("a JSON fixture");
            (path.display().to_string(), fixture)
        })
        .collect();
    fixtures.sort_by(|a, b| a.0.cmp(&b.0));
    fixtures
}
