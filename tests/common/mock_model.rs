//! A chat-completions server standing in for the model, for tests where the next answer depends on
//! what the agent sent (an id a tool returned) or where the test checks exactly what the model received.
//!
//! Each request's messages go to a script function that returns the [`Reply`]; the server streams it as
//! an OpenAI-compatible SSE answer, and keeps every request body for inspection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One answer of the model.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Plain text; the turn ends.
    Text(String),
    /// Tool calls: `(id, name, arguments)`.
    Calls(Vec<(String, String, Value)>),
    /// These calls in full, then the start of one more, then the stream ends without a `finish_reason`
    /// or `[DONE]`: a connection dropped mid-answer.
    Cut(Vec<(String, String, Value)>),
}

impl Reply {
    /// A single tool call.
    pub fn call(id: &str, name: &str, arguments: Value) -> Self {
        Self::Calls(vec![(id.to_owned(), name.to_owned(), arguments)])
    }
}

/// The running mock.
pub struct MockModel {
    pub server: MockServer,
}

type Script = Box<dyn Fn(usize, &[Value]) -> Reply + Send + Sync>;

struct Responder {
    script: Script,
    calls: AtomicUsize,
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(sse(&(self.script)(n, &messages)))
    }
}

impl MockModel {
    /// Starts a server answering the `n`th request (from 0) with `script(n, messages)`.
    pub async fn start(script: impl Fn(usize, &[Value]) -> Reply + Send + Sync + 'static) -> Self {
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Responder {
                script: Box::new(script),
                calls: AtomicUsize::new(0),
            })
            .mount(&server)
            .await;
        Self { server }
    }

    /// A whole config using this server as the default model, with `extra` top-level keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        model_config(&format!("{}/v1", self.server.uri()), extra)
    }

    /// Every request body so far, in order (`tools`, `messages`, ...).
    pub async fn bodies(&self) -> Vec<Value> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .map(|r| serde_json::from_slice::<Value>(&r.body).unwrap_or(Value::Null))
            .collect()
    }

    /// The `messages` of every request so far, in order.
    pub async fn requests(&self) -> Vec<Vec<Value>> {
        self.server
            .received_requests()
            .await
            .unwrap_or_default()
            .iter()
            .map(|r| {
                serde_json::from_slice::<Value>(&r.body).unwrap_or(Value::Null)["messages"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
            })
            .collect()
    }
}

/// The mock model on a plain socket, for answers that must stop part-way until the test lets them go on
/// (wiremock sends a body in one piece, so a call and the break after it reach the agent together).
///
/// A [`Reply::Cut`] is streamed up to the start of its unfinished call, so every call before it is
/// complete; the answer then stays open until [`PausingModel::release`] and is closed without ending.
/// Other replies are streamed whole.
pub struct PausingModel {
    addr: SocketAddr,
    bodies: Arc<Mutex<Vec<Value>>>,
    releases: Arc<tokio::sync::Semaphore>,
    server: tokio::task::JoinHandle<()>,
}

impl Drop for PausingModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

impl PausingModel {
    /// Starts a server answering the `n`th request (from 0) with `script(n, messages)`.
    pub async fn start(
        script: impl Fn(usize, &[Value]) -> Reply + Send + Sync + 'static,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let bodies: Arc<Mutex<Vec<Value>>> = Arc::default();
        let releases = Arc::new(tokio::sync::Semaphore::new(0));
        let script: Arc<Script> = Arc::new(Box::new(script));
        let (seen, gate) = (Arc::clone(&bodies), Arc::clone(&releases));
        let server = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let (seen, gate, script) = (Arc::clone(&seen), Arc::clone(&gate), Arc::clone(&script));
                tokio::spawn(async move {
                    let _ = serve(socket, &seen, &gate, script.as_ref()).await;
                });
            }
        });
        Ok(Self {
            addr,
            bodies,
            releases,
            server,
        })
    }

    /// Lets the oldest held answer (or the next one to be held) break off.
    pub fn release(&self) {
        self.releases.add_permits(1);
    }

    /// A whole config using this server as the default model, with `extra` top-level keys merged in.
    pub fn config(&self, extra: Value) -> Value {
        model_config(&format!("http://{}/v1", self.addr), extra)
    }

    /// The `messages` of every request so far, in order.
    pub fn requests(&self) -> Vec<Vec<Value>> {
        self.bodies
            .lock()
            .map(|b| {
                b.iter()
                    .map(|body| body["messages"].as_array().cloned().unwrap_or_default())
                    .collect()
            })
            .unwrap_or_default()
    }
}

/// Reads one request from `socket`, answers it as `script` says, and closes the connection.
async fn serve(
    mut socket: tokio::net::TcpStream,
    seen: &Mutex<Vec<Value>>,
    gate: &tokio::sync::Semaphore,
    script: &Script,
) -> std::io::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let (head_end, length) = loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..n]);
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
            let length = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse::<usize>().ok())
                .unwrap_or(0);
            break (end + 4, length);
        }
    };
    while buffer.len() < head_end + length {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            break;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    let body: Value = serde_json::from_slice(&buffer[head_end..]).unwrap_or(Value::Null);
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let n = {
        let mut seen = seen.lock().map_err(|_| std::io::Error::other("poisoned"))?;
        seen.push(body);
        seen.len() - 1
    };
    let reply = script(n, &messages);
    socket
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
        .await?;
    socket.write_all(sse(&reply).as_bytes()).await?;
    socket.flush().await?;
    if matches!(reply, Reply::Cut(_)) {
        // Held open, every call but the last complete, until the test lets the answer break off.
        if let Ok(permit) = gate.acquire().await {
            permit.forget();
        }
    }
    socket.shutdown().await
}

/// A whole config whose default model is served at `base_url`, with `extra` top-level keys merged in.
fn model_config(base_url: &str, extra: Value) -> Value {
    let mut config = json!({
        "default_model": "mock",
        "models": {"mock": {"provider": "mock", "model": "mock-model", "max_context_size": 100000}},
        "providers": {"mock": {"type": "openai_legacy", "base_url": base_url, "api_key": "sk-test"}},
    });
    if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
        for (key, value) in extra {
            config.insert(key.clone(), value.clone());
        }
    }
    config
}

/// The text of a message (string content, or its text parts, one per line).
pub fn message_text(message: &Value) -> String {
    match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of the tool message answering `tool_call_id`, if the messages have it.
pub fn tool_result<'a>(messages: &'a [Value], tool_call_id: &str) -> Option<String> {
    messages
        .iter()
        .find(|m: &&'a Value| m["role"] == "tool" && m["tool_call_id"] == tool_call_id)
        .map(message_text)
}

/// The SSE body of `reply`, as an OpenAI-compatible server streams it.
pub fn sse(reply: &Reply) -> String {
    let chunk = |delta: Value, finish: Value| {
        let chunk = json!({
            "id": "chatcmpl-mock", "object": "chat.completion.chunk", "created": 1, "model": "mock-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        });
        format!("data: {chunk}\n\n")
    };
    let mut body = String::new();
    match reply {
        Reply::Text(text) => {
            body.push_str(&chunk(json!({"role": "assistant", "content": text}), Value::Null));
            body.push_str(&chunk(json!({}), json!("stop")));
        }
        Reply::Calls(calls) | Reply::Cut(calls) => {
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                let call = json!({"index": index, "id": id, "type": "function",
                                  "function": {"name": name, "arguments": arguments.to_string()}});
                body.push_str(&chunk(json!({"tool_calls": [call]}), Value::Null));
            }
            if matches!(reply, Reply::Cut(_)) {
                let started = json!({"index": calls.len(), "id": "cut-off", "type": "function",
                                     "function": {"name": "Shell", "arguments": "{\"comm"}});
                body.push_str(&chunk(json!({"tool_calls": [started]}), Value::Null));
                return body;
            }
            body.push_str(&chunk(json!({}), json!("tool_calls")));
        }
    }
    body.push_str("data: [DONE]\n\n");
    body
}

/// Answers the Nth request with the Nth template; the last one repeats. For tests that script a
/// sequence of faults and answers (one per attempt).
pub struct Seq {
    templates: Vec<ResponseTemplate>,
    next: AtomicUsize,
}

impl Seq {
    /// Serves `templates` in order; there must be at least one.
    pub fn new(templates: Vec<ResponseTemplate>) -> Self {
        Self {
            templates,
            next: AtomicUsize::new(0),
        }
    }
}

impl Respond for Seq {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        self.templates[n.min(self.templates.len().saturating_sub(1))].clone()
    }
}
