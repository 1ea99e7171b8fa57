//! The Kimi Wire protocol 1.10: message types, the JSON-RPC envelope, line framing and the stdio server.
//!
//! Wire is JSON-RPC 2.0 with one object per line over stdin/stdout. The client calls six methods
//! (`initialize`, `prompt`, `steer`, `replay`, `cancel`, `set_plan_mode`); the server streams `event`
//! notifications and sends `request`s (approval, external tool call, question, hook) whose answers it awaits
//! while the `prompt` that caused them is still open.
//!
//! Layout:
//! - [`message`]: every event, request, content part and display block, with the reference's exact JSON.
//! - [`params`]: params and results of the six methods.
//! - [`jsonrpc`]: classifying inbound lines and building outbound ones; [`error_code`]: codes and messages;
//!   [`ErrorData`] (`error_data`): what `error.data` says to clients that ask for errors as data.
//! - [`named`]: reading client JSON by field name only (no positional arrays for objects).
//! - [`EventFilter`]: which event types each client is sent (only those it can parse).
//! - [`framing`]: the capped line reader.
//! - [`server`]: the dispatcher, the single stdout writer and the [`server::pending`] request registry.
//! - [`WireAgent`]: the trait the agent core implements; [`ClientHandle`]: how it talks back;
//!   [`TurnStarter`]: how it starts a turn of its own (a scheduled prompt) when none runs.
//! - [`side_question`]: recognising `/btw` prompts, answered beside a running turn.
//! - [`schema`]: JSON Schema and TypeScript export of the types.
//! - `testing` (feature `test-support`): a fake client on an in-memory pipe, for other crates' tests.
//!
//! One rule holds everywhere: only the writer thread touches stdout. This crate knows nothing of models or
//! tools; it drives the agent through [`WireAgent`].

#![warn(missing_docs)]

mod agent;
pub mod error_code;
pub mod error_data;
mod event_filter;
pub mod framing;
pub mod jsonrpc;
pub mod message;
pub mod methods;
pub mod named;
pub mod params;
pub mod schema;
pub mod server;
pub mod side_question;
pub mod sync;
#[cfg(any(test, feature = "test-support"))]
pub mod testing;

pub use agent::WireAgent;
pub use error_code::RpcError;
pub use error_data::ErrorData;
pub use event_filter::{EventFilter, TS_SDK_0_1_EVENTS};
pub use server::pending::{Abandoned, Answer, PendingAnswer, RequestScope};
pub use server::{
    AgentTurn, ClientHandle, ConnectionClosed, IdleSignal, Journal, JournalLink, NoAnswer, Reply,
    SendRequestError, Server, ServerConfig, ShuttingDown, TurnStarter,
};

/// The protocol version this server speaks.
pub const PROTOCOL_VERSION: &str = "1.10";
