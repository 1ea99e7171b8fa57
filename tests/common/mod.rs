//! Black-box test support: a temp home with a scripted-echo config, and [`WireProcess`], which spawns the
//! real binary and speaks JSON-RPC to it with a timeout on every read.

#![allow(dead_code)]

mod build;
pub mod mock_model;

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

/// How long any single wait may take before the test fails.
pub const READ_TIMEOUT: Duration = Duration::from_secs(15);

/// A temporary HOME with a share dir, a work dir and (optionally) a scripted config.
pub struct TestHome {
    pub root: tempfile::TempDir,
    pub config: Option<PathBuf>,
    pub extra_args: Vec<String>,
}

impl TestHome {
    pub fn new() -> Result<Self> {
        let root = tempfile::tempdir()?;
        std::fs::create_dir_all(root.path().join("home/.kimi"))?;
        std::fs::create_dir_all(root.path().join("work"))?;
        Ok(Self {
            root,
            config: None,
            extra_args: Vec::new(),
        })
    }

    pub fn home(&self) -> PathBuf {
        self.root.path().join("home")
    }

    pub fn share(&self) -> PathBuf {
        self.root.path().join("home/.kimi")
    }

    pub fn work(&self) -> PathBuf {
        self.root.path().join("work")
    }

    /// Writes `scripts` and a config using the `_scripted_echo` provider (as the reference's harness does).
    pub fn scripted(mut self, scripts: &[&str]) -> Result<Self> {
        let config = self.scripted_config(scripts, json!({}))?;
        self.config = Some(config);
        Ok(self)
    }

    /// Like [`TestHome::scripted`], with extra keys merged into the model config and a `loop_control`.
    pub fn scripted_config(&self, scripts: &[&str], model_extra: Value) -> Result<PathBuf> {
        let scripts_path = self.root.path().join("scripts.json");
        std::fs::write(&scripts_path, serde_json::to_string(scripts)?)?;
        let mut model =
            json!({"provider": "scripted_provider", "model": "scripted_echo", "max_context_size": 100000});
        if let (Some(model), Some(extra)) = (model.as_object_mut(), model_extra.as_object()) {
            for (k, v) in extra {
                model.insert(k.clone(), v.clone());
            }
        }
        let config = json!({
            "default_model": "scripted",
            "models": {"scripted": model},
            "providers": {"scripted_provider": {
                "type": "_scripted_echo", "base_url": "", "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts_path.to_string_lossy()}
            }}
        });
        let path = self.root.path().join("config.json");
        std::fs::write(&path, serde_json::to_string(&config)?)?;
        Ok(path)
    }

    /// Like [`TestHome::scripted`], with extra keys merged into the model config (e.g. `capabilities`).
    pub fn scripted_with(mut self, scripts: &[&str], model_extra: Value) -> Result<Self> {
        let config = self.scripted_config(scripts, model_extra)?;
        self.config = Some(config);
        Ok(self)
    }

    /// Uses `config` as the whole configuration, written to `config.json`.
    pub fn with_config(mut self, config: &Value) -> Result<Self> {
        let path = self.root.path().join("config.json");
        std::fs::write(&path, serde_json::to_string(config)?)?;
        self.config = Some(path);
        Ok(self)
    }

    /// Writes a JSON scripts file named `name` and returns its path.
    pub fn write_scripts(&self, name: &str, scripts: &[&str]) -> Result<PathBuf> {
        let path = self.root.path().join(name);
        std::fs::write(&path, serde_json::to_string(scripts)?)?;
        Ok(path)
    }

    /// `<share>/sessions/<md5(work dir)>`, computed independently of the binary.
    pub fn sessions_of_work_dir(&self) -> PathBuf {
        let work = self.work();
        self.share()
            .join("sessions")
            .join(md5_hex(work.to_string_lossy().as_bytes()))
    }

    pub fn arg(mut self, arg: &str) -> Self {
        self.extra_args.push(arg.to_owned());
        self
    }

    /// The arguments the binary is started with.
    pub fn args(&self) -> Vec<String> {
        let mut args = vec!["--wire".to_owned()];
        if let Some(config) = &self.config {
            args.push("--config-file".into());
            args.push(config.to_string_lossy().into_owned());
        }
        args.extend(self.extra_args.iter().cloned());
        args.push("--work-dir".into());
        args.push(self.work().to_string_lossy().into_owned());
        args
    }

    /// A command for the binary with this home's environment; stderr goes to the test's stderr.
    pub fn command(&self, args: &[String]) -> Command {
        self.command_for(binary(), args)
    }

    /// Like [`TestHome::command`], for the binary under another path or name (`kimi`).
    pub fn command_for(&self, program: &Path, args: &[String]) -> Command {
        let mut command = Command::new(program);
        command
            .args(args)
            .env("HOME", self.home())
            .env("KIMI_SHARE_DIR", self.share())
            .current_dir(self.work())
            .stderr(Stdio::inherit());
        command
    }

    /// Runs the binary to completion with stdin closed, capturing stdout and stderr.
    pub async fn run_cli(&self, args: &[&str]) -> Result<Output> {
        let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        let child = self
            .command(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("spawning kimi-agent")?;
        let output = tokio::time::timeout(READ_TIMEOUT, child.wait_with_output())
            .await
            .map_err(|_| anyhow!("kimi-agent {args:?} did not exit"))??;
        eprint_child_stderr(&output.stderr);
        Ok(output)
    }

    /// Every session directory created under the share dir.
    pub fn session_dirs(&self) -> Vec<PathBuf> {
        let mut dirs = Vec::new();
        let Ok(hashes) = std::fs::read_dir(self.share().join("sessions")) else {
            return dirs;
        };
        for hash in hashes.flatten() {
            if let Ok(sessions) = std::fs::read_dir(hash.path()) {
                dirs.extend(sessions.flatten().map(|s| s.path()));
            }
        }
        dirs.sort();
        dirs
    }
}

/// The path of the binary under test.
pub fn binary() -> &'static Path {
    build::agent_binary()
}

/// A running `kimi-agent --wire` and its pipes.
pub struct WireProcess {
    pub child: Child,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Messages read while waiting for something else, in arrival order.
    buffered: VecDeque<Value>,
    next_id: u64,
}

impl WireProcess {
    pub async fn spawn(home: &TestHome) -> Result<Self> {
        Self::spawn_with(home, home.args()).await
    }

    pub async fn spawn_with(home: &TestHome, args: Vec<String>) -> Result<Self> {
        Self::spawn_with_env(home, args, &[]).await
    }

    /// Spawns with extra environment variables for the child only.
    pub async fn spawn_with_env(home: &TestHome, args: Vec<String>, env: &[(&str, &str)]) -> Result<Self> {
        let mut command = home.command(&args);
        command.envs(env.iter().copied());
        Self::spawn_command(command)
    }

    /// Spawns the binary as `program` (a link to it under another name).
    pub async fn spawn_with_program(home: &TestHome, program: &Path, args: Vec<String>) -> Result<Self> {
        Self::spawn_command(home.command_for(program, &args))
    }

    fn spawn_command(mut command: Command) -> Result<Self> {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .context("spawning kimi-agent")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?).lines();
        Ok(Self {
            child,
            stdin: Some(stdin),
            stdout,
            buffered: VecDeque::new(),
            next_id: 0,
        })
    }

    /// Writes one raw line.
    pub async fn send_raw(&mut self, line: &str) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(line.as_bytes()).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    /// Writes raw bytes (not necessarily UTF-8) followed by a newline.
    pub async fn send_bytes(&mut self, bytes: &[u8]) -> Result<()> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        stdin.write_all(bytes).await?;
        stdin.write_all(b"\n").await?;
        stdin.flush().await?;
        Ok(())
    }

    pub async fn send(&mut self, message: &Value) -> Result<()> {
        self.send_raw(&message.to_string()).await
    }

    /// Sends a request and returns its id.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<String> {
        self.next_id += 1;
        let id = format!("{method}-{}", self.next_id);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// Answers a server request.
    pub async fn respond(&mut self, id: &str, result: Value) -> Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }

    /// Answers a server request with a JSON-RPC error.
    pub async fn respond_error(&mut self, id: &str, code: i64, message: &str) -> Result<()> {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": null}}),
        )
        .await
    }

    /// Reads the next message and fails unless it is exactly the error `code`/`message` for `id`
    /// (`None` for the `id: null` errors of unparseable input).
    pub async fn expect_error(&mut self, id: Option<&str>, code: i64, message: &str) -> Result<()> {
        let got = self.next().await?;
        pretty_assertions::assert_eq!(got, rpc_error(id, code, message));
        Ok(())
    }

    /// Proves the server still reads and answers: `cancel` outside a turn is an INVALID_STATE error,
    /// and it must be the very next message.
    pub async fn assert_alive(&mut self) -> Result<()> {
        let id = self.request("cancel", json!({})).await?;
        self.expect_error(Some(&id), -32000, "No agent turn is in progress")
            .await
    }

    /// Like [`WireProcess::expect_error`], for a client that asked for errors as data: `data` must be
    /// exactly `data` (its `kind` and fields).
    pub async fn expect_error_data(
        &mut self,
        id: Option<&str>,
        code: i64,
        message: &str,
        data: Value,
    ) -> Result<()> {
        let got = self.next().await?;
        pretty_assertions::assert_eq!(got, rpc_error_data(id, code, message, data));
        Ok(())
    }

    /// [`WireProcess::assert_alive`] for a client that asked for errors as data.
    pub async fn assert_alive_with_data(&mut self) -> Result<()> {
        let id = self.request("cancel", json!({})).await?;
        self.expect_error_data(
            Some(&id),
            -32000,
            "No agent turn is in progress",
            json!({"kind": "no_turn"}),
        )
        .await
    }

    /// Sends `prompt` and returns its id without waiting.
    pub async fn start_prompt(&mut self, input: Value) -> Result<String> {
        self.request("prompt", json!({"user_input": input})).await
    }

    /// Closes stdin (EOF for the server).
    pub fn close_stdin(&mut self) {
        self.stdin.take();
    }

    /// Reads the next message from stdout (not from the buffer).
    async fn read_raw(&mut self) -> Result<Value> {
        let line = tokio::time::timeout(READ_TIMEOUT, self.stdout.next_line())
            .await
            .map_err(|_| anyhow!("timed out waiting for output"))??
            .ok_or_else(|| anyhow!("kimi-agent closed stdout"))?;
        serde_json::from_str(&line).with_context(|| format!("stdout line is not JSON: {line}"))
    }

    /// The next message, buffered ones first.
    pub async fn next(&mut self) -> Result<Value> {
        if let Some(message) = self.buffered.pop_front() {
            return Ok(message);
        }
        self.read_raw().await
    }

    /// Reads until `pred` matches; everything else read on the way is returned too, in order.
    pub async fn read_until(&mut self, pred: impl Fn(&Value) -> bool) -> Result<(Value, Vec<Value>)> {
        let mut skipped = Vec::new();
        loop {
            let message = self.next().await?;
            if pred(&message) {
                return Ok((message, skipped));
            }
            skipped.push(message);
        }
    }

    /// Reads until the response to `id`; returns it and the events/requests before it.
    pub async fn read_response(&mut self, id: &str) -> Result<(Value, Vec<Value>)> {
        self.read_until(|m| m.get("id").and_then(Value::as_str) == Some(id) && m.get("method").is_none())
            .await
    }

    /// Reads until an event of `kind`, keeping the others buffered for later reads.
    pub async fn wait_event(&mut self, kind: &str) -> Result<Value> {
        self.wait_message("event", kind).await
    }

    /// Reads until a server request of `kind`; returns the whole JSON-RPC message.
    pub async fn wait_request(&mut self, kind: &str) -> Result<Value> {
        self.wait_message("request", kind).await
    }

    /// Like [`WireProcess::wait_request`], but leaves the request and everything before it buffered, so a
    /// later [`WireProcess::read_response`] returns the whole conversation in order.
    pub async fn peek_request(&mut self, kind: &str) -> Result<Value> {
        let (found, skipped) = self.read_until(|m| is_message(m, "request", kind)).await?;
        for message in std::iter::once(found.clone()).chain(skipped.into_iter().rev()) {
            self.buffered.push_front(message);
        }
        Ok(found)
    }

    /// Reads until `pred` matches and leaves that message and everything before it buffered, so a later
    /// read returns the whole conversation in order.
    pub async fn peek_until(&mut self, pred: impl Fn(&Value) -> bool) -> Result<Value> {
        let (found, skipped) = self.read_until(pred).await?;
        for message in std::iter::once(found.clone()).chain(skipped.into_iter().rev()) {
            self.buffered.push_front(message);
        }
        Ok(found)
    }

    /// Reads until the response to `id` (e.g. of a `steer` or `cancel` sent during a turn) and returns it,
    /// leaving the events and requests read on the way buffered for the turn's own reads.
    pub async fn response_to(&mut self, id: &str) -> Result<Value> {
        self.find(|m| m.get("id").and_then(Value::as_str) == Some(id) && m.get("method").is_none())
            .await
    }

    async fn wait_message(&mut self, method: &str, kind: &str) -> Result<Value> {
        self.find(|m| is_message(m, method, kind)).await
    }

    /// Reads until `pred` matches and returns that message; what was skipped goes back to the front of
    /// the buffer in order.
    async fn find(&mut self, pred: impl Fn(&Value) -> bool) -> Result<Value> {
        let (found, skipped) = self.read_until(pred).await?;
        for message in skipped.into_iter().rev() {
            self.buffered.push_front(message);
        }
        Ok(found)
    }

    /// Sends `initialize` and returns its result.
    pub async fn initialize(&mut self, params: Value) -> Result<Value> {
        let id = self.request("initialize", params).await?;
        let (response, _) = self.read_response(&id).await?;
        response
            .get("result")
            .cloned()
            .ok_or_else(|| anyhow!("initialize failed: {response}"))
    }

    /// Sends `prompt` and waits for its response, answering nothing.
    pub async fn prompt(&mut self, input: Value) -> Result<(Value, Vec<Value>)> {
        let id = self.request("prompt", json!({"user_input": input})).await?;
        self.read_response(&id).await
    }

    /// Waits for the process to exit after EOF.
    pub async fn wait_exit(&mut self) -> Result<std::process::ExitStatus> {
        self.close_stdin();
        Ok(tokio::time::timeout(READ_TIMEOUT, self.child.wait())
            .await
            .map_err(|_| anyhow!("no exit"))??)
    }
}

/// Forwards a captured child stderr to the test's stderr, so failures show it.
#[expect(clippy::print_stderr, reason = "tests forward the child's stderr")]
fn eprint_child_stderr(stderr: &[u8]) {
    if !stderr.is_empty() {
        eprintln!("[kimi-agent stderr] {}", String::from_utf8_lossy(stderr));
    }
}

/// A whole JSON-RPC error message as the server writes it.
pub fn rpc_error(id: Option<&str>, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": null}})
}

/// A whole JSON-RPC error message as a client that asked for errors as data
/// (`capabilities.error_data`) is sent it: `data` holds the error's `kind` and its fields.
pub fn rpc_error_data(id: Option<&str>, code: i64, message: &str, data: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": data}})
}

/// `initialize` params of a client that asks for errors as data.
pub fn init_with_error_data() -> Value {
    json!({"protocol_version": "1.10", "capabilities": {"error_data": true}})
}

/// A whole JSON-RPC success message as the server writes it.
pub fn rpc_result(id: &str, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// A `tool_call:` DSL line; `arguments` is the raw argument string (or `None` for streamed arguments).
pub fn tool_call_line(id: &str, name: &str, arguments: Option<&str>) -> String {
    format!(
        "tool_call: {}",
        json!({"id": id, "name": name, "arguments": arguments})
    )
}

/// A `tool_call:` DSL line calling the built-in Shell tool with `command`.
pub fn shell_call_line(id: &str, command: &str) -> String {
    tool_call_line(id, "Shell", Some(&json!({"command": command}).to_string()))
}

/// The answer approving (or `response`-ing) an ApprovalRequest message.
pub fn approval_answer(request: &Value, response: &str) -> Value {
    json!({
        "jsonrpc": "2.0",
        "id": request["id"],
        "result": {"request_id": request["params"]["payload"]["id"], "response": response},
    })
}

/// An external tool definition for `initialize`, taking `{path: string}`.
pub fn external_tool(name: &str) -> Value {
    json!({
        "name": name,
        "description": "External tool",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    })
}

/// `initialize` params registering `tools`.
pub fn init_with_tools(tools: &[Value]) -> Value {
    json!({"protocol_version": "1.10", "external_tools": tools})
}

/// The StatusUpdate of a step without usage (as the scripted provider sends by default).
pub fn status_without_usage() -> Value {
    json!({
        "context_usage": null, "context_tokens": null, "max_context_tokens": null, "token_usage": null,
        "message_id": null, "plan_mode": false, "mcp_status": null,
    })
}

/// `{method, type, payload}` of every event and request, with each step's messages put in one order
/// (stream, StatusUpdate, requests, ApprovalResponse, ToolResult by call order, the rest). Reference:
/// tools start while the model still streams, so a request may legally precede the step's StatusUpdate.
pub fn summarize(messages: &[Value]) -> Vec<Value> {
    let summary: Vec<Value> = messages
        .iter()
        .filter(|m| matches!(m["method"].as_str(), Some("event" | "request")))
        .map(|m| json!({"method": m["method"], "type": m["params"]["type"], "payload": m["params"]["payload"]}))
        .collect();
    let mut out = Vec::with_capacity(summary.len());
    let mut i = 0;
    while i < summary.len() {
        if summary[i]["type"] != "StepBegin" {
            out.push(summary[i].clone());
            i += 1;
            continue;
        }
        let end = (i + 1..summary.len())
            .find(|&j| {
                matches!(
                    summary[j]["type"].as_str(),
                    Some("StepBegin" | "TurnBegin" | "CompactionBegin")
                )
            })
            .unwrap_or(summary.len());
        out.extend(order_step(&summary[i..end]));
        i = end;
    }
    out
}

fn order_step(block: &[Value]) -> Vec<Value> {
    let rank = |m: &Value| match (m["method"].as_str(), m["type"].as_str()) {
        (_, Some("StepBegin")) => 0,
        (_, Some("ContentPart" | "ToolCall" | "ToolCallPart")) => 1,
        (_, Some("StatusUpdate")) => 2,
        (Some("request"), _) => 3,
        (_, Some("ApprovalResponse")) => 4,
        (_, Some("ToolResult")) => 5,
        _ => 6,
    };
    let call_order: Vec<&Value> = block
        .iter()
        .filter(|m| m["type"] == "ToolCall")
        .map(|m| &m["payload"]["id"])
        .collect();
    let call_index = |m: &Value| {
        if m["type"] == "ToolResult" {
            call_order
                .iter()
                .position(|id| **id == m["payload"]["tool_call_id"])
                .unwrap_or(usize::MAX)
        } else {
            0
        }
    };
    let mut ordered = block.to_vec();
    // Stable: within one rank the arrival order is kept.
    ordered.sort_by_key(|m| (rank(m), call_index(m)));
    ordered
}

/// Whether `message` is a `method` (`event` / `request`) message of `kind`.
fn is_message(message: &Value, method: &str, kind: &str) -> bool {
    message.get("method").and_then(Value::as_str) == Some(method)
        && message["params"]["type"].as_str() == Some(kind)
}

/// `(method, type)` of every message, for order assertions.
pub fn kinds(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| {
            let method = m.get("method")?.as_str()?;
            Some(format!(
                "{method}:{}",
                m["params"]["type"].as_str().unwrap_or("?")
            ))
        })
        .collect()
}

/// `method:type` of every message after [`summarize`]'s per-step ordering: for order assertions on steps
/// whose tool requests may legally arrive before the step's StatusUpdate.
pub fn summary_kinds(messages: &[Value]) -> Vec<String> {
    summarize(messages)
        .iter()
        .map(|m| {
            format!(
                "{}:{}",
                m["method"].as_str().unwrap_or("?"),
                m["type"].as_str().unwrap_or("?")
            )
        })
        .collect()
}

/// The payloads of events of `kind`.
pub fn payloads<'a>(messages: &'a [Value], kind: &str) -> Vec<&'a Value> {
    messages
        .iter()
        .filter(|m| m["params"]["type"] == kind)
        .map(|m| &m["params"]["payload"])
        .collect()
}

/// The number of lines of a text file (0 when it is missing).
pub fn count_lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|s| s.lines().count())
        .unwrap_or(0)
}

/// The `role` of every line of a context.jsonl.
pub fn context_roles(path: &Path) -> Result<Vec<String>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l)?;
            v["role"]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| anyhow!("no role in {l}"))
        })
        .collect()
}

/// The names of the entries of `dir`, sorted.
pub fn dir_names(dir: &Path) -> Result<Vec<String>> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .map(|e| Ok(e?.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_>>()?;
    names.sort();
    Ok(names)
}

/// MD5 (RFC 1321) as lowercase hex: the reference names a work dir's session folder by it. Written out
/// here so the tests do not share the implementation's hashing.
pub fn md5_hex(input: &[u8]) -> String {
    const S: [u32; 64] = [
        7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 7, 12, 17, 22, 5, 9, 14, 20, 5, 9, 14, 20, 5, 9, 14, 20,
        5, 9, 14, 20, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 4, 11, 16, 23, 6, 10, 15, 21, 6, 10, 15,
        21, 6, 10, 15, 21, 6, 10, 15, 21,
    ];
    let k: Vec<u32> = (0..64u32)
        .map(|i| ((f64::from(i) + 1.0).sin().abs() * 4_294_967_296.0) as u32)
        .collect();
    let mut message = input.to_vec();
    let bit_len = (input.len() as u64).wrapping_mul(8);
    message.push(0x80);
    while message.len() % 64 != 56 {
        message.push(0);
    }
    message.extend_from_slice(&bit_len.to_le_bytes());
    let mut state: [u32; 4] = [0x6745_2301, 0xefcd_ab89, 0x98ba_dcfe, 0x1032_5476];
    for chunk in message.chunks(64) {
        let m: Vec<u32> = chunk
            .chunks(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        let [mut a, mut b, mut c, mut d] = state;
        for i in 0..64 {
            let (f, g) = match i / 16 {
                0 => ((b & c) | (!b & d), i),
                1 => ((d & b) | (!d & c), (5 * i + 1) % 16),
                2 => (b ^ c ^ d, (3 * i + 5) % 16),
                _ => (c ^ (b | !d), (7 * i) % 16),
            };
            let rotated = a
                .wrapping_add(f)
                .wrapping_add(k[i])
                .wrapping_add(m[g])
                .rotate_left(S[i]);
            (a, d, c, b) = (d, c, b, b.wrapping_add(rotated));
        }
        for (s, v) in state.iter_mut().zip([a, b, c, d]) {
            *s = s.wrapping_add(v);
        }
    }
    state
        .iter()
        .flat_map(|s| s.to_le_bytes())
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// SplitMix64: small, seedable, good enough to spread kill points.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The resident memory of process `pid` in KiB (`VmRSS` in `/proc/<pid>/status`); `None` once it is gone.
pub fn vm_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Samples a process's resident memory every few milliseconds in the background and keeps the peak, so a
/// test can bound memory over a whole run rather than at its end.
pub struct RssSampler {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<u64>,
}

impl RssSampler {
    /// Starts sampling `pid`.
    pub fn start(pid: u32) -> Self {
        let stop = tokio_util::sync::CancellationToken::new();
        let token = stop.clone();
        let task = tokio::spawn(async move {
            let mut peak = 0;
            let mut tick = tokio::time::interval(Duration::from_millis(20));
            loop {
                tokio::select! {
                    () = token.cancelled() => break,
                    _ = tick.tick() => {}
                }
                match vm_rss_kib(pid) {
                    Some(kib) => peak = peak.max(kib),
                    None => break,
                }
            }
            peak
        });
        Self { stop, task }
    }

    /// Stops sampling and returns the peak in KiB.
    pub async fn peak_kib(self) -> Result<u64> {
        self.stop.cancel();
        Ok(self.task.await?)
    }
}

/// Fails unless `path` exists.
pub fn assert_exists(path: &Path) -> Result<()> {
    if !path.exists() {
        bail!("{} does not exist", path.display());
    }
    Ok(())
}

/// Whether `pid` is a live process (a zombie counts as gone).
pub fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// How often a test looks again at something that changes outside the protocol (a pid file, a process).
pub const POLL: Duration = Duration::from_millis(20);

/// The pid written (with a newline) into `file`, once it is there.
pub async fn wait_for_pid(file: &Path) -> Result<u32> {
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    loop {
        if let Ok(text) = std::fs::read_to_string(file)
            && text.ends_with('\n')
        {
            return text.trim().parse().context("pid file");
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "the command never wrote its pid"
        );
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until `pid` is gone (a process outside the protocol has no event to wait on).
pub async fn wait_until_gone(pid: u32, what: &str) -> Result<()> {
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    while is_alive(pid) {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "{what} ({pid}) is still running"
        );
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}
