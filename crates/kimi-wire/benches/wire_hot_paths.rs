//! The protocol's per-message hot paths: reading and classifying one inbound line, the whole server
//! path of one request (framing, classification, strict params, dispatch to a task, the answer written
//! through the single stdout writer), and serializing one outbound event line.
//!
//! `cargo bench -p kimi-wire --bench wire_hot_paths`; figures are recorded in docs/benchmarks.md.

use std::hint::black_box;
use std::sync::Arc;

use async_trait::async_trait;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kimi_wire::framing::{DEFAULT_MAX_LINE_BYTES, Inbound, LineReader};
use kimi_wire::jsonrpc::{classify, notification_line};
use kimi_wire::message::{
    ContentPart, Event, StatusUpdate, TokenUsage, ToolResult, ToolReturnValue, UserInput,
};
use kimi_wire::params::{
    InitializeParams, InitializeResult, PromptResult, ReplayResult, ReplayStatus, SetPlanModeResult,
    SteerResult,
};
use kimi_wire::{RpcError, Server, ServerConfig, WireAgent};
use tokio::io::BufReader;
use tokio_util::sync::CancellationToken;

/// Lines per batch: enough that the server's start and shutdown are a small share of a batch.
const LINES: usize = 1_000;

/// An agent that answers at once, so only the server's own work is measured.
struct Stub;

#[async_trait]
impl WireAgent for Stub {
    async fn initialize(&self, _params: InitializeParams) -> Result<InitializeResult, RpcError> {
        Err(RpcError::internal("not used by this benchmark".to_owned()))
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

fn runtime() -> Option<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
}

/// `LINES` requests as a client writes them, each with its own id.
fn input(method: &str, params: &str) -> Vec<u8> {
    (0..LINES)
        .map(|i| {
            format!(r#"{{"jsonrpc":"2.0","id":"req-{i}","method":"{method}","params":{params}}}"#) + "\n"
        })
        .collect::<String>()
        .into_bytes()
}

fn bench_inbound(c: &mut Criterion) {
    let Some(runtime) = runtime() else { return };
    let prompt = input(
        "prompt",
        r#"{"user_input":"Read src/main.rs and explain what the loop does."}"#,
    );
    let plan_mode = input("set_plan_mode", r#"{"enabled":true}"#);

    let mut group = c.benchmark_group("wire");
    group.throughput(Throughput::Elements(LINES as u64));
    // Framing and classification only: the capped line reader and the JSON-RPC envelope check.
    group.bench_function("frame_and_classify_1000_lines", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut reader = LineReader::new(BufReader::new(prompt.as_slice()), DEFAULT_MAX_LINE_BYTES);
                let mut requests = 0usize;
                while let Ok(Inbound::Line(line)) = reader.next().await {
                    requests += usize::from(matches!(classify(&line), Ok(Some(_))));
                }
                black_box(requests)
            })
        })
    });
    // The whole server: framing, classification, params parsed by name, a task per request, the
    // answer serialized and written by the stdout writer; a line that needs no turn state.
    group.bench_function("serve_1000_set_plan_mode_lines", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let (server, _client) = Server::new(ServerConfig::default());
                server
                    .run(
                        plan_mode.as_slice(),
                        tokio::io::sink(),
                        Arc::new(Stub),
                        std::future::pending::<()>(),
                    )
                    .await;
            })
        })
    });
    group.finish();
}

fn bench_events(c: &mut Criterion) {
    let text = Event::ContentPart(ContentPart::text("the agent streams this chunk "));
    let status = Event::StatusUpdate(StatusUpdate {
        context_usage: Some(0.12),
        context_tokens: Some(12_000),
        max_context_tokens: Some(100_000),
        token_usage: Some(TokenUsage {
            input_other: 900,
            output: 300,
            input_cache_read: 11_000,
            input_cache_creation: 0,
        }),
        message_id: Some("msg-1".to_owned()),
        plan_mode: Some(false),
        mcp_status: None,
    });
    let output: String = (1..=12)
        .map(|i| format!("{i:6}\tline {i}: the quick brown fox jumps over the lazy dog\n"))
        .collect();
    let result = Event::ToolResult(ToolResult {
        tool_call_id: "tc-1".to_owned(),
        return_value: ToolReturnValue::ok(
            output,
            "12 lines read from file starting from line 1. Total lines in file: 12.",
        ),
    });

    let mut group = c.benchmark_group("event_line");
    for (label, event) in [
        ("content_part_text", &text),
        ("status_update", &status),
        ("tool_result_read_file", &result),
    ] {
        group.bench_function(label, |b| b.iter(|| notification_line("event", black_box(event))));
    }
    group.finish();
}

criterion_group!(benches, bench_inbound, bench_events);
criterion_main!(benches);
