//! The engine: everything harness-sessions does, in pure Rust.
//!
//! Where the engine needs something an application supplies (an agent, sandboxes, a store, an
//! approval policy), it defines a trait; the binding implements those traits with JavaScript
//! callbacks, and the engine ships pure-Rust implementations of its own (the SQLite and memory
//! stores, the local and Docker sandboxes, a scripted agent for tests).

pub mod agent;
pub mod client;
pub mod cluster;
pub mod error;
pub mod hooks;
pub mod input;
pub mod lease;
pub mod manager;
pub mod sandbox;
pub mod session;
pub mod store;
pub mod ui;
