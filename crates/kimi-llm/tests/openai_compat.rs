//! Black-box tests of the `kimi` and `openai_legacy` providers against a
//! local mock server streaming recorded Kimi- and OpenAI-shaped bodies.

mod common;

use std::time::Duration;

use common::{assert_tool_messages_answer_calls, bodies, config, contains_key, fixture, run, serve, sse};
use kimi_llm::{
    ChatError, ChatRequest, CompletionBudget, Flavor, Message, OpenAiCompatProvider, StreamEvent, ToolSpec,
};
use kimi_wire::message::{ContentPart, TokenUsage, ToolCall, ToolCallPart};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use wiremock::ResponseTemplate;

fn text(s: &str) -> StreamEvent {
    StreamEvent::Part(ContentPart::text(s))
}

fn think(s: &str) -> StreamEvent {
    StreamEvent::Part(ContentPart::think(s))
}

fn request<'a>(system: &'a str, tools: &'a [ToolSpec], history: &'a [Message]) -> ChatRequest<'a> {
    ChatRequest {
        system_prompt: system,
        tools,
        history,
    }
}

fn read_file_tool() -> ToolSpec {
    ToolSpec {
        name: "ReadFile".into(),
        description: "Read a file.".into(),
        parameters: json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "range": {"anyOf": [{"$ref": "#/$defs/Range"}, {"type": "null"}]}
            },
            "required": ["path"],
            "$defs": {"Range": {"type": "object", "properties": {"start": {"type": "integer"}}}}
        }),
    }
}

fn digit_tool() -> ToolSpec {
    ToolSpec {
        name: "1password".into(),
        description: "An MCP tool whose name starts with a digit.".into(),
        parameters: json!({"type": "object", "properties": {"item": {"enum": ["x", "y"]}}}),
    }
}

#[tokio::test]
async fn kimi_text_turn_and_its_request() {
    let server = serve(vec![sse(fixture("kimi_text.sse"))]).await;
    let mut cfg = config(&server, Flavor::Kimi);
    cfg.session_id = Some("session-123".into());
    cfg.thinking = Some(false);
    cfg.thinking_keep = Some("all".into());
    cfg.temperature = Some(0.6);
    cfg.max_context_size = 10_000;
    cfg.custom_headers.insert("X-Extra".into(), "1".into());
    cfg.user_agent.set_client("kimi agent sdk", Some("1.2.0"));
    let provider = OpenAiCompatProvider::new(cfg).unwrap();
    let history = [Message::user_text("Say hello")];

    let (events, error) = run(&provider, request("You are terse.", &[], &history)).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageId("chatcmpl-kimi-text-1".into()),
            text("Hello"),
            text(", world."),
            StreamEvent::Usage(TokenUsage {
                input_other: 20,
                output: 4,
                input_cache_read: 100,
                input_cache_creation: 0,
            }),
            StreamEvent::Finish("stop".into()),
        ]
    );

    let received = server.received_requests().await.unwrap();
    let headers = &received[0].headers;
    assert_eq!(
        headers["user-agent"].to_str().unwrap(),
        format!("kimi-agent/{} kimi-agent-sdk/1.2.0", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(headers["authorization"].to_str().unwrap(), "Bearer sk-test");
    assert_eq!(headers["x-extra"].to_str().unwrap(), "1");
    let body: Value = serde_json::from_slice(&received[0].body).unwrap();
    // system (3 + 1 role) + user (3 + 1 role) = 8 estimated, plus the 1024 margin.
    let expected_max = 10_000 - 8 - 1024;
    assert_eq!(
        body,
        json!({
            "model": "kimi-test",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": "Say hello"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            "max_completion_tokens": expected_max,
            "temperature": 0.6,
            "prompt_cache_key": "session-123",
            // `keep` only goes with thinking on.
            "thinking": {"type": "disabled"}
        })
    );
}

#[tokio::test]
async fn kimi_thinking_turn_sends_reasoning_back() {
    let server = serve(vec![
        sse(fixture("kimi_thinking.sse")),
        sse(fixture("kimi_text.sse")),
    ])
    .await;
    let mut cfg = config(&server, Flavor::Kimi);
    cfg.thinking = Some(true);
    cfg.thinking_keep = Some("all".into());
    cfg.max_completion_tokens = CompletionBudget::Unlimited;
    let provider = OpenAiCompatProvider::new(cfg).unwrap();

    let mut history = vec![Message::user_text("A number?")];
    let (events, error) = run(&provider, request("", &[], &history)).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageId("chatcmpl-kimi-think-1".into()),
            think("The user"),
            think(" wants a number."),
            text("42"),
            StreamEvent::Usage(TokenUsage {
                input_other: 50,
                output: 9,
                input_cache_read: 0,
                input_cache_creation: 0,
            }),
            StreamEvent::Finish("stop".into()),
        ]
    );

    history.push(Message::assistant(
        vec![
            ContentPart::think("The user wants a number."),
            ContentPart::text("42"),
        ],
        vec![],
    ));
    history.push(Message::user_text("Again"));
    let (_, error) = run(&provider, request("", &[], &history)).await;
    assert_eq!(error, None);

    let sent = bodies(&server).await;
    assert_eq!(sent[0]["thinking"], json!({"type": "enabled", "keep": "all"}));
    assert_eq!(sent[0].get("max_completion_tokens"), None);
    assert_eq!(
        sent[1]["messages"][1],
        json!({"role": "assistant", "content": "42", "reasoning_content": "The user wants a number."})
    );
}

#[tokio::test]
async fn parallel_tool_calls_with_a_reused_index() {
    let server = serve(vec![
        sse(fixture("kimi_parallel_tools_reused_index.sse")),
        sse(fixture("kimi_text.sse")),
    ])
    .await;
    let provider = OpenAiCompatProvider::new(config(&server, Flavor::Kimi)).unwrap();
    let tools = [read_file_tool(), digit_tool()];
    let mut history = vec![Message::user_text("Read a.txt and look up x")];

    let (events, error) = run(&provider, request("sys", &tools, &history)).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageId("chatcmpl-kimi-tools-1".into()),
            text("Checking both."),
            StreamEvent::ToolCall(ToolCall::new(
                "functions.ReadFile:0",
                "ReadFile",
                Some(String::new())
            )),
            StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some("{\"path\": ".into())
            }),
            StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some("\"a.txt\"}".into())
            }),
            // The server knows the tool as `_1password`; we get our own name back.
            StreamEvent::ToolCall(ToolCall::new(
                "functions._1password:1",
                "1password",
                Some(String::new())
            )),
            StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some("{\"item\": \"x\"}".into())
            }),
            StreamEvent::Usage(TokenUsage {
                input_other: 44,
                output: 40,
                input_cache_read: 256,
                input_cache_creation: 0,
            }),
            StreamEvent::Finish("tool_calls".into()),
        ]
    );

    // The next step sends the calls and their results back.
    history.push(Message::assistant(
        vec![ContentPart::text(" ")],
        vec![
            ToolCall::new(
                "functions.ReadFile:0",
                "ReadFile",
                Some("{\"path\": \"a.txt\"}".into()),
            ),
            ToolCall::new(
                "functions._1password:1",
                "1password",
                Some("{\"item\": \"x\"}".into()),
            ),
        ],
    ));
    history.push(Message::tool(
        "functions.ReadFile:0",
        vec![ContentPart::text("hello")],
    ));
    history.push(Message::tool(
        "functions._1password:1",
        vec![ContentPart::text("a"), ContentPart::text("b")],
    ));
    let (_, error) = run(&provider, request("sys", &tools, &history)).await;
    assert_eq!(error, None);

    let sent = bodies(&server).await;
    for body in &sent {
        assert_tool_messages_answer_calls(body);
        assert!(!contains_key(&body["tools"], "$ref"), "{}", body["tools"]);
        assert!(!contains_key(&body["tools"], "$defs"), "{}", body["tools"]);
    }
    assert_eq!(
        sent[0]["tools"],
        json!([
            {"type": "function", "function": {
                "name": "ReadFile",
                "description": "Read a file.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "range": {"anyOf": [
                            {"type": "object", "properties": {"start": {"type": "integer"}}},
                            {"type": "null"}
                        ]}
                    },
                    "required": ["path"]
                }
            }},
            {"type": "function", "function": {
                "name": "_1password",
                "description": "An MCP tool whose name starts with a digit.",
                "parameters": {"type": "object", "properties": {"item": {"enum": ["x", "y"], "type": "string"}}}
            }}
        ])
    );
    // Blank assistant content beside tool calls is left out for Kimi.
    assert_eq!(
        sent[1]["messages"][2],
        json!({"role": "assistant", "tool_calls": [
            {"type": "function", "id": "functions.ReadFile:0",
             "function": {"name": "ReadFile", "arguments": "{\"path\": \"a.txt\"}"}},
            {"type": "function", "id": "functions._1password:1",
             "function": {"name": "_1password", "arguments": "{\"item\": \"x\"}"}}
        ]})
    );
    assert_eq!(
        sent[1]["messages"][4],
        json!({"role": "tool", "content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}
        ], "tool_call_id": "functions._1password:1"})
    );
}

#[tokio::test]
async fn openai_legacy_usage_at_top_level_and_reasoning_key() {
    let server = serve(vec![sse(fixture("openai_text_usage_top_level.sse"))]).await;
    let mut cfg = config(&server, Flavor::OpenAiLegacy);
    cfg.reasoning_key = Some("reasoning".into());
    cfg.session_id = Some("not-sent".into());
    cfg.max_context_size = 1000;
    let provider = OpenAiCompatProvider::new(cfg).unwrap();
    let history = [
        Message::user_text("hi"),
        Message::assistant(vec![ContentPart::think("t"), ContentPart::text("yo")], vec![]),
        Message::user_text("again"),
    ];

    let (events, error) = run(&provider, request("", &[], &history)).await;
    // The unknown finish reason is tolerated.
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageId("chatcmpl-oai-1".into()),
            think("Short answer."),
            text("Hi!"),
            StreamEvent::Usage(TokenUsage {
                input_other: 8,
                output: 3,
                input_cache_read: 32,
                input_cache_creation: 0,
            }),
            StreamEvent::Finish("end_turn_unknown".into()),
        ]
    );
    let sent = bodies(&server).await;
    assert_eq!(
        sent[0],
        json!({
            "model": "kimi-test",
            "messages": [
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": "yo", "reasoning": "t"},
                {"role": "user", "content": "again"}
            ],
            "stream": true,
            "stream_options": {"include_usage": true},
            // Thinking not configured, but the history holds reasoning.
            "reasoning_effort": "medium"
        })
    );
}

#[tokio::test]
async fn usage_inside_the_choice_and_no_done_after_a_finish_reason() {
    let body = concat!(
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"ok\"},\"finish_reason\":null}]}\n\n",
        "data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"weird_reason\",",
        "\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":1,\"prompt_tokens_details\":{\"cached_tokens\":5}}}]}\n\n",
    );
    let server = serve(vec![sse(body)]).await;
    let provider = OpenAiCompatProvider::new(config(&server, Flavor::OpenAiLegacy)).unwrap();
    let history = [Message::user_text("hi")];
    let (events, error) = run(&provider, request("", &[], &history)).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            StreamEvent::MessageId("x".into()),
            text("ok"),
            StreamEvent::Usage(TokenUsage {
                input_other: 4,
                output: 1,
                input_cache_read: 5,
                input_cache_creation: 0,
            }),
            StreamEvent::Finish("weird_reason".into()),
        ]
    );
}

#[tokio::test]
async fn error_event_in_the_stream() {
    let server = serve(vec![sse(fixture("openai_error_event.sse"))]).await;
    let provider = OpenAiCompatProvider::new(config(&server, Flavor::OpenAiLegacy)).unwrap();
    let history = [Message::user_text("hi")];
    let (events, error) = run(&provider, request("", &[], &history)).await;
    assert_eq!(
        events,
        vec![StreamEvent::MessageId("chatcmpl-oai-err".into()), text("Par")]
    );
    let error = error.unwrap();
    assert_eq!(
        error,
        ChatError::provider("Error: The server had an error while processing your request.")
    );
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn truncated_stream_is_a_retryable_connection_error() {
    let server = serve(vec![sse(fixture("truncated_mid_json.sse"))]).await;
    let provider = OpenAiCompatProvider::new(config(&server, Flavor::Kimi)).unwrap();
    let history = [Message::user_text("hi")];
    let (events, error) = run(&provider, request("", &[], &history)).await;
    assert_eq!(
        events,
        vec![StreamEvent::MessageId("chatcmpl-cut".into()), text("Hel")]
    );
    let error = error.unwrap();
    assert_eq!(error.error_type(), "APIConnectionError");
    assert_eq!(
        error.message(),
        "Connection error: the response stream ended before the answer was complete."
    );
    assert!(error.is_retryable());
}

#[tokio::test]
async fn http_errors_are_classified() {
    let json_body = r#"{"error":{"message":"Rate limit reached","type":"rate_limit_reached_error"}}"#;
    let rows: Vec<(ResponseTemplate, u16, &str, bool, Option<Duration>)> = vec![
        (
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3")
                .insert_header("x-request-id", "req-1")
                .set_body_string(json_body),
            429,
            "Error code: 429 - {'error': {'message': 'Rate limit reached', 'type': 'rate_limit_reached_error'}}",
            true,
            Some(Duration::from_secs(3)),
        ),
        (
            ResponseTemplate::new(500).set_body_string("Internal Server Error"),
            500,
            "Internal Server Error",
            true,
            None,
        ),
        (ResponseTemplate::new(503), 503, "Error code: 503", true, None),
        (
            ResponseTemplate::new(401).set_body_string(
                r#"{"error":{"message":"Invalid Authentication","type":"invalid_authentication_error"}}"#,
            ),
            401,
            "Error code: 401 - {'error': {'message': 'Invalid Authentication', 'type': 'invalid_authentication_error'}}",
            false,
            None,
        ),
        (
            ResponseTemplate::new(403).set_body_string("forbidden"),
            403,
            "forbidden",
            false,
            None,
        ),
        (
            ResponseTemplate::new(400).set_body_string(r#"{"error":{"message":"bad schema","param":null}}"#),
            400,
            "Error code: 400 - {'error': {'message': 'bad schema', 'param': None}}",
            false,
            None,
        ),
    ];
    for (template, status, message, retryable, retry_after) in rows {
        let server = serve(vec![template]).await;
        let provider = OpenAiCompatProvider::new(config(&server, Flavor::Kimi)).unwrap();
        let history = [Message::user_text("hi")];
        let (events, error) = run(&provider, request("", &[], &history)).await;
        assert_eq!(events, vec![]);
        let error = error.unwrap();
        assert_eq!(error.status_code(), Some(status));
        assert_eq!(error.to_string(), message);
        assert_eq!(error.is_retryable(), retryable, "{status}");
        assert_eq!(error.retry_after(), retry_after, "{status}");
        assert_eq!(error.error_type(), "APIStatusError");
    }
}

#[tokio::test]
async fn a_retryable_fault_then_success() {
    let server = serve(vec![
        ResponseTemplate::new(503).set_body_string("{}"),
        sse(fixture("kimi_text.sse")),
    ])
    .await;
    let provider = OpenAiCompatProvider::new(config(&server, Flavor::Kimi)).unwrap();
    let history = [Message::user_text("hi")];
    let (_, first) = run(&provider, request("", &[], &history)).await;
    assert!(first.unwrap().is_retryable());
    let (events, second) = run(&provider, request("", &[], &history)).await;
    assert_eq!(second, None);
    assert_eq!(events[1], text("Hello"));
}

#[tokio::test]
async fn connection_refused() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let cfg = kimi_llm::OpenAiCompatConfig::new(Flavor::Kimi, format!("http://{addr}/v1"), "k", "m");
    let provider = OpenAiCompatProvider::new(cfg).unwrap();
    let history = [Message::user_text("hi")];
    let (_, error) = run(&provider, request("", &[], &history)).await;
    assert_eq!(
        error,
        Some(ChatError::Connection {
            message: "Connection error.".into()
        })
    );
}

#[tokio::test]
async fn a_whole_json_answer_is_accepted() {
    let body = json!({
        "id": "whole-1",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "done"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 2, "completion_tokens": 1}
    });
    let server = serve(vec![ResponseTemplate::new(200).set_body_json(body)]).await;
    let provider = OpenAiCompatProvider::new(config(&server, Flavor::OpenAiLegacy)).unwrap();
    let history = [Message::user_text("hi")];
    let (events, error) = run(&provider, request("", &[], &history)).await;
    assert_eq!(error, None);
    assert_eq!(
        events[..2],
        [StreamEvent::MessageId("whole-1".into()), text("done")]
    );
}

#[test]
fn create_rejects_missing_base_url_or_model() {
    let cfg = kimi_llm::OpenAiCompatConfig::new(Flavor::Kimi, "", "k", "m");
    assert_eq!(
        kimi_llm::create(cfg).err(),
        Some(ChatError::provider(
            "Cannot create LLM: missing base_url or model"
        ))
    );
}

/// Dropping the stream mid-answer closes the HTTP connection. wiremock sends
/// bodies whole, so this uses a small server that sends the headers and one
/// chunk, then waits for the client to hang up.
#[tokio::test]
async fn dropping_the_stream_drops_the_request() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let server = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        // Read the request head and body (small enough for a few reads).
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = socket.read(&mut buf).await.unwrap();
            request.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&request);
            if let Some(head_end) = text.find("\r\n\r\n") {
                let length: usize = text[..head_end]
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if request.len() >= head_end + 4 + length {
                    break;
                }
            }
        }
        let chunk =
            "data: {\"id\":\"slow\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n";
        let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
        socket.write_all(head.as_bytes()).await.unwrap();
        socket
            .write_all(format!("{:x}\r\n{chunk}\r\n", chunk.len()).as_bytes())
            .await
            .unwrap();
        socket.flush().await.unwrap();
        // Nothing more is sent; the next read ends when the client hangs up.
        socket.read(&mut buf).await.unwrap_or(0)
    });

    let cfg = kimi_llm::OpenAiCompatConfig::new(Flavor::Kimi, format!("http://{addr}/v1"), "k", "m");
    let provider = OpenAiCompatProvider::new(cfg).unwrap();
    let history = [Message::user_text("hi")];
    let mut stream = kimi_llm::ChatProvider::generate(&provider, request("", &[], &history))
        .await
        .unwrap();
    use futures::StreamExt as _;
    assert_eq!(
        stream.next().await,
        Some(Ok(StreamEvent::MessageId("slow".into())))
    );
    assert_eq!(stream.next().await, Some(Ok(text("first"))));
    drop(stream);
    let read_after_drop = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .expect("the server never saw the connection close")
        .unwrap();
    assert_eq!(read_after_drop, 0, "the client should close, not send more");
}
