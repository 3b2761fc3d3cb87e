//! The AI SDK v7 UI message stream: its chunks, the `UIMessage` they build, and its SSE encoding.
//!
//! - [`chunk`]: [`UiChunk`], every chunk type of `ai` 7.0.112, read and written without loss.
//! - [`accumulator`]: [`MessageAccumulator`], the assistant message built from chunks exactly as
//!   `readUIMessageStream` builds it.
//! - [`sse`]: the response headers and `data: <json>\n\n` events of
//!   `createUIMessageStreamResponse`, with JSON written as `JSON.stringify` writes it.

pub mod accumulator;
pub mod chunk;
mod js;
pub mod sse;

pub use accumulator::{AccumulateError, Changed, MessageAccumulator, ReaderError};
pub use chunk::{ChunkError, ChunkKind, DataChunk, Extra, UiChunk};
pub use sse::{to_json, write_json, SseEncoder, SSE_DONE, UI_MESSAGE_STREAM_HEADERS};
