//! Sessions move between implementations (issue 4): a session written by the reference (the Python
//! Kimi Code CLI, run with `shared/tools/kimi-reference`) resumes in ours with its context intact, and
//! one written by ours resumes in the reference.
//!
//! For each direction the writer records two scripted turns; the session directory is then copied, and
//! the other implementation opens the original and the copy with `--session`:
//! - the original: `replay` sends the writer's recorded events, and a new turn appends to the same
//!   context.jsonl, every earlier line kept byte for byte;
//! - the copy: `/compact` right away, which keeps the last two messages of the *in-memory* history in
//!   the new context.jsonl: finding the writer's last question and answer there proves the reader
//!   loaded the writer's messages, not just left the file alone.
//!
//! The tests skip (saying so on stderr) when the reference cannot be run: set `KIMI_REFERENCE_BIN` to
//! its launcher, or keep the repository beside `shared/tools/kimi-reference`.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context, Result, anyhow, ensure};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::common::{TestHome, binary};

/// The reference needs seconds to start and to answer; ours needs milliseconds.
const PEER_TIMEOUT: Duration = Duration::from_secs(120);

/// How to run the reference.
#[derive(Debug)]
struct Reference {
    launcher: PathBuf,
    /// The launcher keeps its virtualenv under `KIMI_REFERENCE_HOME` (default `~/.cache/...` of the real
    /// HOME); the tests change HOME, so they pin it.
    reference_home: PathBuf,
}

#[expect(
    clippy::print_stderr,
    reason = "tell the person running the tests why they were skipped"
)]
fn skip(why: &str) {
    eprintln!("SKIPPED session_compat: {why}");
}

async fn reference() -> Option<Reference> {
    let launcher = std::env::var_os("KIMI_REFERENCE_BIN").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/tools/kimi-reference"),
        PathBuf::from,
    );
    if !launcher.exists() {
        skip(&format!("no reference launcher at {}", launcher.display()));
        return None;
    }
    let reference_home = std::env::var_os("KIMI_REFERENCE_HOME").map_or_else(
        || {
            let home = std::env::var_os("HOME").unwrap_or_default();
            Path::new(&home).join(".cache/kimi-reference")
        },
        PathBuf::from,
    );
    let version = Command::new(&launcher)
        .arg("--version")
        .env("KIMI_REFERENCE_HOME", &reference_home)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(Duration::from_secs(600), version).await {
        Ok(Ok(output)) if output.status.success() => Some(Reference {
            launcher,
            reference_home,
        }),
        Ok(Ok(output)) => {
            skip(&format!(
                "`{} --version` failed ({}): {}",
                launcher.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ));
            None
        }
        Ok(Err(e)) => {
            skip(&format!("cannot run {}: {e}", launcher.display()));
            None
        }
        Err(_) => {
            skip("`kimi-reference --version` did not finish");
            None
        }
    }
}

/// Which implementation a [`Peer`] runs.
#[derive(Clone, Copy, Debug)]
enum Side<'a> {
    Ours,
    Reference(&'a Reference),
}

/// A wire server of either implementation, spoken to line by line.
struct Peer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    next_id: u64,
    name: &'static str,
}

impl Peer {
    async fn spawn(side: Side<'_>, home: &TestHome, config: &Path, session: &str) -> Result<Self> {
        let (mut command, name) = match side {
            Side::Ours => (Command::new(binary()), "kimi-agent"),
            Side::Reference(reference) => {
                let mut command = Command::new(&reference.launcher);
                command.env("KIMI_REFERENCE_HOME", &reference.reference_home);
                (command, "reference")
            }
        };
        command
            .args(["--wire", "--yolo", "--config-file"])
            .arg(config)
            .arg("--work-dir")
            .arg(home.work())
            .args(["--session", session])
            .env("HOME", home.home())
            .env("USERPROFILE", home.home())
            .env("KIMI_SHARE_DIR", home.share())
            .current_dir(home.work())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        let mut child = command.spawn().with_context(|| format!("spawning {name}"))?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?).lines();
        let mut peer = Self {
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 0,
            name,
        };
        let (response, _) = peer
            .request("initialize", json!({"protocol_version": "1.10"}))
            .await?;
        ensure!(
            response.get("result").is_some(),
            "{name}: initialize failed: {response}"
        );
        Ok(peer)
    }

    /// Sends a request; returns its response and the messages streamed before it.
    async fn request(&mut self, method: &str, params: Value) -> Result<(Value, Vec<Value>)> {
        self.next_id += 1;
        let id = format!("{method}-{}", self.next_id);
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string();
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        let mut before = Vec::new();
        loop {
            let line = tokio::time::timeout(PEER_TIMEOUT, self.stdout.next_line())
                .await
                .map_err(|_| anyhow!("{}: no answer to {method}", self.name))??
                .ok_or_else(|| anyhow!("{}: stdout closed during {method}", self.name))?;
            let Ok(message) = serde_json::from_str::<Value>(&line) else {
                continue; // The reference may print a banner or log line.
            };
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return Ok((message, before));
            }
            before.push(message);
        }
    }

    async fn prompt(&mut self, input: &str) -> Result<()> {
        let (response, _) = self.request("prompt", json!({"user_input": input})).await?;
        ensure!(
            response["result"]["status"] == "finished",
            "{}: prompt {input:?} answered {response}",
            self.name
        );
        Ok(())
    }

    async fn close(mut self) -> Result<()> {
        self.stdin.take();
        let status = tokio::time::timeout(PEER_TIMEOUT, self.child.wait())
            .await
            .map_err(|_| anyhow!("{} did not exit", self.name))??;
        ensure!(status.success(), "{} exited with {status}", self.name);
        Ok(())
    }
}

/// The lines of a session file.
fn lines(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(text.lines().map(str::to_owned).collect())
}

/// `{type, payload}` of every record of a wire.jsonl.
fn recorded_messages(path: &Path) -> Result<Vec<Value>> {
    lines(path)?
        .iter()
        .map(|line| serde_json::from_str::<Value>(line).with_context(|| line.clone()))
        .filter_map(|value| match value {
            Ok(value) => value.get("message").cloned().map(Ok),
            Err(e) => Some(Err(e)),
        })
        .collect()
}

/// `(role, text)` of every user/assistant message of a context.jsonl, text parts joined.
fn conversation(path: &Path) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for line in lines(path)? {
        let value: Value = serde_json::from_str(&line).with_context(|| line.clone())?;
        let role = value["role"].as_str().unwrap_or_default();
        if role != "user" && role != "assistant" {
            continue;
        }
        let text = match &value["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter(|p| p["type"] == "text")
                .filter_map(|p| p["text"].as_str())
                .collect(),
            _ => String::new(),
        };
        out.push((role.to_owned(), text));
    }
    Ok(out)
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

fn pair(role: &str, text: &str) -> (String, String) {
    (role.to_owned(), text.to_owned())
}

/// Writes a two-turn session with `writer`, then checks `reader` resumes it (and a copy) correctly.
/// `exact_replay`: whether the reader must replay the writer's records byte-equal (ours forwards
/// records as written; the reference re-serializes them through its own models).
async fn hand_over(writer: Side<'_>, reader: Side<'_>, exact_replay: bool) -> Result<()> {
    let home = TestHome::new()?;
    let session = "handed-over";
    let copy = "handed-over-copy";
    let dir = home.sessions_of_work_dir().join(session);
    let copy_dir_path = home.sessions_of_work_dir().join(copy);

    let config = home.scripted_config(&["text: first answer", "text: second answer"], json!({}))?;
    let mut peer = Peer::spawn(writer, &home, &config, session).await?;
    peer.prompt("first question").await?;
    peer.prompt("second question").await?;
    peer.close().await?;
    let written_wire = recorded_messages(&dir.join("wire.jsonl"))?;
    let written_context = lines(&dir.join("context.jsonl"))?;
    ensure!(
        conversation(&dir.join("context.jsonl"))?
            == [
                pair("user", "first question"),
                pair("assistant", "first answer"),
                pair("user", "second question"),
                pair("assistant", "second answer"),
            ],
        "the writer's context: {written_context:#?}"
    );
    copy_dir(&dir, &copy_dir_path)?;

    // The original: replay, then one more turn appended to the same context.jsonl.
    let config = home.scripted_config(&["text: third answer"], json!({}))?;
    let mut peer = Peer::spawn(reader, &home, &config, session).await?;
    let (response, replayed) = peer.request("replay", json!({})).await?;
    ensure!(
        response["result"] == json!({"status": "finished", "events": written_wire.len(), "requests": 0}),
        "replay answered {response} for {} records",
        written_wire.len()
    );
    let replayed: Vec<Value> = replayed.iter().map(|m| m["params"].clone()).collect();
    if exact_replay {
        pretty_assertions::assert_eq!(replayed, written_wire);
    } else {
        let kinds = |messages: &[Value]| messages.iter().map(|m| m["type"].clone()).collect::<Vec<_>>();
        pretty_assertions::assert_eq!(kinds(&replayed), kinds(&written_wire));
        let texts = |messages: &[Value]| {
            messages
                .iter()
                .filter(|m| m["type"] == "ContentPart" || m["type"] == "TurnBegin")
                .map(|m| m["payload"].clone())
                .collect::<Vec<_>>()
        };
        pretty_assertions::assert_eq!(texts(&replayed), texts(&written_wire));
    }
    peer.prompt("third question").await?;
    peer.close().await?;
    let context = lines(&dir.join("context.jsonl"))?;
    ensure!(
        context.starts_with(&written_context),
        "the writer's context lines were not kept as they were:\n{context:#?}"
    );
    pretty_assertions::assert_eq!(
        conversation(&dir.join("context.jsonl"))?,
        [
            pair("user", "first question"),
            pair("assistant", "first answer"),
            pair("user", "second question"),
            pair("assistant", "second answer"),
            pair("user", "third question"),
            pair("assistant", "third answer"),
        ]
    );
    ensure!(
        recorded_messages(&dir.join("wire.jsonl"))?.starts_with(&written_wire),
        "the writer's wire.jsonl records were not kept"
    );

    // The copy: `/compact` first thing keeps the last two messages of the loaded history.
    let config = home.scripted_config(&["text: the summary"], json!({}))?;
    let mut peer = Peer::spawn(reader, &home, &config, copy).await?;
    peer.prompt("/compact").await?;
    peer.close().await?;
    ensure!(
        lines(&copy_dir_path.join("context_1.jsonl"))? == written_context,
        "the compacted-away context was not rotated intact to context_1.jsonl"
    );
    let compacted = conversation(&copy_dir_path.join("context.jsonl"))?;
    ensure!(
        compacted.ends_with(&[
            pair("user", "second question"),
            pair("assistant", "second answer")
        ]),
        "the reader's history did not hold the writer's messages: {compacted:#?}"
    );
    ensure!(
        compacted.iter().any(|(_, text)| text.contains("the summary")),
        "no summary in {compacted:#?}"
    );
    Ok(())
}

#[tokio::test]
async fn a_session_written_by_the_reference_resumes_in_ours() -> Result<()> {
    let Some(reference) = reference().await else {
        return Ok(());
    };
    hand_over(Side::Reference(&reference), Side::Ours, true).await
}

#[tokio::test]
async fn a_session_written_by_ours_resumes_in_the_reference() -> Result<()> {
    let Some(reference) = reference().await else {
        return Ok(());
    };
    hand_over(Side::Ours, Side::Reference(&reference), false).await
}
