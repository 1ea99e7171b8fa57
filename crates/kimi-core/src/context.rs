//! The conversation context and its `context.jsonl` (reference `soul/context.py`).
//!
//! Records, one per line: `{"role":"_system_prompt","content":..}` first, `{"role":"_checkpoint","id":N}`,
//! `{"role":"_usage","token_count":N}`, and messages. A message's content is a plain string when it is a
//! single text part, otherwise a list of parts, so files move between us and the reference.

use std::path::Path;
use std::sync::Arc;

use kimi_llm::{Message, Role};
use kimi_wire::message::{ContentPart, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::recorder::{RecordReader, SessionFile, WriteError, repair_tail_logged};

/// The in-memory context plus its file.
#[derive(Debug)]
pub struct Context {
    system_prompt: String,
    /// Shared with the step that is calling the model ([`Context::history`]), so a step costs no copy
    /// of the whole conversation; the copy-on-write in the mutators only copies when a snapshot is
    /// still alive.
    messages: Arc<Vec<Message>>,
    token_count: u64,
    /// Tokens estimated for messages appended since the provider last reported usage.
    pending_estimate: u64,
    next_checkpoint: u64,
    /// Which history this is: the messages only grow until [`Context::clear`], which starts a new one.
    /// Unique in the process, so readers that remember how far they read can tell a history apart from
    /// another context's or from what this one held before it was cleared.
    generation: u64,
    file: Option<SessionFile>,
}

/// A generation no context has had yet.
fn next_generation() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

#[derive(Serialize, Deserialize)]
struct StoredMessage {
    role: Role,
    content: Value,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
}

impl Context {
    /// A context that is not persisted (tests, subagents without files).
    pub fn in_memory(system_prompt: String) -> Self {
        Self {
            system_prompt,
            messages: Arc::new(Vec::new()),
            token_count: 0,
            pending_estimate: 0,
            next_checkpoint: 0,
            generation: next_generation(),
            file: None,
        }
    }

    /// Opens `path`: restores what it holds (its system prompt wins over `system_prompt`, as in the
    /// reference), or starts it with `system_prompt`. A record torn by a crash is cut from the file
    /// first; unreadable records are skipped, counted and logged, and never end the read.
    pub async fn open(path: &Path, system_prompt: String, client: Option<&kimi_wire::ClientHandle>) -> Self {
        let target = path.to_path_buf();
        let _ = tokio::task::spawn_blocking(move || repair_tail_logged(&target)).await;
        let mut context = Self::in_memory(system_prompt);
        let restored_prompt = match tokio::fs::File::open(path).await {
            Ok(file) => context.restore(path, file).await,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
            Err(e) => {
                tracing::error!(path = %path.display(), error = %e, "context.jsonl unreadable; starting empty");
                false
            }
        };
        let file = SessionFile::new(path, client);
        if !restored_prompt {
            let _ =
                file.append(&json!({"role": "_system_prompt", "content": context.system_prompt}).to_string());
        }
        context.file = Some(file);
        context
    }

    /// Reads the conversation in `path` without taking the file over (no writer, no repair): for
    /// looking at another session. `Ok(None)` when the file holds nothing readable.
    pub async fn read_only(path: &Path) -> std::io::Result<Option<Self>> {
        let file = tokio::fs::File::open(path).await?;
        let mut context = Self::in_memory(String::new());
        let had_prompt = context.restore(path, file).await;
        Ok((had_prompt || !context.messages.is_empty()).then_some(context))
    }

    /// Applies every readable record of `file`; returns whether it held a system prompt.
    async fn restore(&mut self, path: &Path, file: tokio::fs::File) -> bool {
        let mut records = RecordReader::new(tokio::io::BufReader::new(file));
        let mut restored_prompt = false;
        loop {
            let line = match records.next_record().await {
                Ok(Some(line)) => line,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(path = %path.display(), error = %e, "context.jsonl read failed part way");
                    break;
                }
            };
            // The reference reads the file with `errors="replace"`: invalid UTF-8 costs characters,
            // not the record.
            let value = serde_json::from_slice::<Value>(line).or_else(|e| match std::str::from_utf8(line) {
                Ok(_) => Err(e),
                Err(_) => serde_json::from_str(&String::from_utf8_lossy(line)),
            });
            let Ok(value) = value else {
                records.skip();
                continue;
            };
            match value.get("role").and_then(Value::as_str) {
                Some("_system_prompt") => {
                    if let Some(prompt) = value.get("content").and_then(Value::as_str) {
                        self.system_prompt = prompt.to_owned();
                        restored_prompt = true;
                    }
                }
                Some("_checkpoint") => {
                    let id = value.get("id").and_then(Value::as_u64).unwrap_or(0);
                    self.next_checkpoint = self.next_checkpoint.max(id + 1);
                }
                Some("_usage") => {
                    self.token_count = value.get("token_count").and_then(Value::as_u64).unwrap_or(0);
                    self.pending_estimate = 0;
                }
                Some(_) => match decode_message(value) {
                    Some(message) => {
                        self.pending_estimate += estimate_tokens(std::slice::from_ref(&message));
                        Arc::make_mut(&mut self.messages).push(message);
                    }
                    None => records.skip(),
                },
                None => records.skip(),
            }
        }
        if records.skipped() > 0 {
            tracing::warn!(
                path = %path.display(),
                skipped = records.skipped(),
                "unreadable context records skipped"
            );
        }
        restored_prompt
    }

    /// The system prompt in force.
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Which history [`Context::messages`] is: the same generation only ever gains messages at its end.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The messages as they are now, to read without holding the context: a shared snapshot, not a
    /// copy. Drop it before the context changes again, or that change copies the messages once.
    pub fn history(&self) -> Arc<Vec<Message>> {
        Arc::clone(&self.messages)
    }

    /// Tokens in context according to the last reported usage.
    pub fn token_count(&self) -> u64 {
        self.token_count
    }

    /// The token count plus an estimate for what was appended since (reference
    /// `token_count_with_pending`); decides auto-compaction.
    pub fn token_count_with_pending(&self) -> u64 {
        self.token_count + self.pending_estimate
    }

    /// Has a checkpoint been written since the context was started or cleared?
    pub fn has_checkpoints(&self) -> bool {
        self.next_checkpoint > 0
    }

    /// Moves the file to the next free `context_N.jsonl` and starts over with only the system prompt
    /// (reference `Context.clear` followed by writing the system prompt).
    pub async fn clear(&mut self) -> Result<(), WriteError> {
        if let Some(file) = &self.file {
            let target = next_rotation_path(file.path()).await;
            file.rotate(&target)?;
        }
        self.messages = Arc::new(Vec::new());
        self.generation = next_generation();
        self.token_count = 0;
        self.pending_estimate = 0;
        self.next_checkpoint = 0;
        self.write(json!({"role": "_system_prompt", "content": self.system_prompt}))
    }

    /// Has anything been said yet?
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// Marks a point the context can be reverted to.
    pub fn checkpoint(&mut self) -> Result<(), WriteError> {
        let id = self.next_checkpoint;
        self.next_checkpoint += 1;
        self.write(json!({"role": "_checkpoint", "id": id}))
    }

    /// Appends a message.
    pub fn append(&mut self, message: Message) -> Result<(), WriteError> {
        let record = encode_message(&message);
        self.pending_estimate += estimate_tokens(std::slice::from_ref(&message));
        Arc::make_mut(&mut self.messages).push(message);
        self.write(record)
    }

    /// Records the token count reported by the provider.
    pub fn update_token_count(&mut self, token_count: u64) -> Result<(), WriteError> {
        self.token_count = token_count;
        self.pending_estimate = 0;
        self.write(json!({"role": "_usage", "token_count": token_count}))
    }

    /// Waits until the file has everything (durably when `durable`).
    pub async fn flush(&self, durable: bool) -> Result<(), WriteError> {
        match &self.file {
            Some(file) if durable => file.sync().await,
            Some(file) => file.commit(),
            None => Ok(()),
        }
    }

    /// The first failed write of the file, if any (no I/O).
    pub fn check(&self) -> Result<(), WriteError> {
        self.file.as_ref().map_or(Ok(()), SessionFile::check)
    }

    fn write(&self, record: Value) -> Result<(), WriteError> {
        match &self.file {
            Some(file) => file.append(&record.to_string()),
            None => Ok(()),
        }
    }
}

/// Tokens estimated from the text of `messages`: characters / 4 (reference `estimate_text_tokens`).
pub fn estimate_tokens(messages: &[Message]) -> u64 {
    let chars: usize = messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(ContentPart::as_text)
        .map(|t| t.chars().count())
        .sum();
    (chars / 4) as u64
}

/// `context_1.jsonl`, `context_2.jsonl`, ...: the first that does not exist yet.
async fn next_rotation_path(path: &Path) -> std::path::PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "context".into());
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut n = 1u32;
    loop {
        let candidate = dir.join(format!("{stem}_{n}.jsonl"));
        if !tokio::fs::try_exists(&candidate).await.unwrap_or(false) {
            return candidate;
        }
        n += 1;
    }
}

fn encode_message(message: &Message) -> Value {
    let content = match message.content.as_slice() {
        [ContentPart::Text(part)] => Value::String(part.text.clone()),
        parts => serde_json::to_value(parts).unwrap_or(Value::Array(Vec::new())),
    };
    let stored = StoredMessage {
        role: message.role,
        content,
        tool_calls: message.tool_calls.clone(),
        tool_call_id: message.tool_call_id.clone(),
        name: message.name.clone(),
    };
    serde_json::to_value(stored).unwrap_or(Value::Null)
}

fn decode_message(value: Value) -> Option<Message> {
    let stored: StoredMessage = serde_json::from_value(value).ok()?;
    let content = match stored.content {
        Value::String(text) => vec![ContentPart::text(text)],
        Value::Null => Vec::new(),
        other => serde_json::from_value(other).ok()?,
    };
    Some(Message {
        role: stored.role,
        content,
        tool_calls: stored.tool_calls,
        tool_call_id: stored.tool_call_id,
        name: stored.name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(context: &Context) -> Vec<String> {
        context
            .messages()
            .iter()
            .flat_map(|m| {
                m.content
                    .iter()
                    .filter_map(ContentPart::as_text)
                    .map(str::to_owned)
            })
            .collect()
    }

    #[test]
    fn a_history_snapshot_is_stable_and_costs_no_copy_once_dropped() {
        let mut context = Context::in_memory(String::new());
        context.append(Message::user_text("a")).unwrap();
        let snapshot = context.history();
        context.append(Message::user_text("b")).unwrap();
        assert_eq!(snapshot.len(), 1, "a snapshot does not see later messages");
        assert_eq!(texts(&context), ["a", "b"]);
        drop(snapshot);
        // With no snapshot alive, appending grows the same shared vector instead of copying it.
        let shared = Arc::as_ptr(&context.history());
        context.append(Message::user_text("c")).unwrap();
        assert_eq!(Arc::as_ptr(&context.history()), shared);
        assert_eq!(texts(&context), ["a", "b", "c"]);
    }

    #[tokio::test]
    async fn a_damaged_file_restores_every_readable_record_and_is_repaired() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        let mut content = Vec::new();
        content.extend_from_slice(b"{\"role\": \"_system_prompt\", \"content\": \"old prompt\"}\n");
        content.extend_from_slice(b"{\"role\": \"_checkpoint\", \"id\": 0}\n");
        content.extend_from_slice(b"{\"role\":\"user\",\"content\":\"first\"}\n");
        content.extend_from_slice(b"garbage in the middle\n");
        content.extend_from_slice(b"\0\0\0\0{\"role\":\"assistant\",\"content\":\"caf\xff\"}\n");
        content.extend_from_slice(b"{\"role\": \"_usage\", \"token_count\": 42}\n");
        content.extend_from_slice(b"{\"role\": \"_checkpoint\", \"id\": 1}\n");
        content.extend_from_slice(b"{\"role\":\"user\",\"content\":\"second\"}\n");
        content.extend_from_slice(b"{\"role\":\"assistant\",\"content\":\"torn");
        std::fs::write(&path, &content).unwrap();

        let mut context = Context::open(&path, "new prompt".into(), None).await;
        assert_eq!(context.system_prompt(), "old prompt");
        assert_eq!(texts(&context), ["first", "caf\u{fffd}", "second"]);
        assert_eq!(context.token_count(), 42);
        assert!(context.has_checkpoints());

        context
            .append(Message::new(Role::Assistant, vec![ContentPart::text("third")]))
            .unwrap();
        context.flush(true).await.unwrap();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        let last = text.lines().last().unwrap();
        assert_eq!(last, r#"{"role":"assistant","content":"third"}"#);
        assert!(!text.contains("torn"), "the torn record was cut: {text}");

        // The checkpoint numbering continues after the restored ones.
        context.checkpoint().unwrap();
        context.flush(false).await.unwrap();
        let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
        assert!(text.ends_with("{\"role\":\"_checkpoint\",\"id\":2}\n"), "{text}");
        let reopened = Context::open(&path, "x".into(), None).await;
        assert_eq!(texts(&reopened), ["first", "caf\u{fffd}", "second", "third"]);
    }

    #[tokio::test]
    async fn a_new_file_starts_with_the_system_prompt() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("context.jsonl");
        let context = Context::open(&path, "prompt".into(), None).await;
        context.flush(false).await.unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "{\"role\":\"_system_prompt\",\"content\":\"prompt\"}\n"
        );
    }
}
