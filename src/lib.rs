//! harness-sessions: sessions for AI SDK harness agents.
//!
//! Two layers: [`engine`] is pure Rust (sessions, turns, UI messages, stores, sandboxes) and knows
//! nothing of Node; `binding` (behind the default `napi` feature) is the only N-API code, and
//! implements the engine's seams with JavaScript callbacks.

pub mod engine;

#[cfg(feature = "napi")]
mod binding;
