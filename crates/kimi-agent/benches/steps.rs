//! What the agent costs per step, through the binary: one turn of 1 000 steps, each the model calling a
//! cheap tool (`SetTodoList`, in memory), scripted by `_scripted_echo`, then a last step that answers with
//! text. Everything a real step does is in the figure: the wire events on stdout, wire.jsonl and
//! context.jsonl, the toolset pipeline (dedup, approval, hooks, output budget), the history handed to the
//! provider and the compaction check. The model's own time is measured apart (`scripted_model`: the
//! same 1 001 scripts parsed and streamed in process), so
//! `per-step overhead = (turn - scripted_model) / 1 001`.
//!
//! `cargo bench -p kimi-agent --bench steps`; figures are recorded in docs/benchmarks.md.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use futures::StreamExt as _;
use kimi_llm::echo::ScriptedEchoProvider;
use kimi_llm::{ChatProvider as _, ChatRequest};
use serde_json::json;

/// Tool-calling steps per turn; one text step follows.
const STEPS: usize = 1_000;

/// The model's answers: `STEPS` calls of SetTodoList with arguments that differ (so repeat detection
/// stays quiet, as in a real session), then a text answer that ends the turn.
fn scripts() -> Vec<String> {
    let mut scripts: Vec<String> = (0..STEPS)
        .map(|i| {
            let arguments = json!({"todos": [{"title": format!("step {i}"), "status": "in_progress"}]});
            let call =
                json!({"id": format!("tc-{i}"), "name": "SetTodoList", "arguments": arguments.to_string()});
            format!("tool_call: {call}")
        })
        .collect();
    scripts.push("text: done".to_owned());
    scripts
}

/// A fresh home for one run: share dir, work dir, scripts and a config allowing enough steps.
struct Home {
    root: tempfile::TempDir,
}

impl Home {
    fn new(scripts: &[String]) -> Result<Self, String> {
        let root = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let path = |p: &str| root.path().join(p);
        for dir in ["home/.kimi", "work"] {
            std::fs::create_dir_all(path(dir)).map_err(|e| format!("{dir}: {e}"))?;
        }
        let scripts_json = serde_json::to_string(scripts).map_err(|e| e.to_string())?;
        std::fs::write(path("scripts.json"), scripts_json).map_err(|e| format!("scripts: {e}"))?;
        let config = json!({
            "default_model": "scripted",
            "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 1_000_000}},
            "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "",
                "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": path("scripts.json").to_string_lossy()}}},
            "loop_control": {"max_steps_per_turn": STEPS + 10},
        });
        std::fs::write(path("config.json"), config.to_string()).map_err(|e| format!("config: {e}"))?;
        Ok(Self { root })
    }

    fn path(&self, p: &str) -> PathBuf {
        self.root.path().join(p)
    }
}

/// Starts the binary, initializes it, then times one prompt from request to response. Fails unless the
/// turn finished after exactly `STEPS` tool results.
fn timed_turn(home: &Home) -> Result<Duration, String> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kimi-agent"))
        .arg("--wire")
        .arg("--config-file")
        .arg(home.path("config.json"))
        .arg("--work-dir")
        .arg(home.path("work"))
        .env("HOME", home.path("home"))
        .env("KIMI_SHARE_DIR", home.path("home/.kimi"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("spawning kimi-agent: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    let mut read_until_response = |id: &str, tool_results: &mut usize| -> Result<String, String> {
        let marker = format!("\"id\":\"{id}\"");
        loop {
            line.clear();
            if stdout.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
                return Err(format!("kimi-agent closed stdout before answering {id}"));
            }
            if line.contains("\"type\":\"ToolResult\"") {
                *tool_results += 1;
            } else if line.contains(&marker) && !line.contains("\"method\"") {
                return Ok(line.clone());
            }
        }
    };
    let send = |stdin: &mut std::process::ChildStdin, message: serde_json::Value| {
        writeln!(stdin, "{message}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to kimi-agent: {e}"))
    };

    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {"protocol_version": "1.10"}}),
    )?;
    read_until_response("init", &mut 0)?;
    let started = Instant::now();
    send(
        &mut stdin,
        json!({"jsonrpc": "2.0", "id": "turn", "method": "prompt", "params": {"user_input": "go"}}),
    )?;
    let mut tool_results = 0;
    let response = read_until_response("turn", &mut tool_results)?;
    let elapsed = started.elapsed();
    drop(stdin);
    let _ = child.wait();
    if !response.contains("\"status\":\"finished\"") || tool_results != STEPS {
        return Err(format!(
            "the turn did not run {STEPS} tool steps ({tool_results} results): {response}"
        ));
    }
    Ok(elapsed)
}

fn bench_turn(c: &mut Criterion) {
    let scripts = scripts();
    let mut group = c.benchmark_group("steps");
    group.sample_size(10);
    group.bench_function("turn_1000_tool_steps", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let run = Home::new(&scripts).and_then(|home| timed_turn(&home));
                match run {
                    Ok(elapsed) => total += elapsed,
                    Err(e) => panic!("benchmark run failed: {e}"),
                }
            }
            total
        })
    });
    group.finish();
}

/// The model's share: the same scripts parsed and streamed by the provider alone.
fn bench_model(c: &mut Criterion) {
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return;
    };
    let scripts = scripts();
    let mut group = c.benchmark_group("steps");
    group.sample_size(10);
    group.bench_function("scripted_model_1001_calls", |b| {
        b.iter_batched(
            || scripts.clone(),
            |scripts| {
                runtime.block_on(async {
                    let calls = scripts.len();
                    let provider = ScriptedEchoProvider::from_scripts(scripts);
                    let mut events = 0usize;
                    for _ in 0..calls {
                        let request = ChatRequest {
                            system_prompt: "",
                            tools: &[],
                            history: &[],
                        };
                        if let Ok(mut stream) = provider.generate(request).await {
                            while let Some(event) = stream.next().await {
                                events += usize::from(event.is_ok());
                            }
                        }
                    }
                    std::hint::black_box(events)
                })
            },
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_turn, bench_model);
criterion_main!(benches);
