//! The `anthropic`, `openai_responses`, `gemini` and `vertexai` providers through the binary (issue 14).
//!
//! Each test starts a wiremock server speaking one API in its own streaming shape (Anthropic's
//! `event:`/`data:` pairs, the Responses API's typed events, Gemini's `data:` chunks ending in CRLF),
//! points a provider at it and drives `kimi-agent --wire`. Vertex AI runs against the same Gemini
//! chunks, authorized by a service-account key whose token endpoint is also the mock. What each API
//! must receive (headers, thinking switch, signatures sent back, tool results, sanitized schemas) is
//! checked on the requests the server kept.

use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::{Context as _, Result, anyhow};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockGuard, MockServer, Request, Respond, ResponseTemplate};

use super::cassettes::{comparable, records};
use crate::common::mock_model::Seq;
use crate::common::{TestHome, WireProcess, payloads};

/// Our knob that scales the retry backoff; 0.01 turns the reference's 0.3 s into 3 ms.
const BACKOFF_SCALE_ENV: &str = "KIMI_AGENT_RETRY_BACKOFF_SCALE";
const MAX_CONTEXT: u64 = 200_000;
/// The providers' key: long enough (8 characters or more) for a cassette to redact it.
const API_KEY: &str = "sk-test-provider-key";
/// The test-only service-account key (see crates/kimi-llm/tests/fixtures/google/README.md).
const TEST_KEY: &str = include_str!("../../crates/kimi-llm/tests/fixtures/google/test_rsa_key.pem");
const SERVICE_ACCOUNT: &str = "agent@kimi-test.iam.gserviceaccount.com";

/// The API a test speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Anthropic,
    Responses,
    Gemini,
    Vertex,
}

impl Api {
    const ALL: [Self; 4] = [Self::Anthropic, Self::Responses, Self::Gemini, Self::Vertex];

    fn provider_type(self) -> &'static str {
        match self {
            Self::Anthropic => "anthropic",
            Self::Responses => "openai_responses",
            Self::Gemini => "gemini",
            Self::Vertex => "vertexai",
        }
    }

    fn model(self) -> &'static str {
        match self {
            Self::Anthropic => "claude-sonnet-4-5",
            Self::Responses => "gpt-5.1-codex",
            Self::Gemini | Self::Vertex => "gemini-2.5-pro",
        }
    }

    /// Where the provider posts, under the mock's root.
    fn stream_path(self) -> &'static str {
        match self {
            Self::Anthropic => "/v1/messages",
            Self::Responses => "/v1/responses",
            Self::Gemini => "/v1/models/gemini-2.5-pro:streamGenerateContent",
            Self::Vertex => {
                "/v1beta1/projects/kimi-test/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent"
            }
        }
    }

    fn is_google(self) -> bool {
        matches!(self, Self::Gemini | Self::Vertex)
    }
}

/// The mock of one API (and, for Vertex AI, its token endpoint).
struct Mocked {
    api: Api,
    server: MockServer,
}

impl Mocked {
    async fn start(api: Api) -> Result<Self> {
        let server = MockServer::start().await;
        if api == Api::Vertex {
            mount_tokens(&server, 3600).await;
        }
        Ok(Self { api, server })
    }

    /// Serves `templates` in order on the API's path until the guard drops, which fails the test unless
    /// exactly `expected` requests arrived.
    async fn serve(&self, templates: Vec<ResponseTemplate>, expected: u64) -> MockGuard {
        Mock::given(method("POST"))
            .and(path(self.api.stream_path()))
            .respond_with(Seq::new(templates))
            .expect(expected)
            .mount_as_scoped(&self.server)
            .await
    }

    /// A config with this API's provider as the only model, retries as given. For Vertex AI, a
    /// service-account key file is written into `home` and named in the provider's `env` table.
    fn config(&self, home: &TestHome, max_retries_per_step: u32) -> Result<Value> {
        let api = self.api;
        let base_url = match api {
            Api::Responses => format!("{}/v1", self.server.uri()),
            _ => self.server.uri(),
        };
        let mut provider = json!({
            "type": api.provider_type(), "base_url": base_url, "api_key": API_KEY,
            "custom_headers": {"X-Custom": "1"},
        });
        if api == Api::Vertex {
            provider["api_key"] = json!("");
            let key_file = home.home().join("service-account.json");
            std::fs::write(
                &key_file,
                json!({
                    "type": "service_account", "project_id": "kimi-test", "private_key_id": "key-1",
                    "private_key": TEST_KEY, "client_email": SERVICE_ACCOUNT, "client_id": "1",
                    "token_uri": format!("{}/token", self.server.uri()),
                })
                .to_string(),
            )?;
            provider["env"] = json!({
                "GOOGLE_APPLICATION_CREDENTIALS": key_file.to_string_lossy(),
                "GOOGLE_CLOUD_PROJECT": "kimi-test", "GOOGLE_CLOUD_LOCATION": "us-central1",
            });
        }
        Ok(json!({
            "default_model": "m",
            "models": {"m": {"provider": "p", "model": api.model(), "max_context_size": MAX_CONTEXT,
                             "capabilities": ["thinking", "image_in"]}},
            "providers": {"p": provider},
            "loop_control": {"max_retries_per_step": max_retries_per_step, "max_steps_per_turn": 20},
        }))
    }

    /// The bodies of the requests to the API, each checked for what every request must carry.
    async fn bodies(&self) -> Result<Vec<Value>> {
        let requests = self.server.received_requests().await.unwrap_or_default();
        requests
            .iter()
            .filter(|r| r.url.path() == self.api.stream_path())
            .map(|r| self.check(r))
            .collect()
    }

    fn check(&self, request: &Request) -> Result<Value> {
        let header = |name: &str| {
            request
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(
            header("user-agent"),
            Some(format!(
                "kimi-agent/{} test-client/9.9",
                env!("CARGO_PKG_VERSION")
            ))
        );
        assert_eq!(header("x-custom").as_deref(), Some("1"));
        match self.api {
            Api::Anthropic => {
                assert_eq!(header("x-api-key").as_deref(), Some(API_KEY));
                assert_eq!(header("anthropic-version").as_deref(), Some("2023-06-01"));
            }
            Api::Responses => assert_eq!(header("authorization"), Some(format!("Bearer {API_KEY}"))),
            Api::Gemini => assert_eq!(header("x-goog-api-key").as_deref(), Some(API_KEY)),
            Api::Vertex => {
                let auth = header("authorization").unwrap_or_default();
                assert!(auth.starts_with("Bearer ya29.token-"), "{auth}");
                assert_eq!(header("x-goog-api-key"), None);
            }
        }
        if self.api.is_google() {
            assert_eq!(request.url.query(), Some("alt=sse"));
        }
        let body: Value = serde_json::from_slice(&request.body).context("request body is not JSON")?;
        for key in ["$ref", "$defs"] {
            assert!(!contains_key(&body, key), "`{key}` reached the API: {body}");
        }
        Ok(body)
    }
}

/// The binary, initialized, and its home.
struct Agent {
    home: TestHome,
    wire: WireProcess,
}

impl Agent {
    /// Starts the binary in `home` with `config`, quick retries and `args`.
    async fn start(home: TestHome, config: &Value, args: &[&str]) -> Result<Self> {
        let mut home = home.with_config(config)?;
        for arg in args {
            home = home.arg(arg);
        }
        let mut wire =
            WireProcess::spawn_with_env(&home, home.args(), &[(BACKOFF_SCALE_ENV, "0.01")]).await?;
        // A client tool whose schema uses `$defs`/`$ref` and a name no API accepts as it is, as MCP
        // servers write them: every request must carry it reshaped.
        let lookup = json!({
            "name": "look.up",
            "description": "Looks a range up.",
            "parameters": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "properties": {"range": {"anyOf": [{"$ref": "#/$defs/Range"}, {"type": "null"}]}},
                "$defs": {"Range": {"type": "object", "properties": {"start": {"type": "integer"}}}}
            }
        });
        let init = wire
            .initialize(
                json!({"protocol_version": "1.10", "client": {"name": "test-client", "version": "9.9"},
                               "external_tools": [lookup]}),
            )
            .await?;
        assert_eq!(init["external_tools"]["accepted"], json!(["look.up"]));
        Ok(Self { home, wire })
    }

    async fn prompt(&mut self, input: Value) -> Result<(Value, Vec<Value>)> {
        self.wire.prompt(input).await
    }

    /// The session's user, assistant and tool messages, as written to context.jsonl.
    fn conversation(&self) -> Result<Vec<Value>> {
        let dir = self
            .home
            .session_dirs()
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("no session"))?;
        let text = std::fs::read_to_string(dir.join("context.jsonl"))?;
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let message: Value = serde_json::from_str(line)?;
            if matches!(message["role"].as_str(), Some("user" | "assistant" | "tool")) {
                out.push(message);
            }
        }
        Ok(out)
    }
}

fn contains_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.contains_key(key) || map.values().any(|v| contains_key(v, key)),
        Value::Array(items) => items.iter().any(|v| contains_key(v, key)),
        _ => false,
    }
}

/// The token endpoint of a service account: a new token per request, each lasting `lifetime` seconds.
struct Tokens {
    lifetime: u64,
    issued: AtomicUsize,
}

impl Tokens {
    fn lasting(lifetime: u64) -> Self {
        Self {
            lifetime,
            issued: AtomicUsize::new(0),
        }
    }
}

/// A token endpoint at `/token` whose tokens last `lifetime` seconds.
async fn mount_tokens(server: &MockServer, lifetime: u64) {
    Mock::given(method("POST"))
        .and(path("/token"))
        .respond_with(Tokens::lasting(lifetime))
        .mount(server)
        .await;
}

impl Respond for Tokens {
    fn respond(&self, _request: &Request) -> ResponseTemplate {
        let n = self.issued.fetch_add(1, Ordering::SeqCst) + 1;
        ResponseTemplate::new(200).set_body_json(
            json!({"access_token": format!("ya29.token-{n}"), "expires_in": self.lifetime, "token_type": "Bearer"}),
        )
    }
}

// ------------------------------------------------------------------------------------ answers per API

/// One streamed answer, built from events in the API's own shape.
struct Answer {
    api: Api,
    events: Vec<(String, Value)>,
}

impl Answer {
    fn new(api: Api) -> Self {
        Self {
            api,
            events: Vec::new(),
        }
    }

    fn event(mut self, name: &str, data: Value) -> Self {
        self.events.push((name.to_owned(), data));
        self
    }

    /// The SSE body so far.
    fn body(&self) -> String {
        self.events
            .iter()
            .map(|(name, data)| match self.api {
                // Gemini frames with CRLF and names no events.
                Api::Gemini | Api::Vertex => format!("data: {data}\r\n\r\n"),
                Api::Anthropic | Api::Responses => format!("event: {name}\ndata: {data}\n\n"),
            })
            .collect()
    }

    /// The body cut in the middle of the first event that streams a tool call: a dropped stream.
    fn dropped(&self) -> String {
        let cut = self
            .events
            .iter()
            .position(|(_, data)| {
                let text = data.to_string();
                ["partial_json", "function_call_arguments.delta", "functionCall"]
                    .iter()
                    .any(|marker| text.contains(marker))
            })
            .map_or(self.events.len(), |i| i + 1);
        let body = Self {
            api: self.api,
            events: self.events[..cut].to_vec(),
        }
        .body();
        body[..body.len() - 12].to_owned()
    }
}

/// Thinking "The user wants a.txt." with a signature, then a call of ReadFile with `arguments` (in two
/// pieces where the API streams them).
fn think_and_call(api: Api, call_id: &str, arguments: &str) -> Answer {
    let (head, tail) = arguments.split_at(arguments.len() / 2);
    let a = Answer::new(api);
    match api {
        Api::Anthropic => a
            .event("message_start", json!({"type": "message_start", "message": {"id": "msg_01think", "type": "message",
                "role": "assistant", "content": [], "model": api.model(), "stop_reason": null, "stop_sequence": null,
                "usage": {"input_tokens": 12, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 3000,
                          "output_tokens": 1}}}))
            .event("content_block_start", json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "thinking", "thinking": "", "signature": ""}}))
            .event("ping", json!({"type": "ping"}))
            .event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "thinking_delta", "thinking": "The user"}}))
            .event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "thinking_delta", "thinking": " wants a.txt."}}))
            .event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "signature_delta", "signature": "sig-anthropic"}}))
            .event("content_block_stop", json!({"type": "content_block_stop", "index": 0}))
            .event("content_block_start", json!({"type": "content_block_start", "index": 1,
                "content_block": {"type": "tool_use", "id": call_id, "name": "ReadFile", "input": {}}}))
            .event("content_block_delta", json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": head}}))
            .event("content_block_delta", json!({"type": "content_block_delta", "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": tail}}))
            .event("content_block_stop", json!({"type": "content_block_stop", "index": 1}))
            .event("message_delta", json!({"type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 80}}))
            .event("message_stop", json!({"type": "message_stop"})),
        Api::Responses => a
            .event("response.created", json!({"type": "response.created", "sequence_number": 0,
                "response": {"id": "resp_1", "object": "response", "status": "in_progress", "output": []}}))
            .event("response.output_item.added", json!({"type": "response.output_item.added", "sequence_number": 1,
                "output_index": 0, "item": {"id": "rs_1", "type": "reasoning", "summary": []}}))
            .event("response.reasoning_summary_part.added", json!({"type": "response.reasoning_summary_part.added",
                "sequence_number": 2, "item_id": "rs_1", "output_index": 0, "summary_index": 0,
                "part": {"type": "summary_text", "text": ""}}))
            .event("response.reasoning_summary_text.delta", json!({"type": "response.reasoning_summary_text.delta",
                "sequence_number": 3, "item_id": "rs_1", "output_index": 0, "summary_index": 0, "delta": "The user"}))
            .event("response.reasoning_summary_text.delta", json!({"type": "response.reasoning_summary_text.delta",
                "sequence_number": 4, "item_id": "rs_1", "output_index": 0, "summary_index": 0,
                "delta": " wants a.txt."}))
            .event("response.output_item.done", json!({"type": "response.output_item.done", "sequence_number": 5,
                "output_index": 0, "item": {"id": "rs_1", "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "The user wants a.txt."}],
                "encrypted_content": "enc-responses"}}))
            .event("response.output_item.added", json!({"type": "response.output_item.added", "sequence_number": 6,
                "output_index": 1, "item": {"id": "fc_1", "type": "function_call", "status": "in_progress",
                "arguments": "", "call_id": call_id, "name": "ReadFile"}}))
            .event("response.function_call_arguments.delta", json!({"type": "response.function_call_arguments.delta",
                "sequence_number": 7, "item_id": "fc_1", "output_index": 1, "delta": head}))
            .event("response.function_call_arguments.delta", json!({"type": "response.function_call_arguments.delta",
                "sequence_number": 8, "item_id": "fc_1", "output_index": 1, "delta": tail}))
            .event("response.output_item.done", json!({"type": "response.output_item.done", "sequence_number": 9,
                "output_index": 1, "item": {"id": "fc_1", "type": "function_call", "status": "completed",
                "arguments": arguments, "call_id": call_id, "name": "ReadFile"}}))
            .event("response.completed", json!({"type": "response.completed", "sequence_number": 10,
                "response": {"id": "resp_1", "status": "completed", "usage": {"input_tokens": 120,
                "input_tokens_details": {"cached_tokens": 100}, "output_tokens": 30,
                "output_tokens_details": {"reasoning_tokens": 20}, "total_tokens": 150}}})),
        Api::Gemini | Api::Vertex => {
            let args: Value = serde_json::from_str(arguments).unwrap_or(Value::Null);
            a.event("", json!({"candidates": [{"content": {"parts": [{"text": "The user", "thought": true}],
                    "role": "model"}, "index": 0}], "usageMetadata": {"promptTokenCount": 1200, "totalTokenCount": 1200},
                    "modelVersion": api.model(), "responseId": "resp-gemini-1"}))
                .event("", json!({"candidates": [{"content": {"parts": [{"text": " wants a.txt.", "thought": true}],
                    "role": "model"}, "index": 0}], "modelVersion": api.model(), "responseId": "resp-gemini-1"}))
                .event("", json!({"candidates": [{"content": {"parts": [{"functionCall": {"name": "ReadFile",
                    "args": args}, "thoughtSignature": "c2lnLWdlbWluaQ=="}], "role": "model"},
                    "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 1200,
                    "candidatesTokenCount": 25, "totalTokenCount": 1255, "cachedContentTokenCount": 1000,
                    "thoughtsTokenCount": 30}, "modelVersion": api.model(), "responseId": "resp-gemini-1"}))
        }
    }
}

/// A text answer in two pieces.
fn text_answer(api: Api, first: &str, second: &str) -> Answer {
    let a = Answer::new(api);
    match api {
        Api::Anthropic => a
            .event("message_start", json!({"type": "message_start", "message": {"id": "msg_01text", "type": "message",
                "role": "assistant", "content": [], "model": api.model(), "usage": {"input_tokens": 40, "output_tokens": 1}}}))
            .event("content_block_start", json!({"type": "content_block_start", "index": 0,
                "content_block": {"type": "text", "text": ""}}))
            .event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": first}}))
            .event("content_block_delta", json!({"type": "content_block_delta", "index": 0,
                "delta": {"type": "text_delta", "text": second}}))
            .event("content_block_stop", json!({"type": "content_block_stop", "index": 0}))
            .event("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 6}}))
            .event("message_stop", json!({"type": "message_stop"})),
        Api::Responses => a
            .event("response.created", json!({"type": "response.created", "response": {"id": "resp_2", "output": []}}))
            .event("response.output_item.added", json!({"type": "response.output_item.added", "output_index": 0,
                "item": {"id": "msg_2", "type": "message", "role": "assistant", "content": []}}))
            .event("response.output_text.delta", json!({"type": "response.output_text.delta", "item_id": "msg_2",
                "output_index": 0, "content_index": 0, "delta": first}))
            .event("response.output_text.delta", json!({"type": "response.output_text.delta", "item_id": "msg_2",
                "output_index": 0, "content_index": 0, "delta": second}))
            .event("response.output_item.done", json!({"type": "response.output_item.done", "output_index": 0,
                "item": {"id": "msg_2", "type": "message", "role": "assistant",
                "content": [{"type": "output_text", "text": format!("{first}{second}"), "annotations": []}]}}))
            .event("response.completed", json!({"type": "response.completed", "response": {"id": "resp_2",
                "status": "completed", "usage": {"input_tokens": 40, "output_tokens": 6}}})),
        Api::Gemini | Api::Vertex => a
            .event("", json!({"candidates": [{"content": {"parts": [{"text": first}], "role": "model"}, "index": 0}],
                "responseId": "resp-gemini-2"}))
            .event("", json!({"candidates": [{"content": {"parts": [{"text": second}], "role": "model"},
                "finishReason": "STOP", "index": 0}], "usageMetadata": {"promptTokenCount": 40,
                "candidatesTokenCount": 6, "totalTokenCount": 46}, "responseId": "resp-gemini-2"})),
    }
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body)
}

/// An error status with a body in the API's error shape.
fn api_error(api: Api, status: u16, message: &str) -> ResponseTemplate {
    let body = match api {
        Api::Anthropic => {
            let kind = match status {
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500..=599 => "api_error",
                _ => "invalid_request_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        Api::Responses => {
            json!({"error": {"message": message, "type": "invalid_request_error", "param": null, "code": null}})
        }
        Api::Gemini | Api::Vertex => {
            let kind = match status {
                429 => "RESOURCE_EXHAUSTED",
                503 => "UNAVAILABLE",
                _ => "INVALID_ARGUMENT",
            };
            json!({"error": {"code": status, "message": message, "status": kind}})
        }
    };
    ResponseTemplate::new(status).set_body_json(body)
}

/// The text the client gets for [`api_error`], as the reference words it.
fn api_error_text(api: Api, status: u16, message: &str) -> String {
    match api {
        Api::Anthropic => {
            let kind = match status {
                429 => "rate_limit_error",
                529 => "overloaded_error",
                500..=599 => "api_error",
                _ => "invalid_request_error",
            };
            format!(
                "Error code: {status} - {{'type': 'error', 'error': {{'type': '{kind}', 'message': '{message}'}}}}"
            )
        }
        Api::Responses => format!(
            "Error code: {status} - {{'error': {{'message': '{message}', 'type': 'invalid_request_error', \
             'param': None, 'code': None}}}}"
        ),
        Api::Gemini | Api::Vertex => {
            let (prefix, kind) = match status {
                429 => ("Rate limit exceeded: ", "RESOURCE_EXHAUSTED"),
                503 => ("Server error: ", "UNAVAILABLE"),
                _ => ("", "INVALID_ARGUMENT"),
            };
            format!(
                "{prefix}{status} {kind}. {{'error': {{'code': {status}, 'message': '{message}', 'status': '{kind}'}}}}"
            )
        }
    }
}

fn step_retries(messages: &[Value]) -> Vec<Value> {
    payloads(messages, "StepRetry").into_iter().cloned().collect()
}

fn texts(messages: &[Value]) -> String {
    payloads(messages, "ContentPart")
        .iter()
        .filter_map(|p| p["text"].as_str())
        .collect()
}

// ------------------------------------------------------------------------------------------------ tests

#[tokio::test]
async fn thinking_a_tool_call_its_result_and_a_second_step() -> Result<()> {
    for api in Api::ALL {
        let mocked = Mocked::start(api).await?;
        let home = TestHome::new()?;
        let file = home.work().join("a.txt");
        std::fs::write(&file, "hi there\n")?;
        let arguments = json!({"path": file.to_string_lossy()}).to_string();
        let first = think_and_call(api, "call_read_1", &arguments).body();
        let second = text_answer(api, "The file", " says hi.").body();
        let _guard = mocked.serve(vec![sse(first), sse(second)], 2).await;
        let config = mocked.config(&home, 3)?;
        let mut agent = Agent::start(home, &config, &["--thinking"]).await?;

        let (response, messages) = agent.prompt(json!("What does a.txt say?")).await?;
        assert_eq!(
            response["result"],
            json!({"status": "finished"}),
            "{api:?}: {response}"
        );
        // The thinking streams piece by piece; Anthropic and Responses close it with its signature.
        let thinks: Vec<&Value> = payloads(&messages, "ContentPart")
            .into_iter()
            .filter(|p| p["type"] == "think")
            .collect();
        let mut expected = vec![
            json!({"type": "think", "think": "The user", "encrypted": null}),
            json!({"type": "think", "think": " wants a.txt.", "encrypted": null}),
        ];
        let signature = match api {
            Api::Anthropic => Some("sig-anthropic"),
            Api::Responses => Some("enc-responses"),
            Api::Gemini | Api::Vertex => None,
        };
        if let Some(signature) = signature {
            expected.push(json!({"type": "think", "think": "", "encrypted": signature}));
        }
        assert_eq!(thinks, expected.iter().collect::<Vec<_>>(), "{api:?}");
        assert_eq!(texts(&messages), "The file says hi.", "{api:?}");

        let calls = payloads(&messages, "ToolCall");
        assert_eq!(calls.len(), 1, "{api:?}: {calls:?}");
        let call_id = calls[0]["id"].as_str().context("call id")?.to_owned();
        if api.is_google() {
            assert!(call_id.starts_with("ReadFile_"), "{call_id}");
        } else {
            assert_eq!(call_id, "call_read_1");
        }
        let results = payloads(&messages, "ToolResult");
        assert_eq!(results.len(), 1, "{api:?}");
        assert_eq!(results[0]["tool_call_id"], call_id.as_str());
        assert_eq!(
            results[0]["return_value"]["is_error"], false,
            "{api:?}: {}",
            results[0]
        );

        // Usage as each API reports it, with Anthropic's cache writes as `input_cache_creation`.
        let usage = payloads(&messages, "StatusUpdate")
            .first()
            .map(|s| s["token_usage"].clone())
            .context("no StatusUpdate")?;
        let expected_usage = match api {
            Api::Anthropic => {
                json!({"input_other": 12, "output": 80, "input_cache_read": 3000, "input_cache_creation": 2000})
            }
            Api::Responses => {
                json!({"input_other": 20, "output": 30, "input_cache_read": 100, "input_cache_creation": 0})
            }
            Api::Gemini | Api::Vertex => {
                json!({"input_other": 200, "output": 25, "input_cache_read": 1000, "input_cache_creation": 0})
            }
        };
        assert_eq!(usage, expected_usage, "{api:?}");

        let bodies = mocked.bodies().await?;
        assert_eq!(bodies.len(), 2, "{api:?}");
        check_thinking_on(api, &bodies[0]);
        check_client_tool(api, &bodies[0])?;
        check_second_request(api, &bodies[1], &call_id, &file.to_string_lossy())?;

        // The session keeps the signed thinking, joined, and the call (with Gemini's signature).
        let conversation = agent.conversation()?;
        let roles: Vec<&str> = conversation.iter().filter_map(|m| m["role"].as_str()).collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{api:?}");
        let step = &conversation[1];
        match signature {
            Some(signature) => assert_eq!(
                step["content"][0],
                json!({"type": "think", "think": "The user wants a.txt.", "encrypted": signature}),
                "{api:?}"
            ),
            None => assert_eq!(
                step["tool_calls"][0]["extras"],
                json!({"thought_signature_b64": "c2lnLWdlbWluaQ=="}),
                "{api:?}"
            ),
        }
    }
    Ok(())
}

/// The client tool as each API declares it: renamed, references inlined.
fn check_client_tool(api: Api, body: &Value) -> Result<()> {
    let tools = body["tools"].as_array().context("no tools")?;
    let declarations: Vec<&Value> = match api {
        Api::Gemini | Api::Vertex => tools.iter().map(|t| &t["functionDeclarations"][0]).collect(),
        Api::Anthropic | Api::Responses => tools.iter().collect(),
    };
    let lookup = declarations
        .iter()
        .find(|t| t["name"] == "look_up")
        .with_context(|| format!("{api:?}: the client tool is missing: {body}"))?;
    let schema = match api {
        Api::Anthropic => &lookup["input_schema"],
        Api::Responses => &lookup["parameters"],
        Api::Gemini | Api::Vertex => &lookup["parametersJsonSchema"],
    };
    assert_eq!(
        schema["properties"]["range"]["anyOf"],
        json!([{"type": "object", "properties": {"start": {"type": "integer"}}}, {"type": "null"}]),
        "{api:?}"
    );
    Ok(())
}

/// Where the thinking switch shows in a request when `--thinking` is on.
fn check_thinking_on(api: Api, body: &Value) {
    match api {
        Api::Anthropic => {
            assert_eq!(
                body["thinking"],
                json!({"type": "enabled", "budget_tokens": 32000})
            );
            assert_eq!(body["max_tokens"], 50000);
        }
        Api::Responses => {
            assert_eq!(body["reasoning"], json!({"effort": "high", "summary": "auto"}));
            assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
            assert_eq!(body["store"], false);
        }
        Api::Gemini | Api::Vertex => assert_eq!(
            body["generationConfig"]["thinkingConfig"],
            json!({"thinkingBudget": 32000, "includeThoughts": true})
        ),
    }
}

/// The second request carries the first step back: the signed thinking, the call and its result.
fn check_second_request(api: Api, body: &Value, call_id: &str, path: &str) -> Result<()> {
    match api {
        Api::Anthropic => {
            let messages = body["messages"].as_array().context("messages")?;
            assert_eq!(messages.len(), 3, "{body}");
            assert_eq!(
                messages[1],
                json!({"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "The user wants a.txt.", "signature": "sig-anthropic"},
                    {"type": "tool_use", "id": call_id, "name": "ReadFile", "input": {"path": path}},
                ]})
            );
            let result = &messages[2]["content"][0];
            assert_eq!(result["type"], "tool_result");
            assert_eq!(result["tool_use_id"], call_id);
            assert!(result.to_string().contains("hi there"), "{result}");
            // Prompt caching: the system block, the last tool, the last block of the last message.
            assert_eq!(body["system"][0]["cache_control"], json!({"type": "ephemeral"}));
            let tools = body["tools"].as_array().context("tools")?;
            assert_eq!(
                tools.last().map(|t| &t["cache_control"]),
                Some(&json!({"type": "ephemeral"}))
            );
            assert_eq!(result["cache_control"], json!({"type": "ephemeral"}));
        }
        Api::Responses => {
            let input = body["input"].as_array().context("input")?;
            assert_eq!(input[0]["role"], "developer");
            assert!(
                input.contains(
                    &json!({"summary": [{"type": "summary_text", "text": "The user wants a.txt."}],
                    "type": "reasoning", "encrypted_content": "enc-responses"})
                ),
                "{body}"
            );
            assert!(
                input.contains(
                    &json!({"arguments": json!({"path": path}).to_string(), "call_id": call_id,
                    "name": "ReadFile", "type": "function_call"})
                ),
                "{body}"
            );
            let output = input
                .iter()
                .find(|i| i["type"] == "function_call_output")
                .context("no function_call_output")?;
            assert_eq!(output["call_id"], call_id);
            assert!(output["output"].to_string().contains("hi there"), "{output}");
        }
        Api::Gemini | Api::Vertex => {
            let contents = body["contents"].as_array().context("contents")?;
            assert_eq!(contents.len(), 3, "{body}");
            assert_eq!(
                contents[1],
                json!({"role": "model", "parts": [{"functionCall": {"name": "ReadFile", "args": {"path": path}},
                    "thoughtSignature": "c2lnLWdlbWluaQ=="}]})
            );
            let response = &contents[2]["parts"][0]["functionResponse"];
            assert_eq!(contents[2]["role"], "user");
            assert_eq!(response["name"], "ReadFile");
            assert!(
                response["response"]["output"].to_string().contains("hi there"),
                "{response}"
            );
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_and_thinking_off_and_images_are_sent_natively() -> Result<()>
{
    for api in Api::ALL {
        let mocked = Mocked::start(api).await?;
        let home = TestHome::new()?;
        let limited = api_error(api, 429, "Slow down.").insert_header("retry-after", "0.2");
        let answer = text_answer(api, "Fine", ".").body();
        let _guard = mocked.serve(vec![limited, sse(answer)], 2).await;
        let config = mocked.config(&home, 3)?;
        let mut agent = Agent::start(home, &config, &[]).await?;

        let image = "data:image/png;base64,iVBORw0KGgo=";
        let input = json!([{"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": image}}]);
        let (response, messages) = agent.prompt(input).await?;
        assert_eq!(
            response["result"],
            json!({"status": "finished"}),
            "{api:?}: {response}"
        );
        assert_eq!(
            step_retries(&messages),
            [
                json!({"n": 1, "next_attempt": 2, "max_attempts": 3, "wait_s": 0.2,
                    "error_type": "APIStatusError", "status_code": 429})
            ],
            "{api:?}"
        );
        assert_eq!(texts(&messages), "Fine.");

        let bodies = mocked.bodies().await?;
        assert_eq!(bodies.len(), 2);
        // Without `--thinking`, `default_thinking = false` switches thinking off where the API can say so.
        let (user, thinking) = match api {
            Api::Anthropic => (
                bodies[1]["messages"][0]["content"].clone(),
                bodies[1]["thinking"].clone(),
            ),
            Api::Responses => (
                bodies[1]["input"][1]["content"].clone(),
                bodies[1]["reasoning"].clone(),
            ),
            Api::Gemini | Api::Vertex => (
                bodies[1]["contents"][0]["parts"].clone(),
                bodies[1]["generationConfig"]["thinkingConfig"].clone(),
            ),
        };
        let (expected_user, expected_thinking) = match api {
            Api::Anthropic => (
                json!([{"type": "text", "text": "What is this?"}, {"type": "image", "source": {"type": "base64",
                    "data": "iVBORw0KGgo=", "media_type": "image/png"}, "cache_control": {"type": "ephemeral"}}]),
                json!({"type": "disabled"}),
            ),
            Api::Responses => (
                json!([{"type": "input_text", "text": "What is this?"},
                       {"type": "input_image", "detail": "auto", "image_url": image}]),
                Value::Null,
            ),
            Api::Gemini | Api::Vertex => (
                json!([{"text": "What is this?"}, {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}]),
                json!({"thinkingBudget": 0, "includeThoughts": false}),
            ),
        };
        assert_eq!((user, thinking), (expected_user, expected_thinking), "{api:?}");
    }
    Ok(())
}

#[tokio::test]
async fn overloaded_answers_are_retried() -> Result<()> {
    for api in Api::ALL {
        let mocked = Mocked::start(api).await?;
        let home = TestHome::new()?;
        // Anthropic says "overloaded" with HTTP 529, or with an error event once the stream has begun;
        // OpenAI and Google with a 503.
        let mut faults: Vec<(ResponseTemplate, u16)> = Vec::new();
        match api {
            Api::Anthropic => {
                faults.push((api_error(api, 529, "Overloaded"), 529));
                let started = text_answer(api, "Hal", "f").event(
                    "error",
                    json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
                );
                let mut events = started.events;
                events.drain(3..events.len() - 1);
                faults.push((sse(Answer { api, events }.body()), 529));
            }
            Api::Responses | Api::Gemini | Api::Vertex => {
                faults.push((api_error(api, 503, "The model is overloaded."), 503));
            }
        }
        let config = mocked.config(&home, 3)?;
        let mut agent = Agent::start(home, &config, &[]).await?;
        for (i, (fault, status)) in faults.into_iter().enumerate() {
            let answer = text_answer(api, "Back", &format!(" {i}.")).body();
            let guard = mocked.serve(vec![fault, sse(answer)], 2).await;
            let (response, messages) = agent.prompt(json!(format!("try {i}"))).await?;
            assert_eq!(
                response["result"],
                json!({"status": "finished"}),
                "{api:?} {i}: {response}"
            );
            let retries = step_retries(&messages);
            assert_eq!(retries.len(), 1, "{api:?} {i}: {retries:?}");
            assert_eq!(retries[0]["status_code"], status, "{api:?} {i}");
            assert_eq!(retries[0]["error_type"], "APIStatusError");
            drop(guard);
        }
        // Only the answers that finished are in the context; the half answer before the error event is not.
        let assistants: Vec<Value> = agent
            .conversation()?
            .into_iter()
            .filter(|m| m["role"] == "assistant")
            .map(|m| m["content"].clone())
            .collect();
        let expected: Vec<Value> = (0..assistants.len())
            .map(|i| json!(format!("Back {i}.")))
            .collect();
        assert_eq!(assistants, expected, "{api:?}");
    }
    Ok(())
}

#[tokio::test]
async fn a_dropped_stream_is_retried_and_leaves_nothing_behind() -> Result<()> {
    for api in Api::ALL {
        let mocked = Mocked::start(api).await?;
        let home = TestHome::new()?;
        let file = home.work().join("a.txt");
        std::fs::write(&file, "hi\n")?;
        let arguments = json!({"path": file.to_string_lossy()}).to_string();
        // Cut in the middle of the tool call: acting on half of it would be worse than asking again.
        let dropped = think_and_call(api, "call_cut", &arguments).dropped();
        let answer = text_answer(api, "Asked", " again.").body();
        let _guard = mocked.serve(vec![sse(dropped), sse(answer)], 2).await;
        let config = mocked.config(&home, 3)?;
        let mut agent = Agent::start(home, &config, &[]).await?;
        let (response, messages) = agent.prompt(json!("read a.txt")).await?;
        assert_eq!(
            response["result"],
            json!({"status": "finished"}),
            "{api:?}: {response}"
        );
        assert_eq!(
            step_retries(&messages)
                .iter()
                .map(|r| (r["error_type"].clone(), r["status_code"].clone()))
                .collect::<Vec<_>>(),
            [(json!("APIConnectionError"), Value::Null)],
            "{api:?}"
        );
        // A call the client saw is answered as dropped (docs/protocol.md L3); none ran.
        for result in payloads(&messages, "ToolResult") {
            assert_eq!(
                (
                    &result["return_value"]["is_error"],
                    &result["return_value"]["message"]
                ),
                (
                    &json!(true),
                    &json!("This call was dropped: the model's answer broke off before it was complete.")
                ),
                "{api:?}: a cut call ran"
            );
        }
        let conversation = agent.conversation()?;
        assert_eq!(
            conversation.last(),
            Some(&json!({"role": "assistant", "content": "Asked again."})),
            "{api:?}"
        );
        assert_eq!(conversation.len(), 2, "{api:?}: {conversation:?}");
    }
    Ok(())
}

#[tokio::test]
async fn errors_reach_the_client_in_the_providers_words_and_the_budget_is_the_number_of_requests()
-> Result<()> {
    for api in Api::ALL {
        let mocked = Mocked::start(api).await?;
        let home = TestHome::new()?;
        let config = mocked.config(&home, 3)?;
        let mut agent = Agent::start(home, &config, &[]).await?;
        // A bad request: one request, no retry.
        let guard = mocked.serve(vec![api_error(api, 400, "Bad request.")], 1).await;
        let (response, messages) = agent.prompt(json!("hi")).await?;
        assert_eq!(
            response["error"],
            json!({"code": -32003, "message": api_error_text(api, 400, "Bad request."), "data": null}),
            "{api:?}"
        );
        assert!(step_retries(&messages).is_empty(), "{api:?}");
        drop(guard);
        // A server that stays unavailable: exactly `max_retries_per_step` requests, then its text.
        let guard = mocked.serve(vec![api_error(api, 503, "Unavailable.")], 3).await;
        let (response, messages) = agent.prompt(json!("hi again")).await?;
        assert_eq!(
            response["error"],
            json!({"code": -32003, "message": api_error_text(api, 503, "Unavailable."), "data": null}),
            "{api:?}"
        );
        let attempts: Vec<Value> = step_retries(&messages)
            .iter()
            .map(|r| r["next_attempt"].clone())
            .collect();
        assert_eq!(attempts, [json!(2), json!(3)], "{api:?}");
        drop(guard);
        assert!(agent.conversation()?.iter().all(|m| m["role"] != "assistant"));
    }
    Ok(())
}

#[tokio::test]
async fn a_silent_api_is_timed_out_and_retried() -> Result<()> {
    for api in Api::ALL {
        let mocked = Mocked::start(api).await?;
        let home = TestHome::new()?;
        let silent = sse(text_answer(api, "never", "").body()).set_delay(std::time::Duration::from_secs(60));
        let _guard = mocked
            .serve(vec![silent, sse(text_answer(api, "On", " time.").body())], 2)
            .await;
        let mut config = mocked.config(&home, 3)?;
        config["providers"]["p"]["env"]["KIMI_AGENT_PROVIDER_READ_TIMEOUT_S"] = json!("0.5");
        let mut agent = Agent::start(home, &config, &[]).await?;
        let (response, messages) = agent.prompt(json!("hi")).await?;
        assert_eq!(
            response["result"],
            json!({"status": "finished"}),
            "{api:?}: {response}"
        );
        let retries = step_retries(&messages);
        assert_eq!(retries.len(), 1, "{api:?}");
        assert_eq!(retries[0]["error_type"], "APITimeoutError", "{api:?}");
        assert_eq!(texts(&messages), "On time.");
    }
    Ok(())
}

/// The claims of a JWT, without checking its signature (kimi-llm's unit tests check that).
fn jwt_claims(jwt: &str) -> Result<(Value, Value)> {
    let mut parts = jwt.split('.');
    let mut decode = |what: &str| -> Result<Value> {
        let part = parts.next().ok_or_else(|| anyhow!("no {what} in {jwt}"))?;
        Ok(serde_json::from_slice(&URL_SAFE_NO_PAD.decode(part)?)?)
    };
    Ok((decode("header")?, decode("claims")?))
}

/// The form fields of a token request.
fn form(request: &Request) -> Vec<(String, String)> {
    form_urlencoded::parse(&request.body).into_owned().collect()
}

#[tokio::test]
async fn vertex_trades_a_signed_assertion_for_a_token_reuses_it_and_refreshes_it_before_expiry() -> Result<()>
{
    // Lifetimes: one that lasts (reused for every request), one inside the refresh margin (renewed each time).
    for (lifetime, expected_tokens) in [
        (3600, ["ya29.token-1", "ya29.token-1"]),
        (100, ["ya29.token-1", "ya29.token-2"]),
    ] {
        let server = MockServer::start().await;
        mount_tokens(&server, lifetime).await;
        let mocked = Mocked {
            api: Api::Vertex,
            server,
        };
        let home = TestHome::new()?;
        let answers = vec![
            sse(text_answer(Api::Vertex, "One", ".").body()),
            sse(text_answer(Api::Vertex, "Two", ".").body()),
        ];
        let _guard = mocked.serve(answers, 2).await;
        let config = mocked.config(&home, 3)?;
        let mut agent = Agent::start(home, &config, &[]).await?;
        for prompt in ["first", "second"] {
            let (response, _) = agent.prompt(json!(prompt)).await?;
            assert_eq!(response["result"], json!({"status": "finished"}), "{response}");
        }
        let requests = mocked.server.received_requests().await.unwrap_or_default();
        let used: Vec<String> = requests
            .iter()
            .filter(|r| r.url.path() == Api::Vertex.stream_path())
            .filter_map(|r| r.headers.get("authorization")?.to_str().ok().map(str::to_owned))
            .collect();
        assert_eq!(
            used,
            expected_tokens.map(|t| format!("Bearer {t}")),
            "lifetime {lifetime}"
        );
        let grants: Vec<&Request> = requests.iter().filter(|r| r.url.path() == "/token").collect();
        let distinct = if lifetime == 3600 { 1 } else { 2 };
        assert_eq!(grants.len(), distinct, "lifetime {lifetime}");
        let fields = form(grants[0]);
        assert_eq!(
            fields[0],
            (
                "grant_type".into(),
                "urn:ietf:params:oauth:grant-type:jwt-bearer".into()
            )
        );
        assert_eq!(fields[1].0, "assertion");
        let (header, claims) = jwt_claims(&fields[1].1)?;
        assert_eq!(header, json!({"alg": "RS256", "typ": "JWT", "kid": "key-1"}));
        assert_eq!(claims["iss"], SERVICE_ACCOUNT);
        assert_eq!(claims["aud"], format!("{}/token", mocked.server.uri()));
        assert_eq!(claims["scope"], "https://www.googleapis.com/auth/cloud-platform");
        assert_eq!(
            claims["exp"]
                .as_u64()
                .zip(claims["iat"].as_u64())
                .map(|(e, i)| e - i),
            Some(3600)
        );
    }
    Ok(())
}

#[tokio::test]
async fn vertex_finds_application_default_credentials_from_gcloud_and_the_metadata_server() -> Result<()> {
    for source in ["gcloud", "metadata"] {
        let server = MockServer::start().await;
        mount_tokens(&server, 3600).await;
        Mock::given(method("GET"))
            .and(path(
                "/computeMetadata/v1/instance/service-accounts/default/token",
            ))
            .and(wiremock::matchers::header("metadata-flavor", "Google"))
            .respond_with(Tokens::lasting(3600))
            .mount(&server)
            .await;
        let mocked = Mocked {
            api: Api::Vertex,
            server,
        };
        let home = TestHome::new()?;
        let mut config = mocked.config(&home, 3)?;
        let gcloud = home.home().join("gcloud");
        std::fs::create_dir_all(&gcloud)?;
        // The key file of the other tests is not named: the credentials must be found.
        let mut env = json!({"CLOUDSDK_CONFIG": gcloud.to_string_lossy(),
                             "GOOGLE_CLOUD_PROJECT": "kimi-test", "GOOGLE_CLOUD_LOCATION": "us-central1"});
        match source {
            "gcloud" => std::fs::write(
                gcloud.join("application_default_credentials.json"),
                json!({"type": "authorized_user", "client_id": "cid.apps.googleusercontent.com",
                       "client_secret": "secret", "refresh_token": "1//refresh+token",
                       "quota_project_id": "quota-p", "token_uri": format!("{}/token", mocked.server.uri())})
                .to_string(),
            )?,
            _ => env["GCE_METADATA_HOST"] = json!(mocked.server.address().to_string()),
        }
        config["providers"]["p"]["env"] = env;
        let _guard = mocked
            .serve(vec![sse(text_answer(Api::Vertex, "Hi", ".").body())], 1)
            .await;
        let mut agent = Agent::start(home, &config, &[]).await?;
        let (response, _) = agent.prompt(json!("hi")).await?;
        assert_eq!(
            response["result"],
            json!({"status": "finished"}),
            "{source}: {response}"
        );

        let requests = mocked.server.received_requests().await.unwrap_or_default();
        let model = requests
            .iter()
            .find(|r| r.url.path() == Api::Vertex.stream_path())
            .context("no model request")?;
        let header = |name: &str| {
            model
                .headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        assert_eq!(
            header("authorization").as_deref(),
            Some("Bearer ya29.token-1"),
            "{source}"
        );
        match source {
            "gcloud" => {
                assert_eq!(header("x-goog-user-project").as_deref(), Some("quota-p"));
                let grant = requests
                    .iter()
                    .find(|r| r.url.path() == "/token")
                    .context("no token request")?;
                assert_eq!(
                    form(grant),
                    [
                        ("grant_type".to_owned(), "refresh_token".to_owned()),
                        (
                            "client_id".to_owned(),
                            "cid.apps.googleusercontent.com".to_owned()
                        ),
                        ("client_secret".to_owned(), "secret".to_owned()),
                        ("refresh_token".to_owned(), "1//refresh+token".to_owned()),
                    ]
                );
            }
            _ => assert_eq!(header("x-goog-user-project"), None),
        }
    }
    Ok(())
}

#[tokio::test]
async fn vertex_without_credentials_says_how_to_set_them_up() -> Result<()> {
    let mocked = Mocked::start(Api::Vertex).await?;
    let home = TestHome::new()?;
    let mut config = mocked.config(&home, 3)?;
    let missing = home.home().join("nowhere.json");
    config["providers"]["p"]["env"]["GOOGLE_APPLICATION_CREDENTIALS"] = json!(missing.to_string_lossy());
    let _guard = mocked.serve(vec![], 0).await;
    let mut agent = Agent::start(home, &config, &[]).await?;
    let (response, messages) = agent.prompt(json!("hi")).await?;
    assert_eq!(
        response["error"],
        json!({"code": -32003, "data": null,
               "message": format!("Vertex AI credentials: File {} was not found.", missing.display())})
    );
    assert!(step_retries(&messages).is_empty());
    // The server keeps serving.
    agent.wire.assert_alive().await
}

/// `google_genai` is the reference's other name of `gemini`: the same API, key and path.
#[tokio::test]
async fn google_genai_is_the_gemini_api_under_its_other_name() -> Result<()> {
    let mocked = Mocked::start(Api::Gemini).await?;
    let home = TestHome::new()?;
    let _guard = mocked
        .serve(vec![sse(text_answer(Api::Gemini, "Hello", " there.").body())], 1)
        .await;
    let mut config = mocked.config(&home, 3)?;
    config["providers"]["p"]["type"] = json!("google_genai");
    let mut agent = Agent::start(home, &config, &[]).await?;
    let (response, messages) = agent.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}), "{response}");
    assert_eq!(texts(&messages), "Hello there.");
    // `bodies` checks the path, `alt=sse` and `x-goog-api-key` of what arrived.
    let bodies = mocked.bodies().await?;
    assert_eq!(bodies.len(), 1);
    assert_eq!(
        bodies[0]["contents"],
        json!([{"role": "user", "parts": [{"text": "hi"}]}])
    );
    Ok(())
}

/// A 401 from Vertex AI (a revoked token) drops the cached token: the next request trades the
/// credentials for a new one instead of sending the refused token again.
#[tokio::test]
async fn vertex_fetches_a_new_token_after_a_401() -> Result<()> {
    let mocked = Mocked::start(Api::Vertex).await?;
    let home = TestHome::new()?;
    let refused = api_error(
        Api::Vertex,
        401,
        "Request had invalid authentication credentials.",
    );
    let answer = sse(text_answer(Api::Vertex, "Back", ".").body());
    let _guard = mocked.serve(vec![refused, answer], 2).await;
    let config = mocked.config(&home, 3)?;
    let mut agent = Agent::start(home, &config, &[]).await?;

    let (response, messages) = agent.prompt(json!("first")).await?;
    assert_eq!(response["error"]["code"], -32003, "{response}");
    assert!(step_retries(&messages).is_empty(), "a 401 is not retried");
    let (response, _) = agent.prompt(json!("second")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}), "{response}");

    let requests = mocked.server.received_requests().await.unwrap_or_default();
    let used: Vec<&str> = requests
        .iter()
        .filter(|r| r.url.path() == Api::Vertex.stream_path())
        .filter_map(|r| r.headers.get("authorization")?.to_str().ok())
        .collect();
    // Tokens last an hour: only the 401 explains the second one.
    assert_eq!(used, ["Bearer ya29.token-1", "Bearer ya29.token-2"]);
    let grants = requests.iter().filter(|r| r.url.path() == "/token").count();
    assert_eq!(grants, 2);
    Ok(())
}

/// `--record-llm` records a turn of these providers like any other (the recorder wraps every
/// provider type): a line per call naming the provider type, the answer with its signatures, no key.
/// A `_cassette` provider replays it in another home with the API gone: the same calls, results,
/// thinking and session files.
#[tokio::test]
async fn a_recorded_turn_of_each_provider_replays_with_the_api_gone() -> Result<()> {
    for api in [Api::Anthropic, Api::Gemini] {
        let mocked = Mocked::start(api).await?;
        let recorded = TestHome::new()?;
        let cassette = recorded.root.path().join("calls.jsonl");
        std::fs::write(recorded.work().join("a.txt"), "hi there\n")?;
        let path = recorded.work().join("a.txt");
        let arguments = json!({"path": path.to_string_lossy()}).to_string();
        let first = think_and_call(api, "call_read_1", &arguments).body();
        let second = text_answer(api, "The file", " says hi.").body();
        let guard = mocked.serve(vec![sse(first), sse(second)], 2).await;
        let config = mocked.config(&recorded, 3)?;
        let cassette_arg = cassette.to_string_lossy().into_owned();
        let record = ["--thinking", "--record-llm", cassette_arg.as_str()];
        let mut agent = Agent::start(recorded, &config, &record).await?;
        let (answer, transcript) = agent.prompt(json!("What does a.txt say?")).await?;
        assert_eq!(
            answer["result"],
            json!({"status": "finished"}),
            "{api:?}: {answer}"
        );
        assert!(agent.wire.wait_exit().await?.success());
        drop(guard);
        drop(mocked);
        let recorded = agent.home;

        let text = std::fs::read_to_string(&cassette)?;
        assert!(!text.contains(API_KEY), "{api:?}: the key reached the cassette");
        let lines: Vec<Value> = text.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
        assert_eq!(lines.len(), 2, "{api:?}");
        assert_eq!(lines[0]["provider"], api.provider_type());
        assert_eq!(lines[0]["model"], api.model());
        let step = &lines[0]["answer"];
        match api {
            Api::Anthropic => assert_eq!(
                step["content"],
                json!([{"type": "think", "think": "The user wants a.txt.", "encrypted": "sig-anthropic"}])
            ),
            _ => assert_eq!(
                step["tool_calls"][0]["extras"],
                json!({"thought_signature_b64": "c2lnLWdlbWluaQ=="})
            ),
        }
        assert_eq!(
            lines[1]["answer"]["content"],
            json!([{"type": "text", "text": "The file says hi."}])
        );

        let replayed = TestHome::new()?;
        std::fs::write(replayed.work().join("a.txt"), "hi there\n")?;
        let tape = json!({
            "default_model": "m",
            "models": {"m": {"provider": "tape", "model": api.model(), "max_context_size": MAX_CONTEXT,
                             "capabilities": ["thinking", "image_in"]}},
            "providers": {"tape": {"type": "_cassette", "base_url": cassette, "api_key": ""}},
            "loop_control": {"max_retries_per_step": 3, "max_steps_per_turn": 20},
        });
        let mut again = Agent::start(replayed, &tape, &["--thinking"]).await?;
        let (replay_answer, replay_transcript) = again.prompt(json!("What does a.txt say?")).await?;
        assert_eq!(
            replay_answer["result"], answer["result"],
            "{api:?}: {replay_answer}"
        );
        assert!(again.wire.wait_exit().await?.success());
        let replayed = again.home;

        // The cassette holds answers whole, so the thinking and a call's arguments arrive in one
        // piece instead of streamed ones (the session files below hold them joined, and equal); the
        // calls, their results and the usage the client sees are the same.
        let (recorded_root, replayed_root) = (recorded.root.path(), replayed.root.path());
        let calls = |messages: &[Value]| {
            payloads(messages, "ToolCall")
                .into_iter()
                .map(|c| (c["id"].clone(), c["function"]["name"].clone()))
                .collect::<Vec<_>>()
        };
        assert_eq!(calls(&replay_transcript), calls(&transcript), "{api:?}");
        for kind in ["ToolResult", "StatusUpdate"] {
            let of = |messages: &[Value], root| {
                payloads(messages, kind)
                    .into_iter()
                    .map(|p| comparable(p, root))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                of(&replay_transcript, replayed_root),
                of(&transcript, recorded_root),
                "{api:?}: {kind}"
            );
        }
        assert_eq!(texts(&replay_transcript), "The file says hi.");
        let dir = |home: &TestHome| home.session_dirs().into_iter().next().context("no session");
        for file in ["context.jsonl", "wire.jsonl"] {
            assert_eq!(
                records(&dir(&replayed)?.join(file), replayed_root)?,
                records(&dir(&recorded)?.join(file), recorded_root)?,
                "{api:?}: {file}"
            );
        }
    }
    Ok(())
}
