//! Ends of life as a client sees them (issue 12): SIGINT, SIGHUP and SIGTERM end a session as closing
//! stdin does. The running turn is cancelled and its `prompt` answered `cancelled` after its `TurnEnd`,
//! the commands it started are gone, and the process exits 0. A client such as the TypeScript SDK waits
//! forever on a `prompt` that a process exiting 0 never answered.

use std::time::Duration;

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    READ_TIMEOUT, TestHome, WireProcess, kinds, payloads, shell_call_line, wait_for_pid, wait_until_gone,
};

/// Well under the server's 5 s shutdown grace: the turn must stop by itself, not be aborted.
const PROMPT_EXIT: Duration = Duration::from_secs(3);

/// A session whose turn runs a long Shell command: auto-approved and running (its pid is returned), or,
/// with `ask`, waiting for its approval.
async fn running_command(
    ask: bool,
) -> Result<(TestHome, tempfile::TempDir, WireProcess, String, Option<u32>)> {
    let pid_dir = tempfile::tempdir()?;
    let pid_file = pid_dir.path().join("sleeper");
    // `exec` makes the recorded pid the sleeper itself, the process that must not be left behind.
    let command = format!("sh -c 'echo $$ > {}; exec sleep 1000'", pid_file.display());
    let scripts = [&shell_call_line("tc-1", &command)[..], "text: never"];
    let mut home = TestHome::new()?.scripted(&scripts)?;
    if !ask {
        home = home.arg("--yolo");
    }
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    if ask {
        wire.peek_request("ApprovalRequest").await?;
        return Ok((home, pid_dir, wire, prompt, None));
    }
    let pid = wait_for_pid(&pid_file).await?;
    Ok((home, pid_dir, wire, prompt, Some(pid)))
}

/// Sends `signal` (a `kill` name) to the test's own child, by its id.
async fn signal(wire: &WireProcess, signal: &str) -> Result<()> {
    let pid = wire.child.id().context("no pid")?;
    let status = tokio::process::Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .await?;
    anyhow::ensure!(status.success(), "kill -{signal} failed");
    Ok(())
}

/// Reads the prompt's answer and the rest of stdout, then the exit status, all within [`PROMPT_EXIT`]
/// (a deadline on the awaited end, not a measured duration); checks what every end of life owes the
/// client.
async fn assert_clean_end(wire: &mut WireProcess, prompt: &str) -> Result<Vec<Value>> {
    tokio::time::timeout(PROMPT_EXIT, clean_end(wire, prompt))
        .await
        .context("the session did not end within 3 s: it waited for the shutdown grace")?
}

async fn clean_end(wire: &mut WireProcess, prompt: &str) -> Result<Vec<Value>> {
    let (response, before) = wire.read_response(prompt).await?;
    assert_eq!(response["result"], json!({"status": "cancelled"}), "{response}");
    let kinds = kinds(&before);
    assert_eq!(
        kinds.iter().filter(|k| *k == "event:TurnEnd").count(),
        1,
        "{kinds:?}"
    );
    let status = tokio::time::timeout(READ_TIMEOUT, wire.child.wait()).await??;
    assert_eq!(status.code(), Some(0), "{status:?}");
    Ok(before)
}

#[tokio::test]
async fn sigint_sighup_and_sigterm_mid_command_answer_the_prompt_and_stop_the_command() -> Result<()> {
    for name in ["INT", "HUP", "TERM"] {
        let (_home, _pids, mut wire, prompt, pid) = running_command(false).await?;
        signal(&wire, name).await?;
        assert_clean_end(&mut wire, &prompt)
            .await
            .with_context(|| format!("SIG{name}"))?;
        wait_until_gone(pid.context("pid")?, &format!("the command after SIG{name}")).await?;
    }
    Ok(())
}

#[tokio::test]
async fn closing_stdin_mid_command_answers_the_prompt_and_stops_the_command() -> Result<()> {
    let (_home, _pids, mut wire, prompt, pid) = running_command(false).await?;
    wire.close_stdin();
    assert_clean_end(&mut wire, &prompt).await?;
    wait_until_gone(pid.context("pid")?, "the command after EOF").await
}

#[tokio::test]
async fn a_signal_while_an_approval_waits_rejects_it_and_answers_the_prompt() -> Result<()> {
    let (_home, _pids, mut wire, prompt, _) = running_command(true).await?;
    signal(&wire, "HUP").await?;
    let before = assert_clean_end(&mut wire, &prompt).await?;
    let responses = payloads(&before, "ApprovalResponse");
    assert_eq!(responses.len(), 1, "{before:?}");
    assert_eq!(responses[0]["response"], json!("reject"));
    Ok(())
}
