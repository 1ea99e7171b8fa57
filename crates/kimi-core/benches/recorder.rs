//! What recording a step's events costs the agent's thread: each event serialized once
//! ([`EventLine`]), its message appended to `wire.jsonl`'s buffer, and the batch written in one `write`
//! (the commit the stdout writer makes before it sends the step's lines).
//!
//! `cargo bench -p kimi-core --bench recorder`; figures are recorded in docs/benchmarks.md.

#![allow(
    clippy::expect_used,
    reason = "a bench whose setup or recording fails has nothing to measure"
)]

use std::hint::black_box;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use kimi_core::WireRecorder;
use kimi_wire::jsonrpc::EventLine;
use kimi_wire::message::{
    ContentPart, Event, FunctionBody, StatusUpdate, StepBegin, TextPart, ToolCall, ToolResult,
    ToolReturnValue,
};

/// The events of one ReadFile step: its start, the call, the result (12 numbered lines), the status.
fn step_events(n: u32) -> Vec<Event> {
    let output: String = (1..=12)
        .map(|i| format!("{i:>6}\tline {i}: the quick brown fox jumps over the lazy dog\n"))
        .collect();
    vec![
        Event::StepBegin(StepBegin { n }),
        Event::ToolCall(ToolCall {
            r#type: "function".into(),
            id: format!("call-{n}"),
            function: FunctionBody {
                name: "ReadFile".into(),
                arguments: Some(r#"{"path": "f0001.txt"}"#.into()),
            },
            extras: None,
        }),
        Event::ToolResult(ToolResult {
            tool_call_id: format!("call-{n}"),
            return_value: ToolReturnValue::ok(output, "12 lines read from file starting from line 1."),
        }),
        Event::StatusUpdate(StatusUpdate::default()),
    ]
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    let dir = tempfile::tempdir().expect("a temporary directory");
    let recorder = runtime.block_on(WireRecorder::open(&dir.path().join("wire.jsonl"), None));
    let events = step_events(1);

    c.bench_function("recorder/one_step_serialized_once_recorded_and_committed", |b| {
        b.iter(|| {
            for event in &events {
                let line = EventLine::new(event).expect("serializable");
                recorder
                    .record_event(event, Some(line.message()))
                    .expect("recorded");
                black_box(line.into_line());
            }
            runtime.block_on(recorder.flush()).expect("committed");
        });
    });

    let parts: Vec<Event> = (0..100)
        .map(|i| {
            Event::ContentPart(ContentPart::Text(TextPart {
                text: format!("t{i} "),
            }))
        })
        .collect();
    c.bench_function("recorder/100_text_parts_merged_into_one_record", |b| {
        b.iter_batched(
            || parts.clone(),
            |parts| {
                for event in &parts {
                    let line = EventLine::new(event).expect("serializable");
                    recorder
                        .record_event(event, Some(line.message()))
                        .expect("recorded");
                    black_box(line.into_line());
                }
                runtime.block_on(recorder.flush()).expect("committed");
            },
            BatchSize::SmallInput,
        );
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
