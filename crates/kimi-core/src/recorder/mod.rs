//! Session files: the single-writer appender ([`LineWriter`]) and the `wire.jsonl` recorder
//! ([`WireRecorder`]).

mod wire;
mod writer;

pub use wire::{WireRecorder, read_wire_file};
pub use writer::{LineWriter, WriteError};
