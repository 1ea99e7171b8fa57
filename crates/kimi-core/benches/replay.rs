//! What reading a recorded session back costs: [`WireFileReader`] over a 10 MB `wire.jsonl` of realistic
//! turns (thinking and text parts of varied length, a tool call, a large tool result, status updates),
//! each record turned into the event line `replay` sends. The client's side (the outbox and the pipe) is
//! left out: this is the code path `scripts/bench`'s replay row measures through the binary.
//!
//! `cargo bench -p kimi-core --bench replay`; figures are recorded in docs/benchmarks.md.

#![allow(
    clippy::expect_used,
    reason = "a bench whose setup or reading fails has nothing to measure"
)]

use std::hint::black_box;
use std::io::Write as _;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use kimi_core::WireFileReader;
use serde_json::{Value, json};

const FILE_BYTES: usize = 10 * 1024 * 1024;

/// A deterministic stand-in for random text: words (some non-ASCII, some escaped) cycled from a seed.
fn text(seed: &mut u64, bytes: usize) -> String {
    const WORDS: [&str; 12] = [
        "the",
        "agent",
        "reads",
        "files",
        "and",
        "edits",
        "code;",
        "résumé",
        "日本語",
        "🚀",
        "\"quotes\"",
        "\\path\n",
    ];
    let mut out = String::with_capacity(bytes + 16);
    while out.len() < bytes {
        *seed = seed
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let word = WORDS[usize::try_from(*seed >> 60).unwrap_or(0) % WORDS.len()];
        out.push_str(word);
        out.push(' ');
    }
    out
}

fn record(line: &mut Vec<u8>, timestamp: f64, kind: &str, payload: Value) {
    let record = json!({"timestamp": timestamp, "message": {"type": kind, "payload": payload}});
    serde_json::to_writer(&mut *line, &record).expect("serializable");
    line.push(b'\n');
}

/// A `wire.jsonl` of about `FILE_BYTES`: the header, then turns until the size is reached.
fn session_file(path: &std::path::Path) -> u64 {
    let mut out = Vec::with_capacity(FILE_BYTES + 64 * 1024);
    out.extend_from_slice(b"{\"type\": \"metadata\", \"protocol_version\": \"1.10\"}\n");
    let mut seed = 20;
    let mut turn = 0u32;
    while out.len() < FILE_BYTES {
        turn += 1;
        let at = f64::from(turn);
        let call = format!("tc-{turn}");
        let sized = |seed: &mut u64, lo: usize, span: usize| {
            lo + usize::try_from(*seed % 1000).unwrap_or(0) * span / 1000
        };
        let (think, said, output) = (
            sized(&mut seed, 100, 1900),
            sized(&mut seed, 50, 2950),
            sized(&mut seed, 100, 7900),
        );
        record(
            &mut out,
            at,
            "TurnBegin",
            json!({"user_input": text(&mut seed, 200)}),
        );
        record(&mut out, at, "StepBegin", json!({"n": 1}));
        record(
            &mut out,
            at,
            "ContentPart",
            json!({"type": "think", "think": text(&mut seed, think), "encrypted": null}),
        );
        record(
            &mut out,
            at,
            "ContentPart",
            json!({"type": "text", "text": text(&mut seed, said)}),
        );
        record(
            &mut out,
            at,
            "ToolCall",
            json!({"type": "function", "id": call,
            "function": {"name": "Shell", "arguments": "{\"command\": \"ls -la src\"}"}, "extras": null}),
        );
        record(
            &mut out,
            at,
            "StatusUpdate",
            json!({"context_usage": 0.12, "context_tokens": 12000,
            "max_context_tokens": 100_000, "token_usage": {"input_other": 900, "output": 300,
            "input_cache_read": 11000, "input_cache_creation": 0}, "message_id": "msg-1",
            "plan_mode": false, "mcp_status": null}),
        );
        record(
            &mut out,
            at,
            "ToolResult",
            json!({"tool_call_id": call, "return_value": {"is_error": false,
            "output": text(&mut seed, output), "message": "", "display": [], "extras": null}}),
        );
        record(&mut out, at, "StepBegin", json!({"n": 2}));
        record(
            &mut out,
            at,
            "ContentPart",
            json!({"type": "text", "text": text(&mut seed, 300)}),
        );
        record(&mut out, at, "TurnEnd", json!({}));
    }
    std::fs::File::create(path)
        .and_then(|mut file| file.write_all(&out))
        .expect("the session file is written");
    u64::try_from(out.len()).expect("a small file")
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("wire.jsonl");
    let bytes = session_file(&path);

    let mut group = c.benchmark_group("replay");
    group.throughput(Throughput::Bytes(bytes));
    group.sample_size(20);
    group.bench_function("wire_file_reader_10_MB_to_event_lines", |b| {
        b.iter(|| {
            runtime.block_on(async {
                let mut reader = WireFileReader::open(&path)
                    .await
                    .expect("readable")
                    .expect("the file exists");
                let mut items = 0u64;
                while let Some(item) = reader.next_item().await.expect("readable") {
                    black_box(item);
                    items += 1;
                }
                assert_eq!(
                    reader.skipped(),
                    0,
                    "every record of the generated file is readable"
                );
                items
            })
        });
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
