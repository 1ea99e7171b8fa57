//! Overhead of the tool-call pipeline, without the tool's own work: what every call pays for the
//! canonical dedup key, the dedup state machine, hooks (none configured), approval (auto, under yolo),
//! the output budget and the result plumbing.
//!
//! `cargo bench -p kimi-core --bench pipeline`; figures are recorded in docs/benchmarks.md.

use std::hint::black_box;
use std::sync::Arc;

use criterion::{Criterion, criterion_group, criterion_main};
use futures::future::BoxFuture;
use kimi_core::HookEngine;
use kimi_core::{
    ApprovalAsk, CallContext, CallKey, DedupTracker, Dispatch, OutputBudget, Plan, Tool, Toolset,
};
use kimi_core::{ApprovalRuntime, ApprovalSource, ApprovalState};
use kimi_llm::ToolSpec;
use kimi_wire::message::{FunctionBody, ToolCall, ToolReturnValue};
use kimi_wire::{Server, ServerConfig};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// A tool that does nothing: read-only, or a side effect that needs approval.
#[derive(Debug)]
struct Noop {
    spec: ToolSpec,
    side_effect: bool,
}

impl Noop {
    fn new(name: &str, side_effect: bool) -> Arc<Self> {
        Arc::new(Self {
            spec: ToolSpec {
                name: name.to_owned(),
                description: "Does nothing.".to_owned(),
                parameters: json!({"type": "object"}),
            },
            side_effect,
        })
    }
}

impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        _args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        let side_effect = self.side_effect;
        Box::pin(async move {
            let run: BoxFuture<'static, ToolReturnValue> =
                Box::pin(async { ToolReturnValue::ok("ok\n", "Done.") });
            Ok(if side_effect {
                Plan::side_effect(
                    ApprovalAsk {
                        action: "run command".to_owned(),
                        description: "Run command `true`".to_owned(),
                        display: Vec::new(),
                        detail_display: Vec::new(),
                        writes: Vec::new(),
                    },
                    run,
                )
            } else {
                Plan::read_only(run)
            })
        })
    }
}

/// Typical arguments: a Grep call as a model writes it.
fn grep_args() -> String {
    r#"{"pattern": "fn\\s+main", "path": "src", "output_mode": "content", "-n": true, "-C": 2, "glob": "*.rs", "head_limit": 250}"#
        .to_owned()
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        r#type: "function".to_owned(),
        id: id.to_owned(),
        function: FunctionBody {
            name: name.to_owned(),
            arguments: Some(grep_args()),
        },
        extras: None,
    }
}

fn bench_call_key(c: &mut Criterion) {
    let args: Value = serde_json::from_str(&grep_args()).unwrap_or(Value::Null);
    c.bench_function("dedup/call_key", |b| {
        b.iter(|| CallKey::new(black_box("Grep"), black_box(&args)))
    });
    c.bench_function("dedup/observe_one_step", |b| {
        let key = CallKey::new("Grep", &args);
        b.iter(|| {
            let mut tracker = DedupTracker::new();
            tracker.begin_step();
            black_box(tracker.observe(black_box(&key), "tc-1"));
            black_box(tracker.end_step())
        })
    });
}

fn bench_dispatch(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    // The server is never run: under yolo nothing is sent to the client.
    let (_server, client) = Server::new(ServerConfig::default());
    let approvals = Arc::new(ApprovalRuntime::new(
        client,
        ApprovalState {
            yolo: true,
            ..ApprovalState::default()
        },
    ));
    let toolset = Arc::new(Toolset::new());
    toolset.register(Noop::new("ReadOnly", false));
    toolset.register(Noop::new("SideEffect", true));
    toolset.set_output_budget(OutputBudget::new(None));
    let hooks = Arc::new(HookEngine::new(
        Vec::new(),
        std::env::temp_dir(),
        "bench".to_owned(),
    ));
    let source = ApprovalSource::foreground_turn();

    let mut group = c.benchmark_group("pipeline");
    for (label, tool) in [("read_only", "ReadOnly"), ("side_effect_yolo", "SideEffect")] {
        group.bench_function(label, |b| {
            b.iter(|| {
                runtime.block_on(async {
                    let dispatch = Dispatch::for_step(
                        Arc::clone(&toolset),
                        Arc::clone(&approvals),
                        Arc::clone(&hooks),
                        source.clone(),
                        CancellationToken::new(),
                    );
                    let mut dedup = DedupTracker::new();
                    dedup.begin_step();
                    let calls = dispatch.attempt();
                    let running = calls.start(call("tc-1", tool), &mut dedup);
                    calls.answer_complete();
                    let result = running.await;
                    dedup.end_step();
                    black_box(result)
                })
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench_call_key, bench_dispatch);
criterion_main!(benches);
