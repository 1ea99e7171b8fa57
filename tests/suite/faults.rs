//! Backpressure and faults (issue 8, point 4), black-box:
//! - a client that stops reading while a turn streams holds the agent (and the provider) back, memory
//!   stays flat, and nothing is lost when it reads again;
//! - SIGTERM and SIGINT during a turn waiting on an approval end the turn, resolve the request, leave
//!   both session files whole and exit 0;
//! - a session file that cannot be written (a full disk, a directory in the file's place) fails the
//!   prompt with the file and the reason, and the server goes on answering;
//! - a provider that goes silent mid-stream is timed out and the step retried.
//!
//! The model for the streaming cases is a local chat-completions server speaking SSE over a raw TCP
//! socket, so the test sees exactly how far the agent has read.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::common::{RssSampler, TestHome, WireProcess, payloads, shell_call_line, vm_rss_kib};

/// What the mock model does on one connection.
#[derive(Clone)]
enum Answer {
    /// Streams these text chunks, then `[DONE]`.
    Text(Arc<Vec<String>>),
    /// Streams these text chunks, then stays silent with the connection open.
    Hang(Vec<String>),
}

/// A chat-completions server on 127.0.0.1: the n-th connection gets the n-th answer (the last one
/// repeats). `written` counts the chunks the kernel accepted, across connections.
struct MockModel {
    base_url: String,
    written: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl MockModel {
    async fn start(answers: Vec<Answer>) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}/v1", listener.local_addr()?);
        let written = Arc::new(AtomicUsize::new(0));
        let connections = Arc::new(AtomicUsize::new(0));
        let (count, conns) = (Arc::clone(&written), Arc::clone(&connections));
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let n = conns.fetch_add(1, Ordering::SeqCst);
                let answer = answers[n.min(answers.len() - 1)].clone();
                let count = Arc::clone(&count);
                tokio::spawn(async move {
                    let _ = serve(socket, answer, &count).await;
                });
            }
        });
        Ok(Self {
            base_url,
            written,
            connections,
            task,
        })
    }

    /// A config selecting this server as an `openai_legacy` provider.
    fn config(&self) -> Value {
        json!({
            "default_model": "mock",
            "models": {"mock": {"provider": "mock", "model": "mock-model", "max_context_size": 1_000_000}},
            "providers": {"mock": {"type": "openai_legacy", "base_url": self.base_url, "api_key": "k"}},
        })
    }

    fn written(&self) -> usize {
        self.written.load(Ordering::SeqCst)
    }
}

impl Drop for MockModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one HTTP request (headers and a Content-Length body) and answers with an SSE body that ends
/// when the connection closes.
async fn serve(mut socket: TcpStream, answer: Answer, written: &AtomicUsize) -> Result<()> {
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    let body_start = loop {
        let n = socket.read(&mut buf).await?;
        ensure!(n > 0, "client closed before sending a request");
        request.extend_from_slice(&buf[..n]);
        if let Some(at) = request.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
    };
    let head = String::from_utf8_lossy(&request[..body_start]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    while request.len() < body_start + length {
        let n = socket.read(&mut buf).await?;
        ensure!(n > 0, "client closed mid-request");
        request.extend_from_slice(&buf[..n]);
    }
    socket
        .write_all(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\nconnection: close\r\n\r\n",
        )
        .await?;
    let chunk = |text: &str| {
        let delta = json!({"id": "c1", "choices": [{"index": 0, "delta": {"content": text}}]});
        format!("data: {delta}\n\n")
    };
    match answer {
        Answer::Text(texts) => {
            for text in texts.iter() {
                socket.write_all(chunk(text).as_bytes()).await?;
                written.fetch_add(1, Ordering::SeqCst);
            }
            let done = json!({"id": "c1", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
            socket
                .write_all(format!("data: {done}\n\ndata: [DONE]\n\n").as_bytes())
                .await?;
            socket.shutdown().await?;
        }
        Answer::Hang(texts) => {
            for text in &texts {
                socket.write_all(chunk(text).as_bytes()).await?;
                written.fetch_add(1, Ordering::SeqCst);
            }
            socket.flush().await?;
            // Silent, connection open, until the client gives up.
            let _ = socket.read(&mut buf).await;
        }
    }
    Ok(())
}

/// Waits until `value` stops changing for `quiet`, polling; fails after `limit`.
async fn settle(value: impl Fn() -> usize, quiet: Duration, limit: Duration) -> Result<usize> {
    let start = Instant::now();
    let mut last = value();
    let mut since = Instant::now();
    while start.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(20)).await;
        let now = value();
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return Ok(now);
        }
    }
    bail!("still changing after {limit:?} (at {last})")
}

const STREAM_CHUNKS: usize = 40_000;
/// Bytes of text per chunk: 40 000 of them (24 MB) are more than the loopback socket buffers, the
/// stdout pipe and the agent's outbox hold together.
const CHUNK_BYTES: usize = 600;

#[tokio::test]
async fn a_client_that_stops_reading_holds_the_stream_back_and_loses_nothing() -> Result<()> {
    let texts: Vec<String> = (0..STREAM_CHUNKS)
        .map(|i| {
            let mut text = format!("<{i:06}>");
            text.push_str(&"abcdefghij".repeat(CHUNK_BYTES / 10 - 1));
            text
        })
        .collect();
    let expected: String = texts.concat();
    let model = MockModel::start(vec![Answer::Text(Arc::new(texts))]).await?;
    let home = TestHome::new()?.with_config(&model.config())?;
    let mut wire = WireProcess::spawn(&home).await?;
    let pid = wire.child.id().context("no pid")?;
    let prompt = wire.start_prompt(json!("stream a lot")).await?;
    // The turn is streaming once the first part arrived; then the client stops reading.
    let first = wire.wait_event("ContentPart").await?;
    let mut text = first["params"]["payload"]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let mut parts = 1usize;

    // Everything between the model and the client fills up, then the agent stops pulling.
    let stalled_at = settle(
        || model.written(),
        Duration::from_millis(700),
        Duration::from_secs(60),
    )
    .await?;
    ensure!(
        stalled_at < STREAM_CHUNKS,
        "the model's whole answer ({stalled_at} chunks) was read while the client read nothing"
    );
    let sampler = RssSampler::start(pid);
    let rss_at_stall = vm_rss_kib(pid).context("process gone")?;
    // Stay stalled a while: nothing may move, memory may not grow.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let peak = sampler.peak_kib().await?;
    assert_eq!(
        model.written(),
        stalled_at,
        "the model was read while the client was stalled"
    );
    ensure!(
        peak <= rss_at_stall + 8 * 1024,
        "memory grew while the client was stalled: {rss_at_stall} KiB -> {peak} KiB"
    );

    // Reading again: every part, in order, then the answer.
    let (response, rest) = wire.read_response(&prompt).await?;
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": prompt, "result": {"status": "finished"}})
    );
    for payload in payloads(&rest, "ContentPart") {
        text.push_str(payload["text"].as_str().unwrap_or_default());
        parts += 1;
    }
    ensure!(
        text == expected,
        "the streamed text differs ({} of {} bytes)",
        text.len(),
        expected.len()
    );
    assert_eq!(parts, STREAM_CHUNKS);
    assert_eq!(model.written(), STREAM_CHUNKS);
    let kinds: Vec<&str> = rest
        .iter()
        .filter_map(|m| m["params"]["type"].as_str())
        .filter(|k| *k != "ContentPart")
        .collect();
    // What came before the first part was read and put back when the client started waiting for it.
    assert_eq!(kinds, ["TurnBegin", "StepBegin", "StatusUpdate", "TurnEnd"]);
    assert!(wire.wait_exit().await?.success());
    Ok(())
}

/// Every line of a session file, parsed; fails on a line that is not a JSON object.
fn json_lines(path: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    ensure!(
        text.is_empty() || text.ends_with('\n'),
        "{} ends mid-line",
        path.display()
    );
    text.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .with_context(|| format!("{}: not JSON: {line:.200}", path.display()))?;
            ensure!(
                value.is_object(),
                "{}: not an object: {line:.200}",
                path.display()
            );
            Ok(value)
        })
        .collect()
}

/// A turn whose Shell call waits on the client's approval gets `signal`: the turn ends, the approval is
/// rejected, the prompt is answered, both files are whole and the exit status is 0.
async fn signal_during_an_approval(signal: &str) -> Result<()> {
    let home = TestHome::new()?.scripted(&[&shell_call_line("tc-1", "echo hi"), "text: not reached"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let prompt = wire.start_prompt(json!("run it")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    let request_id = request["params"]["payload"]["id"].clone();

    let pid = wire.child.id().context("no pid")?;
    let status = tokio::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .await?;
    ensure!(status.success(), "kill -{signal} failed");

    // stdin stays open: the signal alone ends the session.
    let (response, after) = wire.read_response(&prompt).await?;
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": prompt, "result": {"status": "cancelled"}})
    );
    let approvals = payloads(&after, "ApprovalResponse");
    assert_eq!(approvals.len(), 1, "{after:?}");
    assert_eq!(approvals[0]["request_id"], request_id);
    assert_eq!(approvals[0]["response"], "reject");
    ensure!(!payloads(&after, "TurnEnd").is_empty(), "no TurnEnd: {after:?}");
    let exit = tokio::time::timeout(Duration::from_secs(15), wire.child.wait())
        .await
        .map_err(|_| anyhow!("no exit after SIG{signal}"))??;
    ensure!(exit.code() == Some(0), "SIG{signal}: exit status {exit}");

    let [dir] = home
        .session_dirs()
        .try_into()
        .map_err(|d| anyhow!("sessions: {d:?}"))?;
    let wire_records = json_lines(&dir.join("wire.jsonl"))?;
    let types: Vec<&str> = wire_records
        .iter()
        .filter_map(|r| r["message"]["type"].as_str())
        .collect();
    // Approvals are not recorded (reference); the call that asked for one is.
    for kind in ["TurnBegin", "ToolCall", "TurnEnd"] {
        ensure!(types.contains(&kind), "wire.jsonl lacks {kind}: {types:?}");
    }
    assert_eq!(types.last(), Some(&"TurnEnd"), "{types:?}");
    let context = json_lines(&dir.join("context.jsonl"))?;
    ensure!(
        context.iter().any(|r| r["role"] == "user"),
        "context.jsonl lacks the user message: {context:?}"
    );
    Ok(())
}

#[tokio::test]
async fn sigterm_during_an_approval_ends_the_turn_and_exits_cleanly() -> Result<()> {
    signal_during_an_approval("TERM").await
}

#[tokio::test]
async fn sigint_during_an_approval_ends_the_turn_and_exits_cleanly() -> Result<()> {
    signal_during_an_approval("INT").await
}

/// Starts a session `id` whose directory was prepared by `prepare`, sends a prompt and returns the
/// error it got; then checks the server still answers and exits 0.
async fn prompt_with_broken_session(
    id: &str,
    prepare: impl FnOnce(&Path) -> Result<()>,
) -> Result<(TestHome, Value)> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let dir = home.sessions_of_work_dir().join(id);
    std::fs::create_dir_all(&dir)?;
    prepare(&dir)?;
    let mut args = home.args();
    args.extend(["--session".to_owned(), id.to_owned()]);
    let mut wire = WireProcess::spawn_with(&home, args).await?;
    let (response, _) = wire.prompt(json!("hi")).await?;
    wire.assert_alive().await?;
    let exit = wire.wait_exit().await?;
    ensure!(exit.code() == Some(0), "exit status {exit}");
    Ok((home, response))
}

#[tokio::test]
async fn a_full_disk_fails_the_prompt_with_the_file_and_the_reason() -> Result<()> {
    if !Path::new("/dev/full").exists() {
        return Ok(());
    }
    // Every write to /dev/full fails with ENOSPC, as on a full disk.
    let (home, response) = prompt_with_broken_session("full-disk", |dir| {
        std::os::unix::fs::symlink("/dev/full", dir.join("wire.jsonl"))?;
        Ok(())
    })
    .await?;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(response["error"]["code"], -32603, "{response}");
    ensure!(
        message.starts_with("SessionFileError: cannot write ")
            && message.contains("wire.jsonl")
            && message.contains("No space left on device"),
        "{response}"
    );
    // What could be written is whole and readable.
    let dir = home.sessions_of_work_dir().join("full-disk");
    let context = json_lines(&dir.join("context.jsonl"))?;
    ensure!(context.iter().any(|r| r["role"] == "user"), "{context:?}");
    Ok(())
}

#[tokio::test]
async fn an_unwritable_context_file_fails_the_prompt_and_the_wire_file_stays_whole() -> Result<()> {
    // A directory where the file belongs: no write can succeed, even as root.
    let (home, response) = prompt_with_broken_session("no-context", |dir| {
        std::fs::create_dir(dir.join("context.jsonl"))?;
        Ok(())
    })
    .await?;
    let message = response["error"]["message"].as_str().unwrap_or_default();
    ensure!(
        response["error"]["code"] == -32603
            && message.starts_with("SessionFileError: cannot write ")
            && message.contains("context.jsonl"),
        "{response}"
    );
    let dir = home.sessions_of_work_dir().join("no-context");
    let records = json_lines(&dir.join("wire.jsonl"))?;
    let types: Vec<&str> = records
        .iter()
        .filter_map(|r| r["message"]["type"].as_str())
        .collect();
    assert_eq!(types, ["TurnBegin", "TurnEnd"]);
    Ok(())
}

#[tokio::test]
async fn a_provider_that_goes_silent_mid_stream_is_timed_out_and_retried() -> Result<()> {
    let model = MockModel::start(vec![
        Answer::Hang(vec!["Hel".to_owned(), "lo".to_owned()]),
        Answer::Text(Arc::new(vec!["Hello".to_owned(), ", again".to_owned()])),
    ])
    .await?;
    let mut config = model.config();
    // Through the provider's own environment, as a user would set it in the config file.
    config["providers"]["mock"]["env"] = json!({"KIMI_AGENT_PROVIDER_READ_TIMEOUT_S": "1"});
    let home = TestHome::new()?.with_config(&config)?;
    let mut wire = WireProcess::spawn(&home).await?;
    // A deadline on the awaited answer: the provider's own 1 s read timeout, not a default of minutes,
    // must end the silent attempt.
    let (response, messages) = tokio::time::timeout(Duration::from_secs(10), wire.prompt(json!("hi")))
        .await
        .map_err(|_| anyhow!("no answer within 10 s: the provider's 1 s read timeout was not applied"))??;
    assert_eq!(response["result"], json!({"status": "finished"}), "{response}");
    let retries = payloads(&messages, "StepRetry");
    assert_eq!(retries.len(), 1, "{messages:?}");
    assert_eq!(retries[0]["error_type"], "APITimeoutError");
    assert_eq!(retries[0]["next_attempt"], 2);
    let texts: Vec<&str> = payloads(&messages, "ContentPart")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect();
    // The silent attempt's parts were streamed before it failed; the retry streams its own.
    assert_eq!(texts, ["Hel", "lo", "Hello", ", again"]);
    assert_eq!(model.connections.load(Ordering::SeqCst), 2);
    // Only the answer of the attempt that finished is in the context.
    let [dir] = home
        .session_dirs()
        .try_into()
        .map_err(|d| anyhow!("sessions: {d:?}"))?;
    assert!(wire.wait_exit().await?.success());
    let context = json_lines(&dir.join("context.jsonl"))?;
    let assistant: Vec<&Value> = context.iter().filter(|r| r["role"] == "assistant").collect();
    assert_eq!(assistant.len(), 1, "{context:?}");
    assert_eq!(assistant[0]["content"], json!("Hello, again"));
    Ok(())
}

#[tokio::test]
async fn a_bad_read_timeout_is_refused_at_start() -> Result<()> {
    let model = MockModel::start(vec![Answer::Text(Arc::new(vec!["x".to_owned()]))]).await?;
    let mut config = model.config();
    config["providers"]["mock"]["env"] = json!({"KIMI_AGENT_PROVIDER_READ_TIMEOUT_S": "soon"});
    let home = TestHome::new()?.with_config(&config)?;
    let args = home.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = home.run_cli(&args).await?;
    ensure!(!output.status.success(), "started with a bad timeout");
    let stderr = String::from_utf8_lossy(&output.stderr);
    ensure!(stderr.contains("KIMI_AGENT_PROVIDER_READ_TIMEOUT_S"), "{stderr}");
    Ok(())
}
