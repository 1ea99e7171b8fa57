//! The `wire.jsonl` recorder and reader.
//!
//! The client sees every streamed delta; the file keeps the *merged* stream, as the reference does:
//! consecutive text parts are joined, think parts are joined until one carries `encrypted`, and
//! `ToolCallPart`s are folded into the `arguments` of the `ToolCall` they continue. The first line is
//! `{"type": "metadata", "protocol_version": "1.10"}`; every other line is
//! `{"timestamp": <unix seconds>, "message": {"type": .., "payload": ..}}`.
//!
//! [`WireFileReader`] streams such a file back for `replay` without holding it in memory. Events go out
//! as the record's own `message` text wrapped in the JSON-RPC envelope, with no parse into typed values
//! and no re-serialization, once their `type` has been seen to parse: that is what lets a large session
//! replay at the speed of the pipe. Deviation from the reference, which re-serializes every record: a
//! payload field the reference would drop or fill with its default is sent as recorded.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use kimi_wire::ClientHandle;
use kimi_wire::jsonrpc::EventLine;
use kimi_wire::message::{ContentPart, Event, Request, WireMessage};
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::io::BufReader;

use super::reader::{RecordReader, repair_tail_logged};
use super::writer::{SessionFile, WriteError};

/// Appends merged wire messages to one session's `wire.jsonl`.
///
/// Recording never waits: a record goes into the file's buffer, and the stdout writer commits the file
/// before it writes any line queued after the record (see [`SessionFile`]). So a caller that records an
/// event before it sends it knows the client never reads an event whose record is not in the file,
/// except the one still being merged.
#[derive(Debug)]
pub struct WireRecorder {
    file: SessionFile,
    /// Whether the file holds (or will hold) any record besides the header; an empty session is
    /// deleted on exit.
    has_records: AtomicBool,
    /// The last event when later deltas may still merge into it (a text or think part, a tool call).
    held: Mutex<Option<Event>>,
}

impl WireRecorder {
    /// Opens (or creates) `path`, first cutting a record torn by a crash; a new or empty file gets the
    /// metadata header. With a `client`, its stdout writer commits this file before it writes the lines
    /// queued after a record (see [`SessionFile::new`]).
    pub async fn open(path: &Path, client: Option<&ClientHandle>) -> Self {
        let target = path.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || repair_tail_logged(&target)).await;
        let (needs_header, has_records) = inspect(path).await;
        let file = SessionFile::new(path, client);
        if needs_header {
            let header =
                serde_json::json!({"type": "metadata", "protocol_version": kimi_wire::PROTOCOL_VERSION});
            let _ = file.append(&header.to_string());
        }
        Self {
            file,
            has_records: has_records.into(),
            held: Mutex::new(None),
        }
    }

    /// Records `event`, merging it into the held one where the reference would. `message` is the event
    /// already serialized (`{"type":..,"payload":..}`, as [`EventLine::message`] lends it) when the
    /// caller has it: an event that is not merged is then recorded from that text, not serialized again.
    pub fn record_event(&self, event: &Event, message: Option<&str>) -> Result<(), WriteError> {
        self.has_records.store(true, Ordering::Relaxed);
        // Under the lock, so concurrent callers cannot reorder records.
        let mut held = crate::sync::lock(&self.held);
        if let Some(previous) = held.as_mut()
            && merge_into(previous, event)
        {
            return Ok(());
        }
        let displaced = held
            .take()
            .map_or(Ok(()), |previous| self.append_event(&previous, None));
        if opens_merge(event) {
            *held = Some(event.clone());
            return displaced;
        }
        let recorded = self.append_event(event, message);
        displaced.and(recorded)
    }

    /// Records a request (an external tool call, a question) after what is held.
    pub fn record_request(&self, request: &Request) -> Result<(), WriteError> {
        self.has_records.store(true, Ordering::Relaxed);
        let mut held = crate::sync::lock(&self.held);
        let displaced = held
            .take()
            .map_or(Ok(()), |previous| self.append_event(&previous, None));
        // `WireMessage` is untagged: a recorded request is the request itself.
        let recorded = match serde_json::to_string(request) {
            Ok(message) => self.append_message(&message),
            Err(e) => {
                tracing::error!(error = %e, "wire record failed to serialize");
                Ok(())
            }
        };
        displaced.and(recorded)
    }

    /// The first failed write of the file, if any (no I/O).
    pub fn check(&self) -> Result<(), WriteError> {
        self.file.check()
    }

    /// Has anything been recorded in this session (now or earlier)?
    pub fn has_records(&self) -> bool {
        self.has_records.load(Ordering::Relaxed)
    }

    /// Writes out the held message and everything recorded; returns once the OS has it.
    pub async fn flush(&self) -> Result<(), WriteError> {
        self.release()?;
        self.file.commit()
    }

    /// Writes out the held message and waits until everything is on disk.
    pub async fn sync(&self) -> Result<(), WriteError> {
        self.release()?;
        self.file.sync().await
    }

    fn release(&self) -> Result<(), WriteError> {
        let mut held = crate::sync::lock(&self.held);
        held.take()
            .map_or(Ok(()), |previous| self.append_event(&previous, None))
    }

    fn append_event(&self, event: &Event, message: Option<&str>) -> Result<(), WriteError> {
        match message {
            Some(message) => self.append_message(message),
            None => match EventLine::new(event) {
                Ok(line) => self.append_message(line.message()),
                Err(e) => {
                    tracing::error!(error = %e, "wire record failed to serialize");
                    Ok(())
                }
            },
        }
    }

    /// `{"timestamp":<unix seconds>,"message":<message>}`.
    fn append_message(&self, message: &str) -> Result<(), WriteError> {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0);
        let mut number = ryu::Buffer::new();
        self.file.append_pieces(&[
            b"{\"timestamp\":",
            number.format_finite(timestamp).as_bytes(),
            b",\"message\":",
            message.as_bytes(),
            b"}",
        ])
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

/// Whether later deltas may merge into `event` (see [`merge_into`]).
fn opens_merge(event: &Event) -> bool {
    match event {
        Event::ContentPart(ContentPart::Text(_)) | Event::ToolCall(_) => true,
        Event::ContentPart(ContentPart::Think(think)) => think.encrypted.is_none(),
        _ => false,
    }
}

/// Merges `next` into `held` when the reference's merged stream would; returns whether it did.
fn merge_into(held: &mut Event, next: &Event) -> bool {
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

/// One recorded message, ready for the client.
#[derive(Debug)]
pub enum ReplayItem {
    /// An event as its whole JSON-RPC `event` notification line (the fast path), with its type name.
    EventLine {
        /// The event's type name.
        kind: String,
        /// The notification line.
        line: String,
    },
    /// An event recorded under an older name (an alias), parsed to be sent under the current one.
    Event(Box<Event>),
    /// A request; it is re-sent under its own id.
    Request(Box<Request>),
}

/// A `wire.jsonl` line: the metadata header or a message record.
#[derive(Deserialize)]
struct RawLine<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    timestamp: Option<f64>,
    #[serde(default, borrow)]
    message: Option<&'a RawValue>,
}

/// A record's `message`: `type` and `payload`, the payload left unparsed.
#[derive(Deserialize)]
struct RawMessage<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    payload: &'a RawValue,
}

/// Streams the messages of a `wire.jsonl` in order, one record in memory at a time.
///
/// A record is read when it parses as `{"timestamp", "message": {"type", "payload"}}` and its message
/// is a known wire message (the reference's rule); the header and blank lines are passed over, anything
/// else is skipped and counted, and the read goes on.
#[derive(Debug)]
pub struct WireFileReader {
    records: RecordReader<BufReader<tokio::fs::File>>,
    /// Event types one record of which parsed fully and under the same name: later records of these
    /// types take the fast path.
    known_events: HashSet<String>,
}

impl WireFileReader {
    /// Opens `path`; `None` when there is no file.
    pub async fn open(path: &Path) -> std::io::Result<Option<Self>> {
        let file = match tokio::fs::File::open(path).await {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(Some(Self {
            records: RecordReader::new(BufReader::with_capacity(READ_BUFFER, file)),
            known_events: HashSet::new(),
        }))
    }

    /// The next message, or `None` at the end of the file.
    pub async fn next_item(&mut self) -> std::io::Result<Option<ReplayItem>> {
        loop {
            let Some(line) = self.records.next_record().await? else {
                return Ok(None);
            };
            match decode(line, &mut self.known_events) {
                Decoded::Item(item) => return Ok(Some(item)),
                Decoded::Header => {}
                Decoded::Unreadable => {
                    tracing::debug!(
                        line = self.records.line_no(),
                        "unreadable wire.jsonl record skipped"
                    );
                    self.records.skip();
                }
            }
        }
    }

    /// Records skipped so far because they could not be read.
    pub fn skipped(&self) -> u64 {
        self.records.skipped()
    }
}

/// Read-ahead of the replay reader: large reads keep the syscall count low on big sessions.
const READ_BUFFER: usize = 256 * 1024;

enum Decoded {
    Item(ReplayItem),
    Header,
    Unreadable,
}

fn decode(line: &[u8], known_events: &mut HashSet<String>) -> Decoded {
    // Validated once, up front, with a SIMD validator: a profile of replay had a third of its time in
    // std's UTF-8 check inside `from_slice`; parsing a `&str` does not check again.
    match simdutf8::basic::from_utf8(line) {
        Ok(text) => decode_text(text, known_events),
        // The reference reads invalid UTF-8 with replacements.
        Err(_) => decode_text(&String::from_utf8_lossy(line), known_events),
    }
}

fn decode_text(line: &str, known_events: &mut HashSet<String>) -> Decoded {
    let Ok(raw) = serde_json::from_str::<RawLine<'_>>(line) else {
        return Decoded::Unreadable;
    };
    let (Some(_), Some(message)) = (raw.timestamp, raw.message) else {
        return match raw.kind.as_deref() {
            Some("metadata") => Decoded::Header,
            _ => Decoded::Unreadable,
        };
    };
    if let Some(kind) = known_prefix(message.get())
        && known_events.contains(kind)
    {
        return Decoded::Item(ReplayItem::EventLine {
            kind: kind.to_owned(),
            line: event_line(message.get()),
        });
    }
    let Ok(envelope) = serde_json::from_str::<RawMessage<'_>>(message.get()) else {
        return Decoded::Unreadable;
    };
    if !envelope.payload.get().starts_with('{') {
        return Decoded::Unreadable;
    }
    match serde_json::from_str::<WireMessage>(message.get()) {
        Ok(WireMessage::Request(request)) => Decoded::Item(ReplayItem::Request(Box::new(request))),
        Ok(WireMessage::Event(event)) if event.type_name() == envelope.kind => {
            let kind = envelope.kind.into_owned();
            known_events.insert(kind.clone());
            Decoded::Item(ReplayItem::EventLine {
                kind,
                line: event_line(message.get()),
            })
        }
        // Recorded under an alias (an older name): sent under the current one.
        Ok(WireMessage::Event(event)) => Decoded::Item(ReplayItem::Event(Box::new(event))),
        Err(_) => Decoded::Unreadable,
    }
}

/// The type name of a message laid out exactly as we and the reference write it,
/// `{"type":"Name","payload":{` or `{"type": "Name", "payload": {`: the whole line was already validated as
/// JSON, so this prefix is all the fast path needs to know the message has a type and an object payload,
/// without a second parse. `None` for any other layout (which then gets the full parse).
fn known_prefix(message: &str) -> Option<&str> {
    for (head, middle) in [
        (r#"{"type":""#, r#"","payload":{"#),
        (r#"{"type": ""#, r#"", "payload": {"#),
    ] {
        if let Some(rest) = message.strip_prefix(head)
            && let Some(end) = memchr::memchr(b'"', rest.as_bytes())
            && rest[end..].starts_with(middle)
        {
            return Some(&rest[..end]);
        }
    }
    None
}

/// `{"jsonrpc":"2.0","method":"event","params":<message>}` around the recorded message text.
fn event_line(message: &str) -> String {
    EventLine::wrap(message).into_line()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    /// What a client would receive for each item, as JSON values.
    async fn replayed(content: &[u8]) -> (Vec<Value>, u64) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, content).unwrap();
        let mut reader = WireFileReader::open(&path).await.unwrap().unwrap();
        let mut out = Vec::new();
        while let Some(item) = reader.next_item().await.unwrap() {
            out.push(match item {
                ReplayItem::EventLine { line, .. } => serde_json::from_str(&line).unwrap(),
                ReplayItem::Event(event) => {
                    json!({"jsonrpc": "2.0", "method": "event", "params": event})
                }
                ReplayItem::Request(request) => {
                    json!({"jsonrpc": "2.0", "method": "request", "id": request.id(), "params": request})
                }
            });
        }
        (out, reader.skipped())
    }

    fn event(kind: &str, payload: Value) -> Value {
        json!({"jsonrpc": "2.0", "method": "event", "params": {"type": kind, "payload": payload}})
    }

    const HEADER: &str = r#"{"type": "metadata", "protocol_version": "1.10"}"#;
    const BEGIN: &str =
        r#"{"timestamp": 1.5, "message": {"type": "TurnBegin", "payload": {"user_input": "hi"}}}"#;
    const TEXT: &str = r#"{"timestamp": 2.5, "message": {"type": "ContentPart", "payload": {"type": "text", "text": "yo"}}}"#;
    const END: &str = r#"{"timestamp": 3.5, "message": {"type": "TurnEnd", "payload": {}}}"#;

    #[test]
    fn the_fast_path_reads_the_type_from_both_layouts_only() {
        assert_eq!(
            known_prefix(r#"{"type":"TurnEnd","payload":{}}"#),
            Some("TurnEnd")
        );
        assert_eq!(
            known_prefix(r#"{"type": "TurnEnd", "payload": {}}"#),
            Some("TurnEnd")
        );
        assert_eq!(known_prefix(r#"{"payload": {}, "type": "TurnEnd"}"#), None);
        assert_eq!(known_prefix(r#"{"type":"TurnEnd"}"#), None);
        assert_eq!(known_prefix(r#"{"type":"TurnEnd","payload":null}"#), None);
        assert_eq!(known_prefix(r#"{"type":"Turn\"End","payload":{}}"#), None);
    }

    #[tokio::test]
    async fn a_missing_file_has_no_reader() {
        let dir = tempfile::tempdir().unwrap();
        assert!(
            WireFileReader::open(&dir.path().join("none"))
                .await
                .unwrap()
                .is_none()
        );
    }

    #[tokio::test]
    async fn records_come_back_in_order_and_repeated_types_take_the_fast_path() {
        let content = [HEADER, BEGIN, TEXT, TEXT, END, BEGIN, END].join("\n");
        let (got, skipped) = replayed(content.as_bytes()).await;
        let begin = event("TurnBegin", json!({"user_input": "hi"}));
        let text = event("ContentPart", json!({"type": "text", "text": "yo"}));
        let end = event("TurnEnd", json!({}));
        assert_eq!(
            got,
            vec![begin.clone(), text.clone(), text, end.clone(), begin, end]
        );
        assert_eq!(skipped, 0);
    }

    #[tokio::test]
    async fn damage_is_skipped_and_counted_and_never_ends_the_read() {
        let content = [
            HEADER,
            BEGIN,
            "this is not json",
            r#"{"timestamp": 2.0, "message": {"type": "NoSuchEvent", "payload": {}}}"#,
            r#"{"message": {"type": "TurnEnd", "payload": {}}}"#,
            r#"{"timestamp": 2.1, "message": {"type": "ContentPart", "payload": {"type": "text"}}}"#,
            r#"{"timestamp": 2.2, "message": {"type": "TurnEnd"}}"#,
            "[1, 2]",
            TEXT,
            END,
            r#"{"timestamp": 2.2, "message": {"type": "TurnEnd"}}"#,
            r#"{"timestamp": 2.3, "message": {"type": "TurnEnd", "payload": []}}"#,
            r#"{"timestamp": 5.5, "mess"#,
        ]
        .join("\n");
        let (got, skipped) = replayed(content.as_bytes()).await;
        assert_eq!(
            got,
            vec![
                event("TurnBegin", json!({"user_input": "hi"})),
                event("ContentPart", json!({"type": "text", "text": "yo"})),
                event("TurnEnd", json!({})),
            ]
        );
        assert_eq!(skipped, 9);
    }

    #[tokio::test]
    async fn nul_runs_and_invalid_utf8_do_not_hide_records() {
        let mut content = Vec::new();
        content.extend_from_slice(HEADER.as_bytes());
        content.extend_from_slice(b"\n\0\0\0\0");
        content.extend_from_slice(BEGIN.as_bytes());
        content.extend_from_slice(b"\n");
        content.extend_from_slice(
            b"{\"timestamp\": 2.5, \"message\": {\"type\": \"ContentPart\", \"payload\": {\"type\": \"text\", \"text\": \"a\xffb\"}}}\n",
        );
        content.extend_from_slice(END.as_bytes());
        content.extend_from_slice(b"\n\0\0\0");
        let (got, skipped) = replayed(&content).await;
        assert_eq!(
            got,
            vec![
                event("TurnBegin", json!({"user_input": "hi"})),
                event("ContentPart", json!({"type": "text", "text": "a\u{fffd}b"})),
                event("TurnEnd", json!({})),
            ]
        );
        assert_eq!(skipped, 0);
    }

    #[tokio::test]
    async fn requests_keep_their_ids_and_aliases_get_the_current_name() {
        let content = [
            HEADER,
            r#"{"timestamp": 1.0, "message": {"type": "ToolCallRequest", "payload": {"id": "tc-1", "name": "ext", "arguments": "{}"}}}"#,
            r#"{"timestamp": 1.1, "message": {"type": "ApprovalRequestResolved", "payload": {"request_id": "r1", "response": "approve"}}}"#,
        ]
        .join("\n");
        let (got, skipped) = replayed(content.as_bytes()).await;
        assert_eq!(
            got,
            vec![
                json!({"jsonrpc": "2.0", "method": "request", "id": "tc-1", "params": {
                    "type": "ToolCallRequest", "payload": {"id": "tc-1", "name": "ext", "arguments": "{}"}}}),
                event(
                    "ApprovalResponse",
                    json!({"request_id": "r1", "response": "approve", "feedback": ""})
                ),
            ]
        );
        assert_eq!(skipped, 0);
    }

    #[tokio::test]
    async fn a_recorder_opened_on_a_torn_file_cuts_the_tail_first() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, format!("{HEADER}\n{BEGIN}\n{{\"timestamp\": 2.5, \"mes")).unwrap();
        let recorder = WireRecorder::open(&path, None).await;
        assert!(recorder.has_records());
        recorder
            .record_event(&Event::TurnEnd(Default::default()), None)
            .unwrap();
        recorder.flush().await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(lines[..2], [HEADER, BEGIN]);
        let last: Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(last["message"], json!({"type": "TurnEnd", "payload": {}}));
    }

    #[tokio::test]
    async fn a_file_holding_only_a_torn_header_gets_a_new_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("wire.jsonl");
        std::fs::write(&path, r#"{"type": "meta"#).unwrap();
        let recorder = WireRecorder::open(&path, None).await;
        assert!(!recorder.has_records());
        recorder.flush().await.unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let header: Value = serde_json::from_str(text.trim_end()).unwrap();
        assert_eq!(header["type"], "metadata");
    }
}
