//! Chat providers for `kimi-agent`: the trait the agent loop calls, the
//! message types it passes, and the providers behind it.
//!
//! Layout:
//! - [`ChatProvider`], [`ChatRequest`], [`StreamEvent`], [`ChatStream`],
//!   [`ToolSpec`] (`provider.rs`): one model call and its streamed answer.
//! - [`Message`], [`Role`] (`message.rs`): the conversation history.
//! - [`ChatError`] (`error.rs`): failures, classified like kosong's exception
//!   classes, with their exact texts and retryability.
//! - [`echo`]: the `_echo` and `_scripted_echo` test providers and the echo
//!   DSL they stream.
//! - [`py_repr`] (`py.rs`): Python's `repr()` of a string, and the other
//!   Python built-ins whose output reaches interface strings.
//!
//! Content parts, tool calls and token usage are the wire's own types
//! (`kimi_wire::message`), so what a provider streams goes out unchanged.

pub mod echo;
mod error;
mod message;
mod provider;
mod py;

pub use error::ChatError;
pub use message::{Message, Role};
pub use provider::{ChatProvider, ChatRequest, ChatStream, StreamEvent, ToolSpec};
pub use py::py_repr;
