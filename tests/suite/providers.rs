//! The `kimi` and `openai_legacy` providers through the binary. Each test starts its own mock
//! OpenAI-compatible server (wiremock, or a hand-written TCP server where wiremock cannot misbehave
//! enough), points a provider's `base_url` at it and drives `kimi-agent --wire`. The streamed bodies
//! are built chunk by chunk in the shapes Kimi and OpenAI send (usage inside the choice with a top-level
//! `cached_tokens`, or in a last chunk without choices), and every request the server receives is
//! checked for what a provider must send.

use anyhow::{Context as _, Result, anyhow, bail};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockGuard, MockServer, Request, ResponseTemplate};

use crate::common::mock_model::Seq;
use crate::common::{READ_TIMEOUT, TestHome, WireProcess, init_with_error_data, payloads};

/// Our knob that scales the retry backoff; 0.01 turns the reference's 0.3 s into 3 ms.
const BACKOFF_SCALE_ENV: &str = "KIMI_AGENT_RETRY_BACKOFF_SCALE";
/// The model's context window in every config here.
const MAX_CONTEXT: u64 = 100_000;
/// Where every provider posts under the mock's `/v1` base URL.
const COMPLETIONS: &str = "/v1/chat/completions";

/// Which server dialect a test speaks, and so which provider type it configures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Kimi,
    OpenAi,
}

impl Shape {
    const BOTH: [Self; 2] = [Self::Kimi, Self::OpenAi];

    fn provider_type(self) -> &'static str {
        match self {
            Self::Kimi => "kimi",
            Self::OpenAi => "openai_legacy",
        }
    }

    /// A tool call id as this server spells them.
    fn call_id(self, n: usize) -> String {
        match self {
            Self::Kimi => format!("functions.ReadFile:{n}"),
            Self::OpenAi => format!("call_{n}abcXYZ"),
        }
    }
}

/// Token counts of an answer: prompt (cache hits included), completion, cache hits.
#[derive(Debug, Clone, Copy)]
struct Usage(u64, u64, u64);

impl Usage {
    /// The `token_usage` the agent reports for it.
    fn expected(self) -> Value {
        let Self(prompt, completion, cached) = self;
        json!({"input_other": prompt - cached, "output": completion, "input_cache_read": cached,
               "input_cache_creation": 0})
    }
}

/// One streamed answer, built chunk by chunk as the server would send it.
struct Answer {
    shape: Shape,
    id: String,
    reasoning_key: &'static str,
    chunks: Vec<Value>,
}

impl Answer {
    fn new(shape: Shape, id: &str) -> Self {
        Self {
            shape,
            id: id.to_owned(),
            reasoning_key: "reasoning_content",
            chunks: Vec::new(),
        }
    }

    /// Reasoning travels under `key` (an `openai_legacy` gateway with its own `reasoning_key`).
    fn reasoning_key(mut self, key: &'static str) -> Self {
        self.reasoning_key = key;
        self
    }

    fn chunk(&self, delta: Value, finish_reason: Value) -> Value {
        match self.shape {
            Shape::Kimi => json!({
                "id": self.id, "object": "chat.completion.chunk", "created": 1_764_400_000,
                "model": "kimi-k2-turbo-preview",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
                "system_fingerprint": "fpv0_1a2b3c",
            }),
            Shape::OpenAi => json!({
                "id": self.id, "object": "chat.completion.chunk", "created": 1_764_400_003,
                "model": "gpt-4.1", "service_tier": "default", "system_fingerprint": "fp_abc",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}],
                "usage": null,
            }),
        }
    }

    /// Adds a chunk carrying `delta`; the first one also says who speaks, as real servers do.
    fn delta(mut self, mut delta: Value) -> Self {
        if self.chunks.is_empty() {
            delta["role"] = json!("assistant");
        }
        let chunk = self.chunk(delta, Value::Null);
        self.chunks.push(chunk);
        self
    }

    fn think(self, text: &str) -> Self {
        let key = self.reasoning_key;
        self.delta(json!({ key: text }))
    }

    fn text(self, text: &str) -> Self {
        self.delta(json!({"content": text}))
    }

    /// A tool call streamed at index 0, as gateways that reuse the index for every call send it: the
    /// opening delta with id and name, then one delta per argument piece.
    fn tool_call(mut self, id: &str, name: &str, arguments: &[&str]) -> Self {
        self = self.delta(json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
            "function": {"name": name, "arguments": ""}}]}));
        for piece in arguments {
            self = self.delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]}));
        }
        self
    }

    /// The chunks so far without an ending: a stream cut short.
    fn unfinished(&self) -> String {
        sse_body(&self.chunks)
    }

    /// The whole body: a finishing chunk with the usage where this server puts it, then `[DONE]`.
    fn finish(self, reason: &str, usage: Usage) -> String {
        let Usage(prompt, completion, cached) = usage;
        let mut chunks = self.chunks.clone();
        match self.shape {
            Shape::Kimi => {
                let mut last = self.chunk(json!({}), json!(reason));
                last["choices"][0]["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion,
                    "total_tokens": prompt + completion, "cached_tokens": cached});
                chunks.push(last);
            }
            Shape::OpenAi => {
                chunks.push(self.chunk(json!({}), json!(reason)));
                let mut usage_chunk = self.chunk(json!({}), Value::Null);
                usage_chunk["choices"] = json!([]);
                usage_chunk["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion,
                    "total_tokens": prompt + completion,
                    "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
                    "completion_tokens_details": {"reasoning_tokens": 0}});
                chunks.push(usage_chunk);
            }
        }
        sse_body(&chunks) + "data: [DONE]\n\n"
    }
}

fn sse_body(chunks: &[Value]) -> String {
    chunks.iter().map(|c| format!("data: {c}\n\n")).collect()
}

/// A 200 answer streaming `body`.
fn sse(body: impl Into<String>) -> ResponseTemplate {
    ResponseTemplate::new(200)
        .insert_header("content-type", "text/event-stream")
        .set_body_string(body.into())
}

/// An error status with a JSON body in OpenAI's error shape.
fn api_error(status: u16, message: &str, kind: &str) -> ResponseTemplate {
    ResponseTemplate::new(status).set_body_json(json!({"error": {"message": message, "type": kind}}))
}

/// A one-step text answer.
fn text_answer(shape: Shape, text: &str) -> String {
    Answer::new(shape, "chatcmpl-text")
        .text(text)
        .finish("stop", Usage(30, 3, 0))
}

/// Serves `templates` in order until the guard drops, which fails the test unless exactly `expected`
/// requests arrived.
async fn mount(server: &MockServer, templates: Vec<ResponseTemplate>, expected: u64) -> MockGuard {
    Mock::given(method("POST"))
        .and(path(COMPLETIONS))
        .respond_with(Seq::new(templates))
        .expect(expected)
        .mount_as_scoped(server)
        .await
}

/// A config whose only model uses provider `shape` at `base_url` (the mock's `/v1`).
fn config(shape: Shape, base_url: &str, max_retries_per_step: u32) -> Value {
    json!({
        "default_model": "m",
        "models": {"m": {"provider": "p", "model": "kimi-test", "max_context_size": MAX_CONTEXT}},
        "providers": {"p": {"type": shape.provider_type(), "base_url": base_url, "api_key": "sk-test"}},
        "loop_control": {"max_retries_per_step": max_retries_per_step, "max_steps_per_turn": 20},
    })
}

/// The `initialize` a test client sends; its name and version must reach the User-Agent.
fn init_params(external_tools: Value) -> Value {
    json!({
        "protocol_version": "1.10",
        "client": {"name": "test-client", "version": "9.9"},
        "external_tools": external_tools,
    })
}

/// The binary for `config`, initialized, with `env` (e.g. the backoff scale) set for it only.
async fn start(home: TestHome, config: &Value, args: &[&str], env: &[(&str, &str)]) -> Result<Agent> {
    let mut home = home.with_config(config)?;
    for arg in args {
        home = home.arg(arg);
    }
    let mut wire = WireProcess::spawn_with_env(&home, home.args(), env).await?;
    wire.initialize(init_params(json!([]))).await?;
    Ok(Agent { home, wire })
}

/// [`start`] with retries that wait milliseconds.
async fn start_fast(home: TestHome, config: &Value, args: &[&str]) -> Result<Agent> {
    start(home, config, args, &[(BACKOFF_SCALE_ENV, "0.01")]).await
}

struct Agent {
    home: TestHome,
    wire: WireProcess,
}

impl Agent {
    fn session_dir(&self) -> Result<std::path::PathBuf> {
        self.home
            .session_dirs()
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("no session directory"))
    }

    fn session_id(&self) -> Result<String> {
        let dir = self.session_dir()?;
        Ok(dir
            .file_name()
            .context("session dir name")?
            .to_string_lossy()
            .into_owned())
    }

    /// The user and assistant messages of the session's context.jsonl, as written.
    fn conversation(&self) -> Result<Vec<Value>> {
        let path = self.session_dir()?.join("context.jsonl");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let message: Value =
                serde_json::from_str(line).with_context(|| format!("context.jsonl line: {line}"))?;
            if matches!(message["role"].as_str(), Some("user" | "assistant" | "tool")) {
                out.push(message);
            }
        }
        Ok(out)
    }

    /// Sends `prompt` and returns the response and everything streamed before it.
    async fn prompt(&mut self, text: &str) -> Result<(Value, Vec<Value>)> {
        self.wire.prompt(json!(text)).await
    }
}

/// Checks what every request to the provider must carry, and returns its body.
fn check_request(request: &Request, shape: Shape, session_id: &str) -> Result<Value> {
    let body: Value = serde_json::from_slice(&request.body).context("request body is not JSON")?;
    let user_agent = request
        .headers
        .get("user-agent")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert_eq!(
        user_agent,
        format!("kimi-agent/{} test-client/9.9", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(
        request.headers.get("authorization").and_then(|v| v.to_str().ok()),
        Some("Bearer sk-test")
    );
    assert_eq!(body["model"], "kimi-test");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_tool_messages_answer_calls(&body);
    for key in ["$ref", "$defs", "definitions"] {
        assert!(
            !contains_key(&body["tools"], key),
            "`{key}` reached the provider: {}",
            body["tools"]
        );
    }
    match shape {
        Shape::Kimi => {
            assert_eq!(body["prompt_cache_key"], session_id);
            let max = body["max_completion_tokens"]
                .as_u64()
                .ok_or_else(|| anyhow!("no max_completion_tokens in {body}"))?;
            // Bounded by what the context has left: the window minus the input and a safety margin.
            assert!(
                max > 0 && max <= MAX_CONTEXT - 1024,
                "max_completion_tokens {max}"
            );
        }
        Shape::OpenAi => {
            assert_eq!(body.get("prompt_cache_key"), None);
            // Only an explicit cap is sent to other servers, and none is configured.
            assert_eq!(body.get("max_completion_tokens"), None);
        }
    }
    Ok(body)
}

/// Every `role:"tool"` message follows an assistant message that asked for that tool call id, with only
/// other tool messages in between.
fn assert_tool_messages_answer_calls(body: &Value) {
    let mut open: Vec<&str> = Vec::new();
    for (i, message) in body["messages"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        match message["role"].as_str() {
            Some("assistant") => {
                open = message["tool_calls"]
                    .as_array()
                    .map(|calls| calls.iter().filter_map(|c| c["id"].as_str()).collect())
                    .unwrap_or_default();
            }
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                assert!(
                    open.contains(&id),
                    "message {i}: tool result {id:?} answers no preceding call ({open:?})"
                );
            }
            _ => open.clear(),
        }
    }
}

fn contains_key(value: &Value, key: &str) -> bool {
    match value {
        Value::Object(map) => map.contains_key(key) || map.values().any(|v| contains_key(v, key)),
        Value::Array(items) => items.iter().any(|v| contains_key(v, key)),
        _ => false,
    }
}

/// The requests the server received, each checked, as bodies.
async fn checked_bodies(server: &MockServer, shape: Shape, session_id: &str) -> Result<Vec<Value>> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|r| check_request(r, shape, session_id))
        .collect()
}

fn result_of(response: &Value) -> &Value {
    &response["result"]
}

#[tokio::test]
async fn text_turn_with_usage_in_the_choice_or_at_top_level() -> Result<()> {
    for shape in Shape::BOTH {
        let server = MockServer::start().await;
        let body = Answer::new(shape, "chatcmpl-text-1")
            .text("Hello")
            .text(", world.")
            .finish("stop", Usage(120, 4, 100));
        let _guard = mount(&server, vec![sse(body)], 1).await;
        let config = config(shape, &format!("{}/v1", server.uri()), 3);
        let mut agent = start_fast(TestHome::new()?, &config, &[]).await?;

        let (response, messages) = agent.prompt("Say hello").await?;
        assert_eq!(result_of(&response), &json!({"status": "finished"}), "{shape:?}");
        assert_eq!(
            payloads(&messages, "ContentPart"),
            [
                &json!({"type": "text", "text": "Hello"}),
                &json!({"type": "text", "text": ", world."})
            ]
        );
        assert_eq!(
            payloads(&messages, "StatusUpdate"),
            [&json!({
                "context_usage": 120.0 / MAX_CONTEXT as f64, "context_tokens": 120,
                "max_context_tokens": MAX_CONTEXT, "token_usage": Usage(120, 4, 100).expected(),
                "message_id": "chatcmpl-text-1", "plan_mode": false, "mcp_status": null,
            })],
            "{shape:?}"
        );
        let bodies = checked_bodies(&server, shape, &agent.session_id()?).await?;
        // Without `--thinking`, `default_thinking = false` switches thinking off explicitly (reference).
        match shape {
            Shape::Kimi => assert_eq!(bodies[0]["thinking"], json!({"type": "disabled"})),
            Shape::OpenAi => assert_eq!(bodies[0].get("reasoning_effort"), Some(&Value::Null)),
        }
        let messages = bodies[0]["messages"].as_array().context("messages")?;
        assert_eq!(messages[0]["role"], "system");
        assert_eq!(messages[1..], [json!({"role": "user", "content": "Say hello"})]);
        assert_eq!(
            agent.conversation()?.last(),
            Some(&json!({"role": "assistant", "content": "Hello, world."}))
        );
    }
    Ok(())
}

#[tokio::test]
async fn thinking_turn_streams_think_parts_and_sends_them_back() -> Result<()> {
    for shape in Shape::BOTH {
        let server = MockServer::start().await;
        let home = TestHome::new()?;
        let file = home.work().join("a.txt");
        std::fs::write(&file, "hi there\n")?;
        let arguments = json!({"path": file.to_string_lossy()}).to_string();
        // The OpenAI-shaped gateway calls its reasoning `reasoning`, configured as `reasoning_key`.
        let key = match shape {
            Shape::Kimi => "reasoning_content",
            Shape::OpenAi => "reasoning",
        };
        let call_id = shape.call_id(0);
        let first = Answer::new(shape, "chatcmpl-think-1")
            .reasoning_key(key)
            .think("The user")
            .think(" wants the file.")
            .tool_call(&call_id, "ReadFile", &[&arguments])
            .finish("tool_calls", Usage(200, 30, 0));
        let second = Answer::new(shape, "chatcmpl-think-2")
            .reasoning_key(key)
            .think("It says hi.")
            .text("The file says hi.")
            .finish("stop", Usage(260, 12, 200));
        let _guard = mount(&server, vec![sse(first), sse(second)], 2).await;
        let mut config = config(shape, &format!("{}/v1", server.uri()), 3);
        config["models"]["m"]["capabilities"] = json!(["thinking"]);
        if shape == Shape::OpenAi {
            config["providers"]["p"]["reasoning_key"] = json!(key);
        }
        let mut agent = start_fast(home, &config, &["--thinking"]).await?;

        let (response, messages) = agent.prompt("What does a.txt say?").await?;
        assert_eq!(result_of(&response), &json!({"status": "finished"}), "{shape:?}");
        let think = |t: &str| json!({"type": "think", "think": t, "encrypted": null});
        assert_eq!(
            payloads(&messages, "ContentPart"),
            [
                &think("The user"),
                &think(" wants the file."),
                &think("It says hi."),
                &json!({"type": "text", "text": "The file says hi."}),
            ],
            "{shape:?}"
        );

        let bodies = checked_bodies(&server, shape, &agent.session_id()?).await?;
        match shape {
            Shape::Kimi => assert_eq!(bodies[0]["thinking"], json!({"type": "enabled"})),
            Shape::OpenAi => assert_eq!(bodies[0]["reasoning_effort"], "high"),
        }
        // The second request carries the first step's reasoning, joined, under the same key.
        let messages = bodies[1]["messages"].as_array().context("messages")?;
        let assistant = messages
            .iter()
            .find(|m| m["role"] == "assistant")
            .context("no assistant message sent back")?;
        assert_eq!(assistant[key], "The user wants the file.", "{shape:?}");
        assert_eq!(assistant["tool_calls"][0]["id"], call_id.as_str());
        assert_eq!(
            agent.conversation()?.last(),
            Some(&json!({"role": "assistant", "content": [
                {"type": "think", "think": "It says hi.", "encrypted": null},
                {"type": "text", "text": "The file says hi."}
            ]}))
        );
    }
    Ok(())
}

#[tokio::test]
async fn two_parallel_tool_calls_reusing_index_zero() -> Result<()> {
    for shape in Shape::BOTH {
        let server = MockServer::start().await;
        let home = TestHome::new()?;
        let (a, b) = (home.work().join("a.txt"), home.work().join("b.txt"));
        std::fs::write(&a, "alpha\n")?;
        std::fs::write(&b, "beta\n")?;
        let path_arg = |p: &std::path::Path| format!("{}}}", json!(p.to_string_lossy()));
        let (arg_a, arg_b) = (path_arg(&a), path_arg(&b));
        let (id_a, id_b) = (shape.call_id(0), shape.call_id(1));
        let first = Answer::new(shape, "chatcmpl-tools-1")
            .text("Checking both.")
            .tool_call(&id_a, "ReadFile", &["{\"path\": ", &arg_a])
            .tool_call(&id_b, "ReadFile", &["{\"path\": ", &arg_b])
            .finish("tool_calls", Usage(300, 40, 256));
        let second = text_answer(shape, "Both read.");
        let _guard = mount(&server, vec![sse(first), sse(second)], 2).await;
        let config = config(shape, &format!("{}/v1", server.uri()), 3);
        let mut agent = start_fast(home, &config, &[]).await?;

        let (response, messages) = agent.prompt("Read a and b").await?;
        assert_eq!(result_of(&response), &json!({"status": "finished"}), "{shape:?}");
        let calls: Vec<(&Value, &Value)> = payloads(&messages, "ToolCall")
            .into_iter()
            .map(|c| (&c["id"], &c["function"]["name"]))
            .collect();
        assert_eq!(
            calls,
            [
                (&json!(id_a), &json!("ReadFile")),
                (&json!(id_b), &json!("ReadFile"))
            ],
            "{shape:?}"
        );
        let mut results: Vec<(String, bool, String)> = payloads(&messages, "ToolResult")
            .into_iter()
            .map(|r| {
                (
                    r["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                    r["return_value"]["is_error"] == true,
                    r["return_value"]["output"].to_string(),
                )
            })
            .collect();
        results.sort();
        assert_eq!(results.len(), 2, "{results:?}");
        assert_eq!((results[0].0.as_str(), results[0].1), (id_a.as_str(), false));
        assert!(results[0].2.contains("alpha"), "{results:?}");
        assert_eq!((results[1].0.as_str(), results[1].1), (id_b.as_str(), false));
        assert!(results[1].2.contains("beta"), "{results:?}");

        // The second request: the assistant message with both calls whole, then both results in order.
        let bodies = checked_bodies(&server, shape, &agent.session_id()?).await?;
        let messages = bodies[1]["messages"].as_array().context("messages")?;
        let at = messages
            .iter()
            .position(|m| m["role"] == "assistant")
            .context("no assistant message")?;
        let sent_calls: Vec<(&Value, &Value)> = messages[at]["tool_calls"]
            .as_array()
            .context("tool_calls")?
            .iter()
            .map(|c| (&c["id"], &c["function"]["arguments"]))
            .collect();
        assert_eq!(
            sent_calls,
            [
                (&json!(id_a), &json!(format!("{{\"path\": {arg_a}"))),
                (&json!(id_b), &json!(format!("{{\"path\": {arg_b}")))
            ]
        );
        let answered: Vec<&Value> = messages[at + 1..].iter().map(|m| &m["tool_call_id"]).collect();
        assert_eq!(answered, [&json!(id_a), &json!(id_b)]);
    }
    Ok(())
}

/// How long the loop was to wait before the retry.
#[derive(Debug, Clone, Copy)]
enum Wait {
    /// Our backoff for the first retry at scale 0.01: (0.3 s + up to 0.5 s jitter) / 100.
    Backoff,
    /// What the server asked for.
    Exactly(f64),
}

impl Wait {
    fn check(self, wait_s: f64, label: &str) {
        match self {
            Self::Backoff => assert!(
                (0.003..0.008 + 1e-9).contains(&wait_s),
                "{label}: wait_s {wait_s}"
            ),
            Self::Exactly(expected) => assert!((wait_s - expected).abs() < 1e-6, "{label}: wait_s {wait_s}"),
        }
    }
}

/// The StepRetry events of `messages` with `wait_s` taken out (and returned beside them).
fn step_retries(messages: &[Value]) -> Vec<(Value, f64)> {
    payloads(messages, "StepRetry")
        .into_iter()
        .map(|p| {
            let mut p = p.clone();
            let wait = p["wait_s"].take().as_f64().unwrap_or(f64::NAN);
            (p, wait)
        })
        .collect()
}

fn step_retry(next_attempt: u32, max_attempts: u32, error_type: &str, status_code: Option<u16>) -> Value {
    json!({"n": 1, "next_attempt": next_attempt, "max_attempts": max_attempts, "wait_s": null,
           "error_type": error_type, "status_code": status_code})
}

/// Thinking and nothing else: the reference treats it as an empty answer.
fn think_only(shape: Shape) -> String {
    Answer::new(shape, "chatcmpl-think-only")
        .think("Still thinking")
        .finish("length", Usage(30, 3, 0))
}

/// A stream cut in the middle of a JSON line, without a finish reason or `[DONE]`.
fn truncated(shape: Shape) -> String {
    let cut = Answer::new(shape, "chatcmpl-cut")
        .text("Hel")
        .text("lo wo")
        .unfinished();
    cut[..cut.len() - 20].to_owned()
}

#[tokio::test]
async fn every_retryable_fault_is_retried_then_succeeds() -> Result<()> {
    let shape = Shape::Kimi;
    let server = MockServer::start().await;
    let config = config(shape, &format!("{}/v1", server.uri()), 3);
    let mut agent = start_fast(TestHome::new()?, &config, &[]).await?;
    let rate_limited = || api_error(429, "Rate limit reached", "rate_limit_reached_error");
    let rows: Vec<(&str, ResponseTemplate, &str, Option<u16>, Wait)> = vec![
        ("429", rate_limited(), "APIStatusError", Some(429), Wait::Backoff),
        (
            "429 + Retry-After",
            rate_limited().insert_header("retry-after", "0.2"),
            "APIStatusError",
            Some(429),
            Wait::Exactly(0.2),
        ),
        (
            "429 + retry-after-ms",
            rate_limited().insert_header("retry-after-ms", "150"),
            "APIStatusError",
            Some(429),
            Wait::Exactly(0.15),
        ),
        (
            "500",
            api_error(500, "internal error", "server_error"),
            "APIStatusError",
            Some(500),
            Wait::Backoff,
        ),
        (
            "502",
            ResponseTemplate::new(502).set_body_string("Bad Gateway"),
            "APIStatusError",
            Some(502),
            Wait::Backoff,
        ),
        (
            "503",
            ResponseTemplate::new(503),
            "APIStatusError",
            Some(503),
            Wait::Backoff,
        ),
        (
            "504",
            ResponseTemplate::new(504),
            "APIStatusError",
            Some(504),
            Wait::Backoff,
        ),
        (
            "only [DONE]",
            sse("data: [DONE]\n\n"),
            "APIEmptyResponseError",
            None,
            Wait::Backoff,
        ),
        (
            "empty body",
            sse(""),
            "APIEmptyResponseError",
            None,
            Wait::Backoff,
        ),
        (
            "think only",
            sse(think_only(shape)),
            "APIEmptyResponseError",
            None,
            Wait::Backoff,
        ),
        (
            "truncated",
            sse(truncated(shape)),
            "APIConnectionError",
            None,
            Wait::Backoff,
        ),
        (
            "malformed chunk",
            sse("data: {\"id\": \"x\", \"choices\": [\n\n"),
            "APIConnectionError",
            None,
            Wait::Backoff,
        ),
    ];
    let mut expected_answers = Vec::new();
    for (i, (label, fault, error_type, status, wait)) in rows.into_iter().enumerate() {
        let answer = format!("Recovered {i}.");
        let guard = mount(&server, vec![fault, sse(text_answer(shape, &answer))], 2).await;
        let (response, messages) = agent.prompt(&format!("row {i}")).await?;
        assert_eq!(
            result_of(&response),
            &json!({"status": "finished"}),
            "{label}: {response}"
        );
        let retries = step_retries(&messages);
        assert_eq!(retries.len(), 1, "{label}: {retries:?}");
        assert_eq!(retries[0].0, step_retry(2, 3, error_type, status), "{label}");
        wait.check(retries[0].1, label);
        assert!(
            payloads(&messages, "ContentPart").contains(&&json!({"type": "text", "text": answer})),
            "{label}"
        );
        drop(guard);
        // A lone text part is written as a plain string, as the reference does.
        expected_answers.push(json!({"role": "assistant", "content": answer}));
    }
    // Nothing of a failed attempt (the truncated "Hello wo", the lone thinking) reached the context.
    let assistants: Vec<Value> = agent
        .conversation()?
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .collect();
    assert_eq!(assistants, expected_answers);
    checked_bodies(&server, shape, &agent.session_id()?).await?;
    Ok(())
}

#[tokio::test]
async fn faults_past_the_retry_budget_fail_with_the_providers_message() -> Result<()> {
    let shape = Shape::Kimi;
    let server = MockServer::start().await;
    let config = config(shape, &format!("{}/v1", server.uri()), 2);
    let mut agent = start_fast(TestHome::new()?, &config, &[]).await?;
    // This client asks for errors as data: each failure says what it was (errors_as_data.rs has the
    // null `data` of clients that did not ask).
    agent.wire.initialize(init_with_error_data()).await?;
    let rows: Vec<(ResponseTemplate, &str, &str, Option<u16>)> = vec![
        (
            api_error(429, "Rate limit reached", "rate_limit_reached_error"),
            "Error code: 429 - {'error': {'message': 'Rate limit reached', 'type': 'rate_limit_reached_error'}}",
            "APIStatusError",
            Some(429),
        ),
        (
            ResponseTemplate::new(500).set_body_string("Internal Server Error\n"),
            "Internal Server Error",
            "APIStatusError",
            Some(500),
        ),
        (
            ResponseTemplate::new(503),
            "Error code: 503",
            "APIStatusError",
            Some(503),
        ),
        (
            sse("data: [DONE]\n\n"),
            "The API returned an empty response.",
            "APIEmptyResponseError",
            None,
        ),
        (
            sse(think_only(shape)),
            "The API returned a response containing only thinking content without any text or tool \
             calls. This usually indicates the stream was interrupted or the output token budget was \
             exhausted during reasoning.",
            "APIEmptyResponseError",
            None,
        ),
        (
            sse(truncated(shape)),
            "Connection error: the response stream ended before the answer was complete.",
            "APIConnectionError",
            None,
        ),
    ];
    let count = rows.len();
    for (i, (fault, message, error_type, status)) in rows.into_iter().enumerate() {
        let guard = mount(&server, vec![fault], 2).await;
        let (response, messages) = agent.prompt(&format!("row {i}")).await?;
        assert_eq!(
            response["error"],
            json!({"code": -32003, "message": message, "data": {
                "kind": "provider_error", "provider": "kimi", "error_type": error_type,
                "status_code": status, "retryable": true,
            }}),
            "{message}"
        );
        let retries = step_retries(&messages);
        assert_eq!(retries.len(), 1, "{message}: {retries:?}");
        assert_eq!(retries[0].0, step_retry(2, 2, error_type, status), "{message}");
        assert_eq!(payloads(&messages, "StepInterrupted").len(), 1, "{message}");
        assert_eq!(payloads(&messages, "TurnEnd").len(), 1, "{message}");
        drop(guard);
    }
    // Every prompt is in the context, and no assistant message, whole or half, follows any of them.
    let conversation = agent.conversation()?;
    let roles: Vec<&str> = conversation.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, vec!["user"; count]);
    checked_bodies(&server, shape, &agent.session_id()?).await?;
    Ok(())
}

#[tokio::test]
async fn auth_and_bad_request_errors_are_not_retried() -> Result<()> {
    let shape = Shape::Kimi;
    let server = MockServer::start().await;
    let config = config(shape, &format!("{}/v1", server.uri()), 3);
    let mut agent = start_fast(TestHome::new()?, &config, &[]).await?;
    let error_chunk = "data: {\"id\":\"chatcmpl-err\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Par\"}}]}\n\n\
        data: {\"error\":{\"message\":\"The server had an error while processing your request.\",\"type\":\"server_error\"}}\n\n";
    let rows: Vec<(ResponseTemplate, &str)> = vec![
        (
            api_error(401, "Invalid Authentication", "invalid_authentication_error"),
            "Error code: 401 - {'error': {'message': 'Invalid Authentication', 'type': 'invalid_authentication_error'}}",
        ),
        (
            api_error(403, "Your account is suspended", "permission_denied_error"),
            "Error code: 403 - {'error': {'message': 'Your account is suspended', 'type': 'permission_denied_error'}}",
        ),
        (
            api_error(
                400,
                "Invalid request: tool_call_id is not found",
                "invalid_request_error",
            ),
            "Error code: 400 - {'error': {'message': 'Invalid request: tool_call_id is not found', 'type': 'invalid_request_error'}}",
        ),
        (
            sse(error_chunk),
            "Error: The server had an error while processing your request.",
        ),
    ];
    for (fault, message) in rows {
        // `expect(1)`: a second request would fail the guard.
        let guard = mount(&server, vec![fault], 1).await;
        let (response, messages) = agent.prompt("hi").await?;
        assert_eq!(
            response["error"],
            json!({"code": -32003, "message": message, "data": null})
        );
        assert_eq!(step_retries(&messages), [], "{message}");
        drop(guard);
    }
    assert!(agent.conversation()?.iter().all(|m| m["role"] != "assistant"));
    Ok(())
}

/// A local port with nothing listening on it.
async fn closed_port() -> Result<std::net::SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    Ok(listener.local_addr()?)
}

#[tokio::test]
async fn connection_refused_past_the_budget() -> Result<()> {
    let addr = closed_port().await?;
    let config = config(Shape::Kimi, &format!("http://{addr}/v1"), 3);
    let mut agent = start_fast(TestHome::new()?, &config, &[]).await?;
    agent.wire.initialize(init_with_error_data()).await?;
    let (response, messages) = agent.prompt("hi").await?;
    assert_eq!(
        response["error"],
        json!({"code": -32003, "message": "Connection error.", "data": {
            "kind": "provider_error", "provider": "kimi", "error_type": "APIConnectionError",
            "status_code": null, "retryable": true,
        }})
    );
    let retries: Vec<Value> = step_retries(&messages).into_iter().map(|r| r.0).collect();
    assert_eq!(
        retries,
        [
            step_retry(2, 3, "APIConnectionError", None),
            step_retry(3, 3, "APIConnectionError", None)
        ]
    );
    Ok(())
}

#[tokio::test]
async fn connection_refused_then_the_server_comes_up() -> Result<()> {
    let addr = closed_port().await?;
    let config = config(Shape::Kimi, &format!("http://{addr}/v1"), 5);
    // The reference's own backoff (at least 0.3 s, then 0.6 s, 1.2 s): the server is started as soon as
    // the first StepRetry arrives, well inside the first wait.
    let mut agent = start(TestHome::new()?, &config, &[], &[]).await?;
    let prompt = agent.wire.start_prompt(json!("hi")).await?;
    let retry = agent.wire.wait_event("StepRetry").await?;
    let listener = std::net::TcpListener::bind(addr).context("re-binding the refused port")?;
    let server = MockServer::builder().listener(listener).start().await;
    let _guard = mount(&server, vec![sse(text_answer(Shape::Kimi, "Up again."))], 1).await;

    let (response, _) = agent.wire.read_response(&prompt).await?;
    assert_eq!(result_of(&response), &json!({"status": "finished"}));
    let mut payload = retry["params"]["payload"].clone();
    let wait = payload["wait_s"].take().as_f64().unwrap_or_default();
    assert_eq!(payload, step_retry(2, 5, "APIConnectionError", None));
    assert!((0.3..0.8 + 1e-9).contains(&wait), "wait_s {wait}");
    Ok(())
}

/// What the hand-written server does with one connection.
enum Conn {
    /// Reads the request, then resets the connection without answering.
    Reset,
    /// Sends the response head and `chunk`, then resets the connection.
    ResetAfter(String),
    /// Answers with `body` and closes.
    Respond(String),
    /// Sends the response head and `chunk`, then waits until the client hangs up.
    Hold(String),
}

/// A server that handles one connection per entry of `plan`, in order; it returns each request's body
/// and ends once the last connection is done (for [`Conn::Hold`], once the client closed it).
async fn raw_server(plan: Vec<Conn>) -> Result<(String, JoinHandle<Result<Vec<Value>>>)> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let base_url = format!("http://{}/v1", listener.local_addr()?);
    let task = tokio::spawn(async move {
        let mut bodies = Vec::new();
        for conn in plan {
            let (mut socket, _) = listener.accept().await?;
            bodies.push(read_request(&mut socket).await?);
            let head =
                "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            let chunk = |data: &str| format!("{:x}\r\n{data}\r\n", data.len());
            match conn {
                Conn::Reset => socket.set_zero_linger()?,
                Conn::ResetAfter(data) => {
                    socket
                        .write_all(format!("{head}{}", chunk(&data)).as_bytes())
                        .await?;
                    socket.flush().await?;
                    socket.set_zero_linger()?;
                }
                Conn::Respond(body) => {
                    let response = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\
                         connection: close\r\n\r\n{body}",
                        body.len()
                    );
                    socket.write_all(response.as_bytes()).await?;
                    socket.shutdown().await?;
                }
                Conn::Hold(data) => {
                    socket
                        .write_all(format!("{head}{}", chunk(&data)).as_bytes())
                        .await?;
                    socket.flush().await?;
                    // Nothing more is sent: the read ends only when the client closes (0) or resets.
                    let mut buf = [0u8; 1024];
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => {}
                        Ok(n) => bail!("the client sent {n} more bytes instead of closing"),
                    }
                }
            }
        }
        Ok(bodies)
    });
    Ok((base_url, task))
}

/// Reads one HTTP request (head and a `content-length` body) and returns the body as JSON.
async fn read_request(socket: &mut TcpStream) -> Result<Value> {
    let mut request = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        let n = socket.read(&mut buf).await?;
        if n == 0 {
            bail!("the client closed before sending a whole request");
        }
        request.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&request);
        let Some(head_end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length = text[..head_end]
            .lines()
            .find_map(|l| {
                l.to_ascii_lowercase()
                    .strip_prefix("content-length:")
                    .and_then(|v| v.trim().parse::<usize>().ok())
            })
            .unwrap_or(0);
        if request.len() >= head_end + 4 + length {
            return Ok(serde_json::from_slice(
                &request[head_end + 4..head_end + 4 + length],
            )?);
        }
    }
}

#[tokio::test]
async fn connection_reset_before_and_during_the_answer_is_retried() -> Result<()> {
    let shape = Shape::Kimi;
    let first_chunk = Answer::new(shape, "chatcmpl-reset")
        .text("Half an ans")
        .unfinished();
    let (base_url, server) = raw_server(vec![
        Conn::Reset,
        Conn::Respond(text_answer(shape, "After a reset.")),
        Conn::ResetAfter(first_chunk),
        Conn::Respond(text_answer(shape, "After a reset mid-stream.")),
    ])
    .await?;
    let mut agent = start_fast(TestHome::new()?, &config(shape, &base_url, 3), &[]).await?;
    for answer in ["After a reset.", "After a reset mid-stream."] {
        let (response, messages) = agent.prompt("hi").await?;
        assert_eq!(result_of(&response), &json!({"status": "finished"}), "{answer}");
        let retries: Vec<Value> = step_retries(&messages).into_iter().map(|r| r.0).collect();
        assert_eq!(
            retries,
            [step_retry(2, 3, "APIConnectionError", None)],
            "{answer}"
        );
    }
    let bodies = tokio::time::timeout(READ_TIMEOUT, server).await???;
    assert_eq!(bodies.len(), 4);
    let assistants: Vec<Value> = agent
        .conversation()?
        .into_iter()
        .filter(|m| m["role"] == "assistant")
        .map(|m| m["content"].clone())
        .collect();
    assert_eq!(
        assistants,
        [json!("After a reset."), json!("After a reset mid-stream.")]
    );
    Ok(())
}

#[tokio::test]
async fn cancel_mid_stream_drops_the_http_request() -> Result<()> {
    let shape = Shape::Kimi;
    let started = Answer::new(shape, "chatcmpl-slow")
        .think("Let me think")
        .text("The answer is")
        .unfinished();
    let (base_url, server) = raw_server(vec![Conn::Hold(started)]).await?;
    let mut agent = start_fast(TestHome::new()?, &config(shape, &base_url, 3), &[]).await?;
    let prompt = agent.wire.start_prompt(json!("think hard")).await?;
    // Both chunks arrived, so the request is mid-stream; then the client cancels.
    let (part, _) = agent
        .wire
        .read_until(|m| m["params"]["payload"] == json!({"type": "text", "text": "The answer is"}))
        .await?;
    assert_eq!(part["params"]["type"], "ContentPart");
    let cancel = agent.wire.request("cancel", json!({})).await?;
    assert_eq!(agent.wire.response_to(&cancel).await?["result"], json!({}));
    let (response, _) = agent.wire.read_response(&prompt).await?;
    assert_eq!(result_of(&response), &json!({"status": "cancelled"}));

    // The server's read returns once the client has closed the connection.
    let bodies = tokio::time::timeout(READ_TIMEOUT, server)
        .await
        .map_err(|_| anyhow!("the HTTP request was not dropped after cancel"))???;
    assert_eq!(bodies.len(), 1);
    assert!(agent.conversation()?.iter().all(|m| m["role"] != "assistant"));
    Ok(())
}

#[tokio::test]
async fn requests_carry_sanitized_schemas_cache_key_budget_and_user_agent() -> Result<()> {
    let shape = Shape::Kimi;
    let server = MockServer::start().await;
    let _guard = mount(&server, vec![sse(text_answer(shape, "Fine."))], 1).await;
    let home = TestHome::new()?.with_config(&config(shape, &format!("{}/v1", server.uri()), 3))?;
    let mut wire = WireProcess::spawn_with_env(&home, home.args(), &[(BACKOFF_SCALE_ENV, "0.01")]).await?;
    // A client tool whose schema uses `$defs`/`$ref`, as schemars and many MCP servers write them.
    let lookup = json!({
        "name": "Lookup",
        "description": "Looks a range up.",
        "parameters": {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "range": {"anyOf": [{"$ref": "#/$defs/Range"}, {"type": "null"}]}
            },
            "required": ["path"],
            "$defs": {"Range": {"type": "object", "properties": {"start": {"type": "integer"}}}}
        }
    });
    let init = wire.initialize(init_params(json!([lookup]))).await?;
    assert_eq!(init["external_tools"]["accepted"], json!(["Lookup"]));
    let mut agent = Agent { home, wire };
    let (response, _) = agent.prompt("hi").await?;
    assert_eq!(result_of(&response), &json!({"status": "finished"}));

    let bodies = checked_bodies(&server, shape, &agent.session_id()?).await?;
    let tool = bodies[0]["tools"]
        .as_array()
        .context("tools")?
        .iter()
        .find(|t| t["function"]["name"] == "Lookup")
        .context("the client tool was not offered to the model")?;
    assert_eq!(
        tool["function"]["parameters"]["properties"]["range"]["anyOf"],
        json!([
            {"type": "object", "properties": {"start": {"type": "integer"}}},
            {"type": "null"}
        ])
    );
    // Built-in tools are offered too, all through the same sanitizer.
    assert!(bodies[0]["tools"].as_array().is_some_and(|t| t.len() > 1));
    Ok(())
}
