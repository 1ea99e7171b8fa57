//! The `_echo` and `_scripted_echo` test providers and the DSL they share.
//!
//! Both stream what a small line-based script describes, so the whole agent
//! can be exercised without a model. `_echo` reads the script from the last
//! user message; `_scripted_echo` pops one script per call from a queue loaded
//! from the file named by `KIMI_SCRIPTED_ECHO_SCRIPTS`.

mod dsl;
mod provider;
mod scripted;

pub use dsl::{ParsedScript, parse_script};
pub use provider::EchoProvider;
pub use scripted::ScriptedEchoProvider;

use futures::StreamExt as _;

use crate::ChatStream;

/// Streams a parsed script's events one by one.
fn into_stream(script: ParsedScript) -> ChatStream {
    futures::stream::iter(script.events.into_iter().map(Ok)).boxed()
}
