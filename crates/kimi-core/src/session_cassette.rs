//! `kimi-agent cassette from-session SESSION_DIR`: a cassette rebuilt from a recorded session's files,
//! so any real session can be replayed as a deterministic regression test.
//!
//! Each assistant message of a context file is one model call: its request is the system prompt and
//! the messages before it (joined as the loop joins them before sending), its answer the message's
//! parts and tool calls. The root agent's context files come first (rotated ones, `context_1.jsonl`
//! ..., then `context.jsonl`), then each subagent's (`subagents/<id>/context.jsonl`); a strict replay
//! matches calls by content, so their interleaving does not matter. Token usage and completion ids
//! come from `wire.jsonl` when its steps pair one to one with the root agent's answers.
//!
//! What the files do not keep cannot be rebuilt, and is reported as a note: the tools offered (so a
//! rebuilt call does not compare them), finish reasons, failed attempts, compaction and `/init` calls
//! and side questions.

use std::path::{Path, PathBuf};

use kimi_llm::cassette::{CallRecord, RecordedRequest, RunPaths, VERSION};
use kimi_llm::{Answer, Message, Role};
use kimi_wire::message::TokenUsage;
use serde_json::Value;

use crate::context::Context;
use crate::subagent::SUBAGENTS_DIR;

/// What `from-session` produced.
#[derive(Debug, Default)]
pub struct SessionCassette {
    /// One record per model call found.
    pub records: Vec<CallRecord>,
    /// What could not be rebuilt, for the user.
    pub notes: Vec<String>,
}

/// Why no cassette could be made.
#[derive(Debug, thiserror::Error)]
pub enum FromSessionError {
    /// The directory has no `context.jsonl`.
    #[error("{0} is not a session directory (no context.jsonl)")]
    NotASession(PathBuf),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Rebuilds the model calls of the session in `dir`.
pub async fn from_session(dir: &Path) -> Result<SessionCassette, FromSessionError> {
    if !dir.join("context.jsonl").is_file() {
        return Err(FromSessionError::NotASession(dir.to_path_buf()));
    }
    let mut out = SessionCassette::default();
    let paths = run_paths(dir, &mut out.notes);
    let root_files = context_files(dir)?;
    if root_files.len() > 1 {
        out.notes.push(format!(
            "the context was cleared or compacted {} time(s): a compaction's own model call is not kept in the session",
            root_files.len() - 1
        ));
    }
    for file in &root_files {
        out.records.extend(calls_in(file, &paths).await?);
    }
    let steps = step_facts(&dir.join("wire.jsonl"));
    if steps.len() == out.records.len() {
        for (record, (id, usage)) in out.records.iter_mut().zip(steps) {
            if let Some(answer) = &mut record.answer {
                answer.id = id;
                answer.usage = usage;
            }
        }
    } else {
        out.notes.push(format!(
            "wire.jsonl has {} finished steps for {} answers: token usage and completion ids are left out",
            steps.len(),
            out.records.len()
        ));
    }
    for file in subagent_files(dir) {
        out.records.extend(calls_in(&file, &paths).await?);
    }
    out.notes.push(
        "the session does not keep the tools offered, finish reasons or failed attempts: they are not compared or replayed"
            .to_owned(),
    );
    Ok(out)
}

/// The work dir (from `kimi.json`, by the hash the session's folder is named after), the share
/// directory (three levels up) and home.
fn run_paths(dir: &Path, notes: &mut Vec<String>) -> RunPaths {
    let share = dir.ancestors().nth(3).map(Path::to_path_buf);
    let hash = dir
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned());
    let work_dir = share
        .as_deref()
        .zip(hash.as_deref())
        .and_then(|(share, hash)| crate::session::work_dir_with_hash(share, hash));
    if work_dir.is_none() {
        notes.push(
            "the session's work dir is not in kimi.json: paths in it are compared as they are".to_owned(),
        );
    }
    let home = share
        .as_deref()
        .filter(|s| s.file_name().is_some_and(|n| n == ".kimi"))
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .or_else(crate::paths::home_dir);
    let text = |p: Option<PathBuf>| p.map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
    RunPaths {
        work_dir: text(work_dir),
        share_dir: text(share),
        home: text(home),
    }
}

/// `context_1.jsonl`, `context_2.jsonl`, ... (oldest first), then `context.jsonl`.
fn context_files(dir: &Path) -> Result<Vec<PathBuf>, FromSessionError> {
    let entries = std::fs::read_dir(dir).map_err(|source| FromSessionError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut rotated: Vec<(u32, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().to_string_lossy().into_owned();
            let n = name
                .strip_prefix("context_")?
                .strip_suffix(".jsonl")?
                .parse()
                .ok()?;
            Some((n, entry.path()))
        })
        .collect();
    rotated.sort();
    let mut files: Vec<PathBuf> = rotated.into_iter().map(|(_, path)| path).collect();
    files.push(dir.join("context.jsonl"));
    Ok(files)
}

fn subagent_files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir.join(SUBAGENTS_DIR)) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path().join("context.jsonl"))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// One record per assistant message of the context file `path`.
async fn calls_in(path: &Path, paths: &RunPaths) -> Result<Vec<CallRecord>, FromSessionError> {
    let context = Context::read_only(path)
        .await
        .map_err(|source| FromSessionError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let Some(context) = context else {
        return Ok(Vec::new());
    };
    let messages = context.messages();
    let records = messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m.role == Role::Assistant)
        .map(|(i, answer)| CallRecord {
            cassette: VERSION,
            provider: "session".to_owned(),
            model: String::new(),
            parameters: Value::Null,
            paths: paths.clone(),
            request: RecordedRequest {
                system_prompt: Some(context.system_prompt().to_owned()),
                tools: None,
                messages: crate::reminders::merged(std::sync::Arc::new(messages[..i].to_vec()))
                    .as_ref()
                    .clone(),
            },
            answer: Some(answer_of(answer)),
            error: None,
            abandoned: false,
        })
        .collect();
    Ok(records)
}

fn answer_of(message: &Message) -> Answer {
    Answer {
        content: message.content.clone(),
        tool_calls: message.tool_calls.clone(),
        ..Answer::default()
    }
}

/// A step's completion id and token usage.
type StepFacts = (Option<String>, Option<TokenUsage>);

/// A step of `wire.jsonl` being read.
#[derive(Default)]
struct OpenStep {
    /// Its `StatusUpdate`, once seen.
    status: Option<StepFacts>,
    /// It was interrupted (no answer entered the context).
    failed: bool,
}

/// The completion id and usage of each finished step of the root agent, in order: the first
/// `StatusUpdate` after each `StepBegin`, for steps not interrupted. Unreadable lines are skipped.
fn step_facts(wire: &Path) -> Vec<StepFacts> {
    let Ok(text) = std::fs::read_to_string(wire) else {
        return Vec::new();
    };
    let mut steps = Vec::new();
    let mut open: Option<OpenStep> = None;
    let close = |open: &mut Option<OpenStep>, steps: &mut Vec<StepFacts>| {
        if let Some(OpenStep {
            status: Some(status),
            failed: false,
        }) = open.take()
        {
            steps.push(status);
        }
    };
    for line in text.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let message = &record["message"];
        match (message["type"].as_str(), open.as_mut()) {
            (Some("StepBegin"), _) => {
                close(&mut open, &mut steps);
                open = Some(OpenStep::default());
            }
            (Some("StatusUpdate"), Some(step)) if step.status.is_none() => {
                let payload = &message["payload"];
                step.status = Some((
                    payload["message_id"].as_str().map(str::to_owned),
                    serde_json::from_value(payload["token_usage"].clone()).ok(),
                ));
            }
            (Some("StepInterrupted"), Some(step)) => step.failed = true,
            (Some("TurnEnd"), _) => close(&mut open, &mut steps),
            _ => {}
        }
    }
    close(&mut open, &mut steps);
    steps
}
