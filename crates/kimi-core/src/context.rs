//! The conversation context and its `context.jsonl` (reference `soul/context.py`).
//!
//! Records, one per line: `{"role":"_system_prompt","content":..}` first, `{"role":"_checkpoint","id":N}`,
//! `{"role":"_usage","token_count":N}`, and messages. A message's content is a plain string when it is a
//! single text part, otherwise a list of parts, so files move between us and the reference.

use std::path::Path;

use kimi_llm::{Message, Role};
use kimi_wire::message::{ContentPart, ToolCall};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::recorder::{LineWriter, WriteError};

/// The in-memory context plus its file.
#[derive(Debug)]
pub struct Context {
    system_prompt: String,
    messages: Vec<Message>,
    token_count: u64,
    /// Tokens estimated for messages appended since the provider last reported usage.
    pending_estimate: u64,
    next_checkpoint: u64,
    file: Option<LineWriter>,
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
            messages: Vec::new(),
            token_count: 0,
            pending_estimate: 0,
            next_checkpoint: 0,
            file: None,
        }
    }

    /// Opens `path`: restores what it holds (its system prompt wins over `system_prompt`, as in the
    /// reference), or starts it with `system_prompt`.
    pub async fn open(path: &Path, system_prompt: String) -> Self {
        let existing = tokio::fs::read_to_string(path).await.unwrap_or_default();
        let mut context = Self::in_memory(system_prompt);
        let mut restored_prompt = false;
        let mut skipped = 0usize;
        for line in existing.lines().filter(|l| !l.trim().is_empty()) {
            let Ok(value) = serde_json::from_str::<Value>(line) else {
                skipped += 1;
                continue;
            };
            match value.get("role").and_then(Value::as_str) {
                Some("_system_prompt") => {
                    if let Some(prompt) = value.get("content").and_then(Value::as_str) {
                        context.system_prompt = prompt.to_owned();
                        restored_prompt = true;
                    }
                }
                Some("_checkpoint") => {
                    let id = value.get("id").and_then(Value::as_u64).unwrap_or(0);
                    context.next_checkpoint = context.next_checkpoint.max(id + 1);
                }
                Some("_usage") => {
                    context.token_count = value.get("token_count").and_then(Value::as_u64).unwrap_or(0);
                    context.pending_estimate = 0;
                }
                Some(_) => match decode_message(value) {
                    Some(message) => {
                        context.pending_estimate += estimate_tokens(std::slice::from_ref(&message));
                        context.messages.push(message);
                    }
                    None => skipped += 1,
                },
                None => skipped += 1,
            }
        }
        if skipped > 0 {
            tracing::warn!(path = %path.display(), skipped, "unreadable context records skipped");
        }
        let file = LineWriter::spawn(path);
        if !restored_prompt {
            let _ =
                file.append(json!({"role": "_system_prompt", "content": context.system_prompt}).to_string());
        }
        context.file = Some(file);
        context
    }

    /// The system prompt in force.
    pub fn system_prompt(&self) -> &str {
        &self.system_prompt
    }

    /// The messages, oldest first.
    pub fn messages(&self) -> &[Message] {
        &self.messages
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
            file.rotate(target).await?;
        }
        self.messages.clear();
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
        self.messages.push(message);
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
            Some(file) => file.flush().await,
            None => Ok(()),
        }
    }

    fn write(&self, record: Value) -> Result<(), WriteError> {
        match &self.file {
            Some(file) => file.append(record.to_string()),
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
