//! A mock chat-completions server for the provider tests: recorded SSE
//! bodies served in sequence by wiremock, with the requests kept for checks.

#![allow(dead_code, reason = "each test binary uses part of the helpers")]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt as _;
use kimi_llm::{ChatError, ChatProvider, ChatRequest, Flavor, OpenAiCompatConfig, StreamEvent};
use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The path every provider posts to under the mock's `/v1` base URL.
pub const COMPLETIONS: &str = "/v1/chat/completions";

/// A recorded body from `tests/fixtures/llm/`.
pub fn fixture(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/llm")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A 200 answer streaming `body` as server-sent events.
pub fn sse(body: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body.into())
}

/// Answers the Nth request with the Nth template (the last one repeats).
pub struct Seq {
    templates: Vec<ResponseTemplate>,
    next: AtomicUsize,
}

impl Respond for Seq {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.next.fetch_add(1, Ordering::SeqCst);
        let last = self.templates.len().saturating_sub(1);
        self.templates[n.min(last)].clone()
    }
}

/// Starts a server answering `templates` in order, expecting exactly that many calls.
pub async fn serve(templates: Vec<ResponseTemplate>) -> MockServer {
    let server = MockServer::start().await;
    let count = templates.len() as u64;
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(Seq {
            templates,
            next: AtomicUsize::new(0),
        })
        .expect(count)
        .mount(&server)
        .await;
    server
}

/// A config pointing at `server`.
pub fn config(server: &MockServer, flavor: Flavor) -> OpenAiCompatConfig {
    OpenAiCompatConfig::new(flavor, format!("{}/v1", server.uri()), "sk-test", "kimi-test")
}

/// Runs one call and collects its events, stopping at the first error.
pub async fn run(
    provider: &dyn ChatProvider,
    request: ChatRequest<'_>,
) -> (Vec<StreamEvent>, Option<ChatError>) {
    let mut stream = match provider.generate(request).await {
        Ok(stream) => stream,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let mut events = Vec::new();
    while let Some(item) = stream.next().await {
        match item {
            Ok(event) => events.push(event),
            Err(e) => return (events, Some(e)),
        }
    }
    (events, None)
}

/// The JSON bodies the server received, in order.
pub async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap_or(Value::Null))
        .collect()
}

/// The invariant every request must keep: each `role:"tool"` message comes
/// after an assistant message that asked for that tool call id, with only
/// other tool messages in between.
pub fn assert_tool_messages_answer_calls(body: &Value) {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        match m["role"].as_str() {
            Some("assistant") => {
                open = m["tool_calls"]
                    .as_array()
                    .map(|calls| {
                        calls
                            .iter()
                            .filter_map(|c| c["id"].as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
            }
            Some("tool") => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                assert!(
                    open.iter().any(|o| o == id),
                    "message {i}: tool result {id:?} does not answer a preceding call ({open:?})"
                );
            }
            _ => open.clear(),
        }
    }
}

/// Whether `key` occurs anywhere in `value`.
pub fn contains_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.contains_key(key) || map.values().any(|v| contains_key(v, key)),
        Value::Array(items) => items.iter().any(|v| contains_key(v, key)),
        _ => false,
    }
}
