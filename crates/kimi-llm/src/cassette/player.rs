//! `type = "_cassette"`: a provider that answers every call from a cassette, without any network.
//!
//! Strict (the default): each call is compared, once normalised (see `normalize.rs`), with the
//! recorded calls not yet used and answered by the first that is equal, so calls the agent makes side
//! by side (subagents) may come in another order than recorded. When none is equal the call fails
//! with a [`ChatError::Cassette`] naming the first difference from the next unused call in the file:
//! the agent's behaviour changed. With `strict = false` the next unused call answers, whatever was
//! asked. A cassette with no call left fails the call too.
//!
//! Answers are played back whole (one event per part, each tool call with all its arguments), with
//! the recording's directories replaced by this run's and the ids the agent made up then (a task id,
//! an agent id, a plan file name) by the ones it made up now, paired from the requests already
//! matched. A recorded failure fails again; a call the agent abandoned when it was recorded (a
//! cancelled turn) plays what had arrived and then waits, as the provider did, until the agent stops
//! reading.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use futures::StreamExt as _;
use serde_json::Value;

use super::diff::first_difference;
use super::format::{CallRecord, RecordedRequest, RunPaths};
use super::normalize::{Normalizer, map_strings};
use crate::{Answer, ChatError, ChatProvider, ChatRequest, ChatStream};

/// A request's compared fields, each normalised, with the made-up ids each held.
#[derive(Debug, Clone, Default)]
struct Normalized {
    /// `(field, normalised value, ids in order)`, in a fixed field order.
    fields: Vec<(&'static str, Value, Vec<String>)>,
}

impl Normalized {
    /// `request`'s fields as `paths` sees them; `None` fields are left out (not compared).
    fn of(request: &RecordedRequest, paths: &Normalizer) -> Self {
        let mut fields = Vec::with_capacity(3);
        if let Some(prompt) = &request.system_prompt {
            let (value, ids) = paths.normalize(&Value::String(prompt.clone()));
            fields.push(("system_prompt", value, ids));
        }
        if let Some(tools) = &request.tools {
            let (value, ids) = paths.normalize(&serde_json::to_value(tools).unwrap_or(Value::Null));
            fields.push(("tools", value, ids));
        }
        let messages = serde_json::to_value(&request.messages).unwrap_or(Value::Null);
        let (value, ids) = paths.normalize(&messages);
        fields.push(("messages", value, ids));
        Self { fields }
    }

    /// The fields `recorded` compares, taken from `self`, as one object.
    fn compared_as(&self, recorded: &Normalized) -> Value {
        let fields = recorded.fields.iter().filter_map(|(name, _, _)| {
            let (_, value, _) = self.fields.iter().find(|(n, _, _)| n == name)?;
            Some(((*name).to_owned(), value.clone()))
        });
        Value::Object(fields.collect())
    }

    fn as_object(&self) -> Value {
        self.compared_as(self)
    }

    /// Whether `self` (this run) equals `recorded` in every field the recording compares.
    fn matches(&self, recorded: &Normalized) -> bool {
        recorded
            .fields
            .iter()
            .all(|(name, value, _)| self.fields.iter().any(|(n, v, _)| n == name && v == value))
    }

    /// The ids of the fields `recorded` compares, in order.
    fn ids_as(&self, recorded: &Normalized) -> Vec<String> {
        recorded
            .fields
            .iter()
            .filter_map(|(name, _, _)| self.fields.iter().find(|(n, _, _)| n == name))
            .flat_map(|(_, _, ids)| ids.iter().cloned())
            .collect()
    }
}

/// A recorded call, ready to be compared.
#[derive(Debug)]
struct Entry {
    record: CallRecord,
    /// Its line in the file (from 1), for messages.
    line: usize,
    /// The request's compared fields, normalised for the recording's paths.
    normalized: Normalized,
    /// How the recording's directories become placeholders.
    paths: Normalizer,
    used: bool,
}

#[derive(Debug, Default)]
struct State {
    entries: Vec<Entry>,
    /// Model calls made so far.
    calls: u64,
    /// Recorded id -> this run's id.
    ids: HashMap<String, String>,
}

/// The `_cassette` provider; see the module docs.
#[derive(Debug)]
pub struct CassetteProvider {
    file: PathBuf,
    model: String,
    strict: bool,
    /// This run's directories.
    here: Normalizer,
    /// A std mutex: held to pick a call, never across an await.
    state: Mutex<State>,
}

/// Why a cassette could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    /// The file could not be read.
    #[error("cannot read the cassette {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line is not a call record.
    #[error("{path} line {line} is not a cassette record: {source}")]
    Line {
        /// The file.
        path: PathBuf,
        /// The line (from 1).
        line: usize,
        /// Why.
        source: serde_json::Error,
    },
}

impl CassetteProvider {
    /// Loads `file` (blank lines skipped) to answer as `model`; `paths` are this run's directories.
    pub fn open(file: &Path, model: &str, strict: bool, paths: &RunPaths) -> Result<Self, CassetteError> {
        let text = std::fs::read_to_string(file).map_err(|source| CassetteError::Read {
            path: file.to_path_buf(),
            source,
        })?;
        let mut entries = Vec::new();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let record: CallRecord = serde_json::from_str(line).map_err(|source| CassetteError::Line {
                path: file.to_path_buf(),
                line: index + 1,
                source,
            })?;
            let paths = Normalizer::new(&record.paths);
            entries.push(Entry {
                normalized: Normalized::of(&record.request, &paths),
                record,
                line: index + 1,
                paths,
                used: false,
            });
        }
        Ok(Self {
            file: file.to_path_buf(),
            model: model.to_owned(),
            strict,
            here: Normalizer::new(paths),
            state: Mutex::new(State {
                entries,
                ..State::default()
            }),
        })
    }

    /// Picks the recorded call answering `request` and returns what it plays, adapted to this run,
    /// or why no call answers it.
    fn pick(&self, request: &RecordedRequest) -> Result<Playback, ChatError> {
        let live = Normalized::of(request, &self.here);
        let mut state = kimi_wire::sync::lock(&self.state);
        state.calls += 1;
        let call = state.calls;
        let Some(next) = state.entries.iter().position(|e| !e.used) else {
            let total = state.entries.len();
            return Err(ChatError::Cassette {
                message: format!(
                    "Cassette exhausted: model call {call} has no recording left in {} ({total} calls recorded)",
                    self.file.display()
                ),
                call,
                path: None,
            });
        };
        let chosen = if self.strict {
            let found = state
                .entries
                .iter()
                .position(|e| !e.used && live.matches(&e.normalized));
            let Some(found) = found else {
                let entry = &state.entries[next];
                let difference = first_difference(
                    &entry.normalized.as_object(),
                    &live.compared_as(&entry.normalized),
                );
                let (path, detail) = match difference {
                    Some(d) => (
                        d.path.clone(),
                        format!("at {}: recorded {}, got {}", d.path, d.recorded, d.got),
                    ),
                    None => ("$".to_owned(), "no recorded call matches".to_owned()),
                };
                return Err(ChatError::Cassette {
                    message: format!(
                        "Cassette mismatch at model call {call} ({} line {}): {detail}",
                        self.file.display(),
                        entry.line
                    ),
                    call,
                    path: Some(path),
                });
            };
            found
        } else {
            next
        };
        let entry = &state.entries[chosen];
        // Equal once normalised: the made-up ids line up one to one.
        let pairs: Vec<(String, String)> = if live.matches(&entry.normalized) {
            entry
                .normalized
                .ids_as(&entry.normalized)
                .into_iter()
                .zip(live.ids_as(&entry.normalized))
                .filter(|(recorded, now)| recorded != now)
                .collect()
        } else {
            Vec::new()
        };
        state.ids.extend(pairs);
        let state = &mut *state;
        let entry = &mut state.entries[chosen];
        entry.used = true;
        let adapt = |text: &str| self.here.show_paths(&entry.paths.hide_paths(text));
        Ok(Playback {
            answer: entry
                .record
                .answer
                .clone()
                .map(|a| adapt_answer(a, &adapt, &state.ids)),
            error: entry.record.error.as_ref().map(|e| e.to_chat_error()),
            abandoned: entry.record.abandoned,
        })
    }
}

/// What one recorded call plays.
struct Playback {
    answer: Option<Answer>,
    error: Option<ChatError>,
    abandoned: bool,
}

/// `answer` with the recording's directories moved to this run's (`adapt`) and recorded ids
/// replaced by this run's.
fn adapt_answer(answer: Answer, adapt: &impl Fn(&str) -> String, ids: &HashMap<String, String>) -> Answer {
    let Ok(value) = serde_json::to_value(&answer) else {
        return answer;
    };
    let value = map_strings(&value, &mut |text| {
        let mut text = adapt(text);
        for (recorded, now) in ids {
            if text.contains(recorded.as_str()) {
                text = text.replace(recorded.as_str(), now);
            }
        }
        text
    });
    serde_json::from_value(value).unwrap_or(answer)
}

#[async_trait::async_trait]
impl ChatProvider for CassetteProvider {
    fn model_name(&self) -> &str {
        &self.model
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let Playback {
            answer,
            error,
            abandoned,
        } = self.pick(&RecordedRequest::of(&request))?;
        let events = answer.map(Answer::into_events).unwrap_or_default();
        if events.is_empty()
            && let Some(error) = error
        {
            return Err(error);
        }
        let head = futures::stream::iter(events.into_iter().map(Ok));
        Ok(match (error, abandoned) {
            (Some(error), _) => head.chain(futures::stream::iter([Err(error)])).boxed(),
            (None, true) => head.chain(futures::stream::pending()).boxed(),
            (None, false) => head.boxed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use kimi_wire::message::{ContentPart, ToolCall};
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::cassette::{CassetteWriter, RecordedError, RecordingMeta, RecordingProvider};
    use crate::{Message, StreamEvent, ToolSpec};

    /// Answers every call with `answer`, whatever it is asked.
    #[derive(Debug)]
    struct Fixed(Answer);

    #[async_trait::async_trait]
    impl ChatProvider for Fixed {
        fn model_name(&self) -> &str {
            "fixed"
        }
        async fn generate(&self, _: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
            Ok(futures::stream::iter(self.0.clone().into_events().into_iter().map(Ok)).boxed())
        }
    }

    fn paths(root: &str) -> RunPaths {
        RunPaths {
            work_dir: format!("{root}/work"),
            share_dir: format!("{root}/home/.kimi"),
            home: format!("{root}/home"),
        }
    }

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "Shell".into(),
            description: "Runs a command".into(),
            parameters: serde_json::json!({"type": "object"}),
        }]
    }

    async fn call(
        provider: &dyn ChatProvider,
        system: &str,
        history: &[Message],
    ) -> Result<Answer, ChatError> {
        let tools = tools();
        let request = ChatRequest {
            system_prompt: system,
            tools: &tools,
            history,
        };
        Answer::collect(provider.generate(request).await?).await
    }

    /// Records one call of `answer` to `history` made in `/rec`, and returns the cassette.
    async fn recorded(dir: &Path, system: &str, history: &[Message], answer: Answer) -> PathBuf {
        let file = dir.join("calls.jsonl");
        let writer = Arc::new(CassetteWriter::open(&file).unwrap());
        let meta = RecordingMeta {
            provider: "kimi".into(),
            model: "k2".into(),
            parameters: Value::Null,
            paths: paths("/rec"),
            secrets: vec!["sk-secret-key".into()],
        };
        let recorder = RecordingProvider::new(Arc::new(Fixed(answer.clone())), writer, meta);
        assert_eq!(call(&recorder, system, history).await.unwrap(), answer);
        file
    }

    #[tokio::test]
    async fn a_recorded_call_replays_in_another_checkout_with_its_paths_and_ids_moved() {
        let dir = tempfile::tempdir().unwrap();
        let system = "Work dir: /rec/work. Now: 2026-11-30T10:00:00+01:00.";
        let history = vec![
            Message::user_text("start a task"),
            Message::tool(
                "t0",
                vec![ContentPart::text("Started bash-k3x9a0qz in /rec/work")],
            ),
        ];
        let answer = Answer {
            id: Some("chatcmpl-1".into()),
            content: vec![ContentPart::text("Reading /rec/work/notes.txt")],
            tool_calls: vec![ToolCall::new(
                "t1",
                "TaskOutput",
                Some(r#"{"task_id":"bash-k3x9a0qz","path":"/rec/work/notes.txt"}"#.into()),
            )],
            usage: None,
            finish_reason: Some("tool_calls".into()),
        };
        let file = recorded(dir.path(), system, &history, answer).await;
        let player = CassetteProvider::open(&file, "k2", true, &paths("/elsewhere")).unwrap();
        let system = "Work dir: /elsewhere/work. Now: 2027-01-02T03:04:05Z.";
        let history = vec![
            Message::user_text("start a task"),
            Message::tool(
                "t0",
                vec![ContentPart::text("Started bash-z9y8x7w6 in /elsewhere/work")],
            ),
        ];
        let played = call(&player, system, &history).await.unwrap();
        assert_eq!(played.text(), "Reading /elsewhere/work/notes.txt");
        assert_eq!(
            played.tool_calls[0].function.arguments.as_deref(),
            Some(r#"{"task_id":"bash-z9y8x7w6","path":"/elsewhere/work/notes.txt"}"#)
        );
        assert_eq!(played.finish_reason.as_deref(), Some("tool_calls"));
        // One call recorded, one played: the next has nothing left.
        let error = call(&player, system, &history).await.unwrap_err();
        assert!(
            matches!(
                error,
                ChatError::Cassette {
                    call: 2,
                    path: None,
                    ..
                }
            ),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn a_different_request_fails_naming_the_first_difference_unless_not_strict() {
        let dir = tempfile::tempdir().unwrap();
        let history = vec![Message::user_text("list the files")];
        let answer = Answer {
            content: vec![ContentPart::text("a.txt")],
            ..Answer::default()
        };
        let file = recorded(dir.path(), "sys", &history, answer).await;
        assert_eq!(std::fs::read_to_string(&file).unwrap().lines().count(), 1);

        let strict = CassetteProvider::open(&file, "k2", true, &paths("/rec")).unwrap();
        let changed = vec![Message::user_text("list the folders")];
        let error = call(&strict, "sys", &changed).await.unwrap_err();
        let ChatError::Cassette {
            message,
            call: 1,
            path,
        } = &error
        else {
            panic!("{error:?}");
        };
        assert_eq!(path.as_deref(), Some("$.messages[0].content[0].text"));
        assert!(
            message.ends_with(r#"line 1): at $.messages[0].content[0].text: recorded "list the files", got "list the folders""#),
            "{message}"
        );
        assert!(!error.is_retryable());

        let loose = CassetteProvider::open(&file, "k2", false, &paths("/rec")).unwrap();
        assert_eq!(call(&loose, "sys", &changed).await.unwrap().text(), "a.txt");
    }

    #[tokio::test]
    async fn failures_and_abandoned_calls_play_as_they_happened() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("calls.jsonl");
        let history = vec![Message::user_text("hi")];
        let base = CallRecord {
            cassette: crate::cassette::VERSION,
            provider: "kimi".into(),
            model: "k2".into(),
            parameters: Value::Null,
            paths: RunPaths::default(),
            request: RecordedRequest {
                system_prompt: None,
                tools: None,
                messages: history.clone(),
            },
            answer: None,
            error: Some(RecordedError::from(&ChatError::status(503, "busy"))),
            abandoned: false,
        };
        let abandoned = CallRecord {
            answer: Some(Answer {
                content: vec![ContentPart::text("Hel")],
                ..Answer::default()
            }),
            error: None,
            abandoned: true,
            ..base.clone()
        };
        let lines = [&base, &abandoned]
            .map(|r| serde_json::to_string(r).unwrap())
            .join("\n");
        std::fs::write(&file, lines).unwrap();
        let player = CassetteProvider::open(&file, "k2", true, &RunPaths::default()).unwrap();
        // Fields the recording does not have (system prompt, tools) are not compared.
        let error = call(&player, "any prompt", &history).await.unwrap_err();
        assert_eq!(error, ChatError::status(503, "busy"));
        let tools = tools();
        let mut stream = player
            .generate(ChatRequest {
                system_prompt: "",
                tools: &tools,
                history: &history,
            })
            .await
            .unwrap();
        assert_eq!(
            stream.next().await.unwrap().unwrap(),
            StreamEvent::Part(ContentPart::text("Hel"))
        );
        assert!(
            futures::FutureExt::now_or_never(stream.next()).is_none(),
            "an abandoned call waits after what arrived"
        );
    }

    /// Fails every call with a text that repeats the key.
    #[derive(Debug)]
    struct Refusing;

    #[async_trait::async_trait]
    impl ChatProvider for Refusing {
        fn model_name(&self) -> &str {
            "refusing"
        }
        async fn generate(&self, _: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
            Err(ChatError::status(
                401,
                "Incorrect API key provided: sk-secret-key",
            ))
        }
    }

    #[tokio::test]
    async fn the_key_never_reaches_the_cassette() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("calls.jsonl");
        let meta = RecordingMeta {
            provider: "kimi".into(),
            model: "k2".into(),
            parameters: Value::Null,
            paths: RunPaths::default(),
            secrets: vec!["sk-secret-key".into()],
        };
        let writer = Arc::new(CassetteWriter::open(&file).unwrap());
        let recorder = RecordingProvider::new(Arc::new(Refusing), writer, meta);
        let error = call(&recorder, "sys", &[Message::user_text("hi")])
            .await
            .unwrap_err();
        assert_eq!(error.status_code(), Some(401));
        let line: CallRecord = serde_json::from_str(std::fs::read_to_string(&file).unwrap().trim()).unwrap();
        assert_eq!(
            line.error.map(|e| e.message),
            Some("Incorrect API key provided: [redacted]".to_owned())
        );
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(
            std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
            0o600
        );
    }

    #[test]
    fn a_broken_line_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("bad.jsonl");
        std::fs::write(&file, "\n{\"not\": \"a record\"}\n").unwrap();
        let error = CassetteProvider::open(&file, "m", true, &RunPaths::default()).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("bad.jsonl line 2 is not a cassette record"),
            "{error}"
        );
    }
}
