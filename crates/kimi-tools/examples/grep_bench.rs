//! Times the `Grep` tool in process, for `scripts/bench_grep.py` (which compares it with `rg`).
//!
//! `grep_bench <dir> <pattern> <output_mode> <runs>` runs one warm-up search and then `runs` timed
//! searches of `dir` (as the work dir) with `head_limit: 0`, and prints one line of JSON: the time of
//! each run in milliseconds and the size of the last output.
#![expect(clippy::print_stdout, reason = "a benchmark driver reports on stdout")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use kimi_core::Environment;
use kimi_core::{CallContext, Tool};
use kimi_tools::file::{FileSettings, Grep};
use kimi_wire::message::{ToolOutput, ToolReturnValue};
use serde_json::json;
use tokio_util::sync::CancellationToken;

async fn grep_once(tool: &Arc<Grep>, pattern: &str, mode: &str) -> anyhow::Result<ToolReturnValue> {
    let args = json!({"pattern": pattern, "path": ".", "output_mode": mode, "head_limit": 0});
    let ctx = CallContext::new("bench", None, CancellationToken::new());
    match Arc::clone(tool).plan(args, ctx).await {
        Ok(plan) => Ok(plan.run.await),
        Err(value) => anyhow::bail!("bad arguments: {}", value.message),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(dir), Some(pattern), Some(mode), Some(runs)) =
        (args.next(), args.next(), args.next(), args.next())
    else {
        anyhow::bail!("usage: grep_bench <dir> <pattern> <output_mode> <runs>");
    };
    let runs: usize = runs.parse()?;
    let dir = PathBuf::from(dir);
    let tool = Arc::new(Grep::new(
        Arc::new(Environment::new(dir.clone(), Vec::new(), dir)),
        FileSettings::default(),
    ));
    let mut last = grep_once(&tool, &pattern, &mode).await?;
    let mut times = Vec::with_capacity(runs);
    for _ in 0..runs {
        let started = Instant::now();
        last = grep_once(&tool, &pattern, &mode).await?;
        times.push(started.elapsed().as_secs_f64() * 1000.0);
    }
    let output_chars = match &last.output {
        ToolOutput::Text(text) => text.chars().count(),
        ToolOutput::Parts(parts) => parts.len(),
    };
    let report = json!({"times_ms": times, "is_error": last.is_error, "output_chars": output_chars,
                        "message": last.message});
    println!("{report}");
    Ok(())
}
