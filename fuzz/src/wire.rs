//! Properties of the wire input path, checked on arbitrary bytes.
//!
//! Shared by the fuzz targets and by `crates/kimi-wire/tests/fuzz_seeds.rs`, which replays the committed
//! seeds on stable (this file is included there by path, so it uses only kimi-wire's own dependencies).
//!
//! - [`check_line_reader`]: the capped line reader agrees with a plain model of the framing (split on
//!   `\n`, too-long lines reported with their length, lossy UTF-8, trimmed, blank lines reported), for
//!   any read-buffer size; and classifying a line is stable under re-encoding.
//! - [`check_dispatch`]: the whole server, fed the bytes as stdin with a stub agent, answers every
//!   request exactly once and every unusable line once with `id: null`, and writes only well-formed
//!   JSON-RPC with the reference's codes and messages.

use std::collections::BTreeMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use async_trait::async_trait;
use kimi_wire::error_code::{
    INVALID_PARAMS, INVALID_REQUEST, INVALID_STATE, METHOD_NOT_FOUND, PARSE_ERROR, RpcError,
};
use kimi_wire::framing::{Inbound, LineReader};
use kimi_wire::jsonrpc::{Incoming, classify};
use kimi_wire::message::UserInput;
use kimi_wire::params::{
    HooksInfo, InitializeParams, InitializeResult, PromptResult, ReplayResult, ReplayStatus,
    ServerCapabilities, ServerInfo, SetPlanModeResult, SteerResult,
};
use kimi_wire::{Server, ServerConfig, WireAgent};
use serde_json::{Value, json};
use tokio::io::{AsyncWrite, BufReader};
use tokio_util::sync::CancellationToken;

/// One current-thread runtime for the whole process: building one per input would dominate the cost.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap_or_else(|e| panic!("cannot build the fuzz runtime: {e}"))
    })
}

/// Splits the first two bytes off as settings: (read-buffer size, line cap, stream).
fn settings(data: &[u8]) -> (usize, usize, &[u8]) {
    match data {
        [a, b, rest @ ..] => {
            let buf = usize::from(*a % 64) + 1;
            // Mostly small caps, so oversized lines are common; sometimes one no input reaches.
            let cap = if *b == 0xff { 1 << 20 } else { usize::from(*b) + 1 };
            (buf, cap, rest)
        }
        _ => (8, 16, data),
    }
}

/// What the framing must produce for `stream` with a cap of `cap` bytes.
fn model_framing(stream: &[u8], cap: usize) -> Vec<Inbound> {
    let mut out = Vec::new();
    let mut segments: Vec<&[u8]> = stream.split(|b| *b == b'\n').collect();
    // Input ending in a newline leaves an empty last segment that is not a line; so does empty input.
    if segments.last().is_some_and(|s| s.is_empty()) {
        segments.pop();
    }
    for segment in segments {
        if segment.len() > cap {
            out.push(Inbound::Oversized { len: segment.len() });
            continue;
        }
        let text = String::from_utf8_lossy(segment);
        let trimmed = text.trim();
        out.push(if trimmed.is_empty() {
            Inbound::Blank
        } else {
            Inbound::Line(trimmed.to_owned())
        });
    }
    out.push(Inbound::Eof);
    out
}

/// The line reader against [`model_framing`], and classification of each line.
pub fn check_line_reader(data: &[u8]) {
    let (buf, cap, stream) = settings(data);
    let got = runtime().block_on(async {
        let mut reader = LineReader::new(BufReader::with_capacity(buf, stream), cap);
        let mut got = Vec::new();
        loop {
            let item = reader
                .next()
                .await
                .unwrap_or_else(|e| panic!("reading from memory failed: {e}"));
            let end = item == Inbound::Eof;
            got.push(item);
            if end {
                return got;
            }
        }
    });
    assert_eq!(got, model_framing(stream, cap), "buffer {buf}, cap {cap}");
    for item in &got {
        if let Inbound::Line(line) = item {
            check_classify(line);
        }
    }
}

/// A request or notification, written back out as compact JSON, classifies the same again.
fn check_classify(line: &str) {
    let message = match classify(line) {
        Ok(Some(Incoming::Request { id, method, params })) => {
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
        }
        Ok(Some(Incoming::Notification { method, params })) => {
            json!({"jsonrpc": "2.0", "method": method, "params": params})
        }
        _ => return,
    };
    let first = classify(line);
    // A missing `params` is written as `null`, which classifies as `Some(null)`.
    let normalize = |incoming| match incoming {
        Ok(Some(Incoming::Request { id, method, params })) => Incoming::Request {
            id,
            method,
            params: Some(params.unwrap_or(Value::Null)),
        },
        Ok(Some(Incoming::Notification { method, params })) => Incoming::Notification {
            method,
            params: Some(params.unwrap_or(Value::Null)),
        },
        other => panic!("not a call: {other:?}"),
    };
    assert_eq!(
        normalize(classify(&message.to_string())),
        normalize(first),
        "line: {line}"
    );
}

/// A stub agent: every method succeeds at once.
struct StubAgent;

#[async_trait]
impl WireAgent for StubAgent {
    async fn initialize(&self, _params: InitializeParams) -> Result<InitializeResult, RpcError> {
        Ok(InitializeResult {
            protocol_version: kimi_wire::PROTOCOL_VERSION.to_owned(),
            server: ServerInfo {
                name: "stub".to_owned(),
                version: "0".to_owned(),
            },
            slash_commands: Vec::new(),
            external_tools: None,
            hooks: HooksInfo::default(),
            capabilities: ServerCapabilities::default(),
            sandbox: None,
            session_held_by: None,
        })
    }

    async fn prompt(&self, _input: UserInput, _cancel: CancellationToken) -> Result<PromptResult, RpcError> {
        Ok(PromptResult::finished())
    }

    async fn steer(&self, _input: UserInput) -> Result<SteerResult, RpcError> {
        Ok(SteerResult::default())
    }

    async fn set_plan_mode(&self, enabled: bool) -> Result<SetPlanModeResult, RpcError> {
        Ok(SetPlanModeResult::new(enabled))
    }

    async fn replay(&self, _cancel: CancellationToken) -> Result<ReplayResult, RpcError> {
        Ok(ReplayResult {
            status: ReplayStatus::Finished,
            events: 0,
            requests: 0,
        })
    }

    async fn shutdown(&self) {}
}

/// Stdout in memory.
#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl AsyncWrite for Capture {
    fn poll_write(self: Pin<&mut Self>, _cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

/// What one input unit must be answered with.
#[derive(Debug, Default, PartialEq)]
struct Expected {
    /// Answers with `id: null` (unparseable, blank, oversized, not JSON-RPC, a bad response).
    null_id: usize,
    /// Answers per request id.
    by_id: BTreeMap<String, usize>,
}

/// The whole server on `data` as stdin, with the stub agent.
pub fn check_dispatch(data: &[u8]) {
    let (_, cap, stream) = settings(data);
    let mut expected = Expected::default();
    for item in model_framing(stream, cap) {
        match item {
            Inbound::Eof => {}
            Inbound::Blank | Inbound::Oversized { .. } => expected.null_id += 1,
            Inbound::Line(line) => match classify(&line) {
                Err(_) => expected.null_id += 1,
                Ok(Some(Incoming::Request { id, .. })) => *expected.by_id.entry(id).or_default() += 1,
                Ok(_) => {}
            },
        }
    }

    let output = Capture::default();
    let written = Arc::clone(&output.0);
    runtime().block_on(async {
        let (server, _client) = Server::new(ServerConfig {
            max_line_bytes: cap,
            ..ServerConfig::default()
        });
        server
            .run(stream, output, Arc::new(StubAgent), std::future::pending::<()>())
            .await;
    });
    let written = std::mem::take(&mut *written.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
    let text = String::from_utf8(written).unwrap_or_else(|e| panic!("stdout is not UTF-8: {e}"));
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "stdout does not end with a newline"
    );

    let mut got = Expected::default();
    for line in text.lines() {
        match check_reply(line) {
            None => got.null_id += 1,
            Some(id) => *got.by_id.entry(id).or_default() += 1,
        }
    }
    assert_eq!(got, expected, "answers do not match the input");
}

/// Checks one line the server wrote and returns its id (`None` for `id: null`).
pub fn check_reply(line: &str) -> Option<String> {
    let value: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {line}"));
    assert_eq!(object.get("jsonrpc"), Some(&json!("2.0")), "{line}");
    let id = match object.get("id") {
        Some(Value::Null) => None,
        Some(Value::String(id)) => Some(id.clone()),
        other => panic!("bad id {other:?}: {line}"),
    };
    match (object.get("result"), object.get("error")) {
        (Some(result), None) => {
            assert!(id.is_some(), "a result without an id: {line}");
            assert!(result.is_object(), "a result that is not an object: {line}");
        }
        (None, Some(error)) => check_error(error, id.is_some(), line),
        _ => panic!("neither result nor error: {line}"),
    }
    id
}

/// Every error is one of the reference's, with its exact message.
fn check_error(error: &Value, has_id: bool, line: &str) {
    let rpc: RpcError =
        serde_json::from_value(error.clone()).unwrap_or_else(|e| panic!("bad error object ({e}): {line}"));
    let keys: Vec<&str> = error
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    assert_eq!(keys, ["code", "message", "data"], "error keys: {line}");
    let message = rpc.message.as_str();
    let known = match (rpc.code, has_id) {
        (PARSE_ERROR, false) => message == "Invalid JSON format",
        (INVALID_REQUEST, false) => matches!(message, "Invalid request" | "Invalid response"),
        (METHOD_NOT_FOUND, true) => message.starts_with("Unexpected method received: "),
        (INVALID_PARAMS, true) => {
            message.starts_with("Invalid parameters for method `") && message.ends_with('`')
        }
        (INVALID_STATE, true) => matches!(
            message,
            "An agent turn is already in progress" | "No agent turn is in progress"
        ),
        _ => false,
    };
    assert!(known, "not a reference error: {line}");
    // Only an oversized line carries data.
    if rpc.data.is_some() {
        assert_eq!(rpc.code, PARSE_ERROR, "unexpected data: {line}");
    }
}
