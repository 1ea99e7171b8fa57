//! Session files: the buffered, batch-committed appender ([`SessionFile`]), the `wire.jsonl` recorder
//! ([`WireRecorder`]) and reader ([`WireFileReader`]), and the crash-tolerant reading both files share
//! ([`repair_tail`], [`RecordReader`]).

mod reader;
mod wire;
mod writer;

pub use reader::RecordReader;
pub(crate) use reader::repair_tail_logged;
pub use wire::{ReplayItem, WireFileReader, WireRecorder};
pub use writer::{SessionFile, WriteError};
