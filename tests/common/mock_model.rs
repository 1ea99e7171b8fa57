//! A chat-completions server standing in for the model, for tests where the next answer depends on
//! what the agent sent (an id a tool returned) or where the test checks exactly what the model received.
//!
//! Each request's messages go to a script function that returns the [`Reply`]; the server streams it as
//! an OpenAI-compatible SSE answer, and keeps every request body for inspection.

use std::sync::atomic::{AtomicUsize, Ordering};

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
        let mut config = json!({
            "default_model": "mock",
            "models": {"mock": {"provider": "mock", "model": "mock-model", "max_context_size": 100000}},
            "providers": {"mock": {
                "type": "openai_legacy", "base_url": format!("{}/v1", self.server.uri()), "api_key": "sk-test"
            }},
        });
        if let (Some(config), Some(extra)) = (config.as_object_mut(), extra.as_object()) {
            for (key, value) in extra {
                config.insert(key.clone(), value.clone());
            }
        }
        config
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
