//! The real client (issue 12): the published TypeScript SDK, `@moonshot-ai/kimi-agent-sdk` pinned in
//! `tests/sdk/package-lock.json`, drives this binary through the node tests in `tests/sdk/`.
//!
//! They run from here, inside `cargo test`, rather than as a separate step of `.ci/run`: the binary they
//! drive is then the one built for this test run (`common::binary`), never a stale build, and the
//! project's one test command runs them. `.ci/run` installs the SDK (`npm ci`) and sets
//! `KIMI_AGENT_SDK_TESTS=required`, so in CI a missing node or SDK fails the run; elsewhere this test says
//! why it did not run and passes.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, bail};

use crate::common::binary;

/// All the SDK tests together: the "under two minutes in CI". They take about 10 s on a busy
/// 2-core machine (tests/sdk/README.md), so the bound only catches a wedged run.
const SDK_TESTS_LIMIT: Duration = Duration::from_secs(120);

fn sdk_tests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("sdk")
}

/// Why the SDK tests cannot run here, if they cannot.
async fn missing_prerequisite(dir: &Path) -> Option<String> {
    let node = tokio::process::Command::new("node")
        .arg("--version")
        .output()
        .await;
    if !node.is_ok_and(|o| o.status.success()) {
        return Some("node is not installed".into());
    }
    if !dir
        .join("node_modules/@moonshot-ai/kimi-agent-sdk/package.json")
        .exists()
    {
        return Some(format!(
            "the SDK is not installed (run `npm ci` in {})",
            dir.display()
        ));
    }
    None
}

#[expect(
    clippy::print_stderr,
    reason = "a skipped test says why, and a failed run shows node's report"
)]
fn report(text: &str) {
    eprintln!("{text}");
}

#[tokio::test]
async fn the_published_typescript_sdk_drives_the_binary() -> Result<()> {
    let dir = sdk_tests_dir();
    if let Some(why) = missing_prerequisite(&dir).await {
        if std::env::var("KIMI_AGENT_SDK_TESTS").as_deref() == Ok("required") {
            bail!("the SDK tests are required but cannot run: {why}");
        }
        report(&format!("SDK tests skipped: {why}"));
        return Ok(());
    }
    let mcp_server = super::mcp::test_server()?;
    let run = tokio::process::Command::new("node")
        .args(["--test", "--test-concurrency=2", "--test-timeout=60000"])
        .current_dir(&dir)
        .env("KIMI_AGENT_BIN", binary())
        .env("KIMI_AGENT_MCP_TEST_SERVER", &mcp_server)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(SDK_TESTS_LIMIT, run)
        .await
        .context("the SDK tests did not finish in time")??;
    if !output.status.success() {
        report(&String::from_utf8_lossy(&output.stdout));
        report(&String::from_utf8_lossy(&output.stderr));
        bail!("the SDK tests failed ({})", output.status);
    }
    let summary = String::from_utf8_lossy(&output.stdout);
    let passed = summary
        .lines()
        .find_map(|line| line.strip_prefix("# pass "))
        .context("no summary from node --test")?;
    anyhow::ensure!(passed.trim().parse::<u32>()? > 0, "no SDK test ran:\n{summary}");
    Ok(())
}
