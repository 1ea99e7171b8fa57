//! The `wire.jsonl` recorder and reader.
//!
//! The client sees every streamed delta; the file keeps the *merged* stream, as the reference does:
//! consecutive text parts are joined, think parts are joined until one carries `encrypted`, and
//! `ToolCallPart`s are folded into the `arguments` of the `ToolCall` they continue. The first line is
//! `{"type": "metadata", "protocol_version": "1.10"}`; every other line is
//! `{"timestamp": <unix seconds>, "message": {"type": .., "payload": ..}}`.

use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use kimi_wire::message::{ContentPart, Event, WireMessage};
use serde::Serialize;

use super::writer::{LineWriter, WriteError};

#[derive(Serialize)]
struct Record<'a> {
    timestamp: f64,
    message: &'a WireMessage,
}

/// Appends merged wire messages to one session's `wire.jsonl`.
#[derive(Debug)]
pub struct WireRecorder {
    writer: LineWriter,
    /// Whether the file holds (or will hold) any record besides the header; an empty session is
    /// deleted on exit.
    has_records: std::sync::atomic::AtomicBool,
    /// The last message, held back while later deltas may still merge into it.
    held: Mutex<Option<WireMessage>>,
}

impl WireRecorder {
    /// Opens (or creates) `path`; a new or empty file gets the metadata header.
    pub async fn open(path: &Path) -> Self {
        let (needs_header, has_records) = inspect(path).await;
        let writer = LineWriter::spawn(path);
        if needs_header {
            let header =
                serde_json::json!({"type": "metadata", "protocol_version": kimi_wire::PROTOCOL_VERSION});
            let _ = writer.append(header.to_string());
        }
        Self {
            writer,
            has_records: has_records.into(),
            held: Mutex::new(None),
        }
    }

    /// Records one message, merging it into the held one where the reference would.
    pub async fn record(&self, message: WireMessage) -> Result<(), WriteError> {
        self.has_records.store(true, std::sync::atomic::Ordering::Relaxed);
        let ready = {
            let mut held = self
                .held
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            match held.take() {
                None => {
                    *held = Some(message);
                    None
                }
                Some(mut previous) => {
                    if merge_into(&mut previous, &message) {
                        *held = Some(previous);
                        None
                    } else {
                        *held = Some(message);
                        Some(previous)
                    }
                }
            }
        };
        match ready {
            Some(message) => self.write(&message).await,
            None => Ok(()),
        }
    }

    /// Has anything been recorded in this session (now or earlier)?
    pub fn has_records(&self) -> bool {
        self.has_records.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Writes out the held message and waits until the OS has everything.
    pub async fn flush(&self) -> Result<(), WriteError> {
        self.release().await?;
        self.writer.flush().await
    }

    /// Writes out the held message and waits until everything is on disk.
    pub async fn sync(&self) -> Result<(), WriteError> {
        self.release().await?;
        self.writer.sync().await
    }

    async fn release(&self) -> Result<(), WriteError> {
        let held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        match held {
            Some(message) => self.write(&message).await,
            None => Ok(()),
        }
    }

    async fn write(&self, message: &WireMessage) -> Result<(), WriteError> {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        match serde_json::to_string(&Record { timestamp, message }) {
            Ok(line) => self.writer.append(line),
            Err(e) => {
                tracing::error!(error = %e, "wire record failed to serialize");
                Ok(())
            }
        }
    }
}

/// Whether `path` lacks a header (missing or empty) and whether it holds records, without reading a
/// possibly large file: only its first line and its length are looked at.
async fn inspect(path: &Path) -> (bool, bool) {
    use tokio::io::AsyncBufReadExt;
    let Ok(file) = tokio::fs::File::open(path).await else {
        return (true, false);
    };
    let len = file.metadata().await.map(|m| m.len()).unwrap_or(0);
    if len == 0 {
        return (true, false);
    }
    let mut first = String::new();
    let mut reader = tokio::io::BufReader::new(file);
    let _ = reader.read_line(&mut first).await;
    let is_header = first.contains("\"metadata\"");
    let has_records = if is_header { len > first.len() as u64 } else { true };
    (false, has_records)
}

/// Merges `next` into `held` when the reference's merged stream would; returns whether it did.
fn merge_into(held: &mut WireMessage, next: &WireMessage) -> bool {
    let (WireMessage::Event(held), WireMessage::Event(next)) = (held, next) else {
        return false;
    };
    match (held, next) {
        (Event::ContentPart(ContentPart::Text(a)), Event::ContentPart(ContentPart::Text(b))) => {
            a.text.push_str(&b.text);
            true
        }
        (Event::ContentPart(ContentPart::Think(a)), Event::ContentPart(ContentPart::Think(b)))
            if a.encrypted.is_none() =>
        {
            a.think.push_str(&b.think);
            a.encrypted.clone_from(&b.encrypted);
            true
        }
        (Event::ToolCall(call), Event::ToolCallPart(part)) => {
            if let Some(piece) = &part.arguments_part {
                call.function
                    .arguments
                    .get_or_insert_with(String::new)
                    .push_str(piece);
            }
            true
        }
        _ => false,
    }
}

/// Reads a `wire.jsonl`: the protocol version of its header and every message that parses.
/// Lines that do not parse (a torn tail after a crash, garbage) are skipped and counted.
pub fn read_wire_file(content: &str) -> (Vec<WireMessage>, usize) {
    let mut messages = Vec::new();
    let mut skipped = 0;
    for line in content.lines() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let Ok(value) = serde_json::from_str::<serde_json::Value>(line) else {
            skipped += 1;
            continue;
        };
        if value.get("type").and_then(|t| t.as_str()) == Some("metadata") {
            continue;
        }
        match value
            .get("message")
            .map(|m| serde_json::from_value::<WireMessage>(m.clone()))
        {
            Some(Ok(message)) => messages.push(message),
            _ => skipped += 1,
        }
    }
    (messages, skipped)
}
