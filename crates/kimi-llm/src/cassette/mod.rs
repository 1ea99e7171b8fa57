//! Model-traffic cassettes: record every model call of a run, replay them without any network.
//!
//! A cassette is a JSON Lines file, one [`CallRecord`] per model call: the request as the loop made
//! it (system prompt, tools, messages), the generation parameters and model for the reader, where the
//! run was (its directories), and the answer assembled from the stream (text, thinking, tool calls,
//! usage, finish reason, completion id) or the failure. [`RecordingProvider`] writes them for any
//! provider (`--record-llm FILE`); [`CassetteProvider`] (`type = "_cassette"`) plays them back,
//! comparing each request with the recording after [`normalize`] took out what legitimately changes
//! between runs. docs/testing-with-cassettes.md is the user's guide.
//!
//! Layout: `format.rs` (the line), `recorder.rs` (recording), `player.rs` (playing back),
//! `normalize.rs` (what is taken out before comparing), `diff.rs` (naming the first difference).

mod diff;
mod format;
pub mod normalize;
mod player;
mod recorder;

pub use format::{CallRecord, RecordedError, RecordedRequest, RunPaths, VERSION};
pub use player::{CassetteError, CassetteProvider};
pub use recorder::{CassetteWriter, RecordingMeta, RecordingProvider};
