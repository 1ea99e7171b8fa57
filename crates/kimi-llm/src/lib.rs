//! Chat providers for `kimi-agent`: the trait the agent loop calls, the
//! message types it passes, and the providers behind it.
//!
//! Layout:
//! - [`ChatProvider`], [`ChatRequest`], [`StreamEvent`], [`ChatStream`],
//!   [`ToolSpec`] (`provider.rs`): one model call and its streamed answer.
//! - [`Message`], [`Role`] (`message.rs`): the conversation history.
//! - [`Answer`] (`answer.rs`): one call's answer assembled from its stream.
//! - [`ChatError`] (`error.rs`): failures, classified like kosong's exception
//!   classes, with their exact texts and retryability.
//! - [`echo`]: the `_echo` and `_scripted_echo` test providers and the echo
//!   DSL they stream.
//! - [`openai`]: `kimi` and `openai_legacy`, streamed OpenAI-compatible chat
//!   completions over our own tolerant request and chunk types
//!   ([`OpenAiCompatConfig`], [`create`]); `stream.rs` decodes chunks,
//!   `request.rs` builds bodies, `errors.rs` maps HTTP failures.
//! - [`anthropic`]: `anthropic`, Anthropic's Messages API.
//! - [`responses`]: `openai_responses`, OpenAI's Responses API, stateless.
//! - [`google`]: `gemini` / `google_genai` and `vertexai` (with Google
//!   credentials and token refresh).
//!   These three are built from [`ProviderSettings`] (`settings.rs`); each has
//!   a `request.rs` that builds bodies and a `stream.rs` that decodes events.
//! - `sse.rs`: reading any provider's server-sent events through its decoder;
//!   `http.rs`: clients built on first use, sending, transport failures.
//! - `assemble.rs`: tool-call deltas routed by id, then by index;
//!   `tool_names.rs`: tool names as each API accepts them and back;
//!   `media.rs`: media parts as inline data or URLs.
//! - [`schema_sanitize`]: tool schemas and names in the shape Moonshot accepts
//!   (each provider adds what its API needs on top).
//! - [`chaos`]: `_chaos`, a wrapper that injects errors and truncated streams.
//! - [`cassette`]: recording every model call (`--record-llm`) and `_cassette`, which plays them back.
//! - [`py_repr`] (`py.rs`): Python's `repr()` of a string, and the other
//!   Python built-ins whose output reaches interface strings.
//!
//! Content parts, tool calls and token usage are the wire's own types
//! (`kimi_wire::message`), so what a provider streams goes out unchanged.

#![warn(missing_docs)]

mod answer;
pub mod anthropic;
mod assemble;
pub mod cassette;
pub mod chaos;
pub mod echo;
mod error;
pub mod google;
pub mod http;
mod media;
mod message;
pub mod openai;
mod provider;
mod py;
pub mod responses;
pub mod schema_sanitize;
mod settings;
mod sse;
mod tool_names;

pub use answer::{Answer, push_part};
pub use chaos::{ChaosConfig, ChaosProvider};
pub use error::ChatError;
pub use http::chain as error_chain;
pub use message::{Message, Role};
pub use openai::{
    CompletionBudget, Flavor, OpenAiCompatConfig, OpenAiCompatProvider, UserAgent, create,
    install_tls_provider,
};
pub use provider::{ChatProvider, ChatRequest, ChatStream, StreamEvent, ToolSpec};
pub use py::{Dumps, dumps, py_repr, splitlines, truthy};
pub use settings::ProviderSettings;
