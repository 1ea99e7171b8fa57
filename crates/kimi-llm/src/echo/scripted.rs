//! `_scripted_echo`: a queue of scripts, one consumed per model call.
//!
//! When things fail, as the reference does it: the script file is read when
//! the provider is created (the reference's `create_llm`, during startup), so
//! a missing variable, a missing file or bad JSON stops the program before
//! the wire server answers anything (the reference prints the message and
//! exits with status 1); those are `ValueError`s there, `ChatError::Provider`
//! here only for want of a better type. Everything else fails one
//! `generate()` call: exhaustion, a DSL error, a script without parts. Those
//! are provider errors, which a `prompt` reports as -32003 unless the error
//! is retryable (an `error:` line with a retryable status, `connection` or
//! `timeout`), in which case the loop retries and each retry pops the next
//! script.

use std::collections::{BTreeMap, VecDeque};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;

use crate::py::{dumps_compact, py_repr, strip};
use crate::{ChatError, ChatProvider, ChatRequest, ChatStream};

use super::{into_stream, parse_script};

/// Names the script file.
const SCRIPTS_VAR: &str = "KIMI_SCRIPTED_ECHO_SCRIPTS";
/// Turns on per-call tracing of the popped script.
const TRACE_VAR: &str = "KIMI_SCRIPTED_ECHO_TRACE";

#[derive(Debug, Default)]
struct Queue {
    scripts: VecDeque<String>,
    /// Scripts popped so far.
    popped: u64,
}

/// The `_scripted_echo` provider.
///
/// Every `generate()` call pops the next script, even when that script then
/// fails to parse or simulates an error, so retries, compaction and subagent
/// calls each consume one. Clones share the queue (the reference's
/// subagents share one provider instance); [`Self::detached_copy`] gives the
/// independent copy the reference's `with_thinking` makes.
///
/// Once the queue is empty every call fails with
/// `ScriptedEchoChatProvider exhausted at turn {n}.`, where `n` is one more
/// than the number of scripts popped so far: with three scripts, the fourth
/// call and every later one report turn 4.
#[derive(Debug, Clone)]
pub struct ScriptedEchoProvider {
    queue: Arc<Mutex<Queue>>,
    trace: bool,
}

impl ScriptedEchoProvider {
    /// A provider over the given scripts, without tracing.
    pub fn from_scripts(scripts: Vec<String>) -> Self {
        Self {
            queue: Arc::new(Mutex::new(Queue {
                scripts: scripts.into(),
                popped: 0,
            })),
            trace: false,
        }
    }

    /// Loads the scripts the way the reference's `create_llm` does.
    ///
    /// `env` is the provider's `env` table from the config; each variable is
    /// looked up there first and then in the process environment (the
    /// reference copies the table into `os.environ`; we never modify the
    /// process environment). Reads `KIMI_SCRIPTED_ECHO_SCRIPTS` (the file,
    /// `~` expanded with `HOME`) and `KIMI_SCRIPTED_ECHO_TRACE` (`1`, `true`,
    /// `yes` or `on`, any case, turns tracing on).
    ///
    /// The file is a JSON array of strings; anything that is not JSON is split
    /// on lines holding only `---`. Errors carry the reference's messages:
    /// `KIMI_SCRIPTED_ECHO_SCRIPTS is required for _scripted_echo.`,
    /// `Scripted echo file not found: {path}`,
    /// `Scripted echo JSON must be an array of strings.`, and for a file that
    /// is neither JSON nor has any non-blank chunk, `Scripted echo file must be
    /// a JSON array of strings or a text file split by '\n---\n'.`
    /// (with a literal backslash-n).
    pub fn from_env(env: &BTreeMap<String, String>) -> Result<Self, ChatError> {
        let scripts = load_scripts(env)?;
        let trace = lookup(env, TRACE_VAR).unwrap_or_default();
        let trace = matches!(strip(&trace).to_lowercase().as_str(), "1" | "true" | "yes" | "on");
        Ok(Self::from_scripts(scripts).with_trace(trace))
    }

    /// Turns tracing on or off.
    ///
    /// Deviation: the reference prints `SCRIPTED_ECHO TURN {n}: {json}` to
    /// stdout, which is our protocol stream; we log the same line at `info`
    /// level instead.
    pub fn with_trace(mut self, trace: bool) -> Self {
        self.trace = trace;
        self
    }

    /// A provider with its own copy of the remaining scripts and turn count,
    /// no longer shared with `self`.
    pub fn detached_copy(&self) -> Self {
        let queue = self.lock();
        Self {
            queue: Arc::new(Mutex::new(Queue {
                scripts: queue.scripts.clone(),
                popped: queue.popped,
            })),
            trace: self.trace,
        }
    }

    /// How many scripts are left.
    pub fn remaining(&self) -> usize {
        self.lock().scripts.len()
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A panic elsewhere cannot leave the queue half-updated.
        self.queue.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Pops the next script, or reports exhaustion.
    fn next_script(&self) -> Result<String, ChatError> {
        let mut queue = self.lock();
        let turn = queue.popped + 1;
        let Some(script) = queue.scripts.pop_front() else {
            return Err(ChatError::provider(format!(
                "ScriptedEchoChatProvider exhausted at turn {turn}."
            )));
        };
        queue.popped = turn;
        drop(queue);
        if self.trace {
            let json = dumps_compact(&Value::String(script.clone()));
            tracing::info!("SCRIPTED_ECHO TURN {turn}: {json}");
        }
        Ok(script)
    }
}

#[async_trait::async_trait]
impl ChatProvider for ScriptedEchoProvider {
    fn model_name(&self) -> &str {
        "scripted_echo"
    }

    async fn generate(&self, _request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let script = parse_script(&self.next_script()?)?;
        if !script.has_parts() {
            return Err(ChatError::provider(
                "ScriptedEchoChatProvider DSL produced no streamable parts.",
            ));
        }
        Ok(into_stream(script))
    }
}

fn lookup(env: &BTreeMap<String, String>, key: &str) -> Option<String> {
    env.get(key).cloned().or_else(|| std::env::var(key).ok())
}

fn load_scripts(env: &BTreeMap<String, String>) -> Result<Vec<String>, ChatError> {
    let raw_path = lookup(env, SCRIPTS_VAR).unwrap_or_default();
    if raw_path.is_empty() {
        return Err(ChatError::provider(
            "KIMI_SCRIPTED_ECHO_SCRIPTS is required for _scripted_echo.",
        ));
    }
    let path = normalize_path(&expand_user(&raw_path, env));
    if std::fs::metadata(&path).is_err() {
        return Err(ChatError::provider(format!(
            "Scripted echo file not found: {path}"
        )));
    }
    let bytes = std::fs::read(PathBuf::from(&path)).map_err(|err| os_error(&err, &path))?;
    let text = String::from_utf8(bytes).map_err(|err| utf8_error(err.utf8_error(), err.as_bytes()))?;
    // Python reads text files with universal newlines.
    let text = text.replace("\r\n", "\n").replace('\r', "\n");

    let data: Value = match serde_json::from_str(&text) {
        Ok(data) => data,
        // Python's JSON reader also accepts these three; none is an array.
        Err(_) if matches!(json_trim(&text), "NaN" | "Infinity" | "-Infinity") => Value::Null,
        Err(_) => {
            let scripts: Vec<String> = text
                .split("\n---\n")
                .map(strip)
                .filter(|chunk| !chunk.is_empty())
                .map(str::to_owned)
                .collect();
            if scripts.is_empty() {
                return Err(ChatError::provider(
                    "Scripted echo file must be a JSON array of strings or a text file split \
                     by '\\n---\\n'.",
                ));
            }
            return Ok(scripts);
        }
    };
    if let Value::Array(items) = data {
        let scripts: Option<Vec<String>> = items
            .into_iter()
            .map(|item| match item {
                Value::String(s) => Some(s),
                _ => None,
            })
            .collect();
        if let Some(scripts) = scripts {
            return Ok(scripts);
        }
    }
    Err(ChatError::provider(
        "Scripted echo JSON must be an array of strings.",
    ))
}

fn json_trim(text: &str) -> &str {
    text.trim_matches([' ', '\t', '\n', '\r'])
}

/// Expands a leading `~` or `~/` with `HOME` (looked up like the other
/// variables); `~user` forms are left alone.
fn expand_user(path: &str, env: &BTreeMap<String, String>) -> String {
    let rest = match path.strip_prefix('~') {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => return path.to_owned(),
    };
    match lookup(env, "HOME") {
        Some(home) => {
            let joined = format!("{}{rest}", home.trim_end_matches('/'));
            if joined.is_empty() { "/".to_owned() } else { joined }
        }
        None => path.to_owned(),
    }
}

/// The text `str(pathlib.Path(path))` gives: repeated slashes and `.`
/// segments collapse, a trailing slash goes, and exactly two leading slashes
/// survive.
fn normalize_path(path: &str) -> String {
    let root = if path.starts_with("//") && !path.starts_with("///") {
        "//"
    } else if path.starts_with('/') {
        "/"
    } else {
        ""
    };
    let segments: Vec<&str> = path
        .split('/')
        .filter(|segment| !segment.is_empty() && *segment != ".")
        .collect();
    let normalized = format!("{root}{}", segments.join("/"));
    if normalized.is_empty() {
        ".".to_owned()
    } else {
        normalized
    }
}

/// Python's `str(OSError)`: `[Errno N] message: 'path'`.
fn os_error(err: &std::io::Error, path: &str) -> ChatError {
    let text = err.to_string();
    match err.raw_os_error() {
        Some(code) => {
            let suffix = format!(" (os error {code})");
            let reason = text.strip_suffix(&suffix).unwrap_or(&text);
            ChatError::provider(format!("[Errno {code}] {reason}: {}", py_repr(path)))
        }
        None => ChatError::provider(text),
    }
}

/// Python's `str(UnicodeDecodeError)` for the first bad byte (approximate for
/// multi-byte spans).
fn utf8_error(err: std::str::Utf8Error, bytes: &[u8]) -> ChatError {
    let position = err.valid_up_to();
    let byte = bytes.get(position).copied().unwrap_or(0);
    let reason = match err.error_len() {
        None => "unexpected end of data",
        Some(_) if (0x80..0xc2).contains(&byte) || byte >= 0xf5 => "invalid start byte",
        Some(_) => "invalid continuation byte",
    };
    ChatError::provider(format!(
        "'utf-8' codec can't decode byte 0x{byte:02x} in position {position}: {reason}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Message, StreamEvent};
    use futures::StreamExt as _;
    use kimi_wire::message::{ContentPart, TextPart};
    use pretty_assertions::assert_eq;
    use std::io::Write as _;

    async fn call(provider: &dyn ChatProvider) -> Result<Vec<StreamEvent>, ChatError> {
        let history = [Message::user_text("hi")];
        let request = ChatRequest {
            system_prompt: "",
            tools: &[],
            history: &history,
        };
        let stream = provider.generate(request).await?;
        stream.collect::<Vec<_>>().await.into_iter().collect()
    }

    fn text(s: &str) -> StreamEvent {
        StreamEvent::Part(ContentPart::Text(TextPart { text: s.into() }))
    }

    fn env_with(path: &str) -> BTreeMap<String, String> {
        BTreeMap::from([(SCRIPTS_VAR.to_owned(), path.to_owned())])
    }

    fn load_err(env: &BTreeMap<String, String>) -> String {
        ScriptedEchoProvider::from_env(env)
            .expect_err("should fail")
            .to_string()
    }

    #[tokio::test]
    async fn pops_one_script_per_call_even_when_it_fails() {
        let provider = ScriptedEchoProvider::from_scripts(vec![
            "text: one\ntext: two".into(),
            "error: 503".into(),
            "id: x".into(),
            "text: last".into(),
        ]);
        assert_eq!(provider.model_name(), "scripted_echo");
        assert_eq!(call(&provider).await, Ok(vec![text("one"), text("two")]));
        assert_eq!(
            call(&provider).await,
            Err(ChatError::status(503, "Simulated 503 error"))
        );
        assert_eq!(
            call(&provider).await,
            Err(ChatError::provider(
                "ScriptedEchoChatProvider DSL produced no streamable parts."
            ))
        );
        assert_eq!(call(&provider).await, Ok(vec![text("last")]));
        let exhausted = ChatError::provider("ScriptedEchoChatProvider exhausted at turn 5.");
        assert_eq!(call(&provider).await, Err(exhausted.clone()));
        // The count does not move once exhausted.
        assert_eq!(call(&provider).await, Err(exhausted));
    }

    #[tokio::test]
    async fn clones_share_the_queue_and_detached_copies_do_not() {
        let provider =
            ScriptedEchoProvider::from_scripts(vec!["text: a".into(), "text: b".into(), "text: c".into()]);
        let shared: Arc<dyn ChatProvider> = Arc::new(provider.clone());
        let detached = provider.detached_copy();
        assert_eq!(call(&provider).await, Ok(vec![text("a")]));
        assert_eq!(call(shared.as_ref()).await, Ok(vec![text("b")]));
        assert_eq!(provider.remaining(), 1);
        assert_eq!(call(&detached).await, Ok(vec![text("a")]));
        assert_eq!(call(&provider).await, Ok(vec![text("c")]));
        assert_eq!(
            call(shared.as_ref()).await,
            Err(ChatError::provider(
                "ScriptedEchoChatProvider exhausted at turn 4."
            ))
        );
        assert_eq!(detached.remaining(), 2);
    }

    #[tokio::test]
    async fn empty_queue_is_exhausted_at_turn_one() {
        let provider = ScriptedEchoProvider::from_scripts(Vec::new());
        assert_eq!(
            call(&provider).await,
            Err(ChatError::provider(
                "ScriptedEchoChatProvider exhausted at turn 1."
            ))
        );
    }

    #[tokio::test]
    async fn loads_json_arrays_and_split_text() {
        let dir = tempfile::tempdir().unwrap();
        let json_path = dir.path().join("scripts.json");
        std::fs::write(&json_path, r#"["text: one", "text: two\ntext: three"]"#).unwrap();
        let provider = ScriptedEchoProvider::from_env(&env_with(json_path.to_str().unwrap())).unwrap();
        assert_eq!(provider.remaining(), 2);
        assert_eq!(call(&provider).await, Ok(vec![text("one")]));
        assert_eq!(call(&provider).await, Ok(vec![text("two"), text("three")]));

        let text_path = dir.path().join("scripts.txt");
        let mut file = std::fs::File::create(&text_path).unwrap();
        write!(file, "text: a\r\n---\r\n\n---\n  text: b  \n---\ntext: c\n---").unwrap();
        let provider = ScriptedEchoProvider::from_env(&env_with(text_path.to_str().unwrap())).unwrap();
        assert_eq!(provider.remaining(), 3);
        assert_eq!(call(&provider).await, Ok(vec![text("a")]));
        assert_eq!(call(&provider).await, Ok(vec![text("b")]));
        // A trailing `---` without a newline after it stays in the last script.
        assert_eq!(
            call(&provider).await,
            Err(ChatError::provider("Invalid echo DSL at line 2: '---'"))
        );
    }

    #[test]
    fn loading_errors() {
        // The variable is looked up in the table first, so an empty value
        // there hides anything in the process environment.
        assert_eq!(
            load_err(&env_with("")),
            "KIMI_SCRIPTED_ECHO_SCRIPTS is required for _scripted_echo."
        );

        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().to_str().unwrap();
        assert_eq!(
            load_err(&env_with(&format!("{base}//missing/./x.json/"))),
            format!("Scripted echo file not found: {base}/missing/x.json")
        );

        for bad in [
            r#"{"a": 1}"#,
            r#"["ok", 2]"#,
            "42",
            r#""text: hi""#,
            "NaN",
            "null",
        ] {
            let path = dir.path().join("bad.json");
            std::fs::write(&path, bad).unwrap();
            assert_eq!(
                load_err(&env_with(path.to_str().unwrap())),
                "Scripted echo JSON must be an array of strings.",
                "{bad}"
            );
        }

        let path = dir.path().join("blank.txt");
        std::fs::write(&path, "\n---\n  \n").unwrap();
        assert_eq!(
            load_err(&env_with(path.to_str().unwrap())),
            "Scripted echo file must be a JSON array of strings or a text file split by \
             '\\n---\\n'."
        );

        assert_eq!(
            load_err(&env_with(base)),
            format!("[Errno 21] Is a directory: {}", py_repr(base))
        );
    }

    #[test]
    fn expands_home_from_the_table_and_reads_trace() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s.json"), r#"["text: x"]"#).unwrap();
        let mut env = env_with("~/s.json");
        env.insert("HOME".into(), format!("{}/", dir.path().display()));
        env.insert(TRACE_VAR.into(), " YES ".into());
        let provider = ScriptedEchoProvider::from_env(&env).unwrap();
        assert!(provider.trace);
        assert_eq!(provider.remaining(), 1);

        env.insert(TRACE_VAR.into(), "2".into());
        assert!(!ScriptedEchoProvider::from_env(&env).unwrap().trace);
    }

    #[test]
    fn path_normalization() {
        for (input, expected) in [
            ("/a//b/./c/", "/a/b/c"),
            ("//a", "//a"),
            ("///a", "/a"),
            ("./x", "x"),
            ("a/../b", "a/../b"),
            (".", "."),
        ] {
            assert_eq!(normalize_path(input), expected, "{input}");
        }
    }
}
