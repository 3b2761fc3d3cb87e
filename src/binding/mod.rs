//! The N-API binding: the only code that knows of Node.
//!
//! Each submodule exports one concept to JavaScript. What the binding asks of JavaScript is one
//! [`protocol::HostOp`] through a [`host::Host`]. Errors cross as data (see [`error`]), and every
//! entry point runs behind [`error::guard`] or [`error::guard_sync`], so that a Rust panic reaches
//! JavaScript as an error and never aborts the process.

// Exports are reached from JavaScript, not from Rust: `pub` is what napi needs of them.
#![allow(unreachable_pub)]
// In the crate's own test build nothing calls the exports: JavaScript does.
#![cfg_attr(test, allow(dead_code))]

mod diagnostics;
mod error;
mod given;
mod host;
mod js_store;
mod manager;
mod protocol;
mod sandbox;
mod seams;
mod store;
mod strategies;
mod ui;
