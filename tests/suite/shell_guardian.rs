//! A Shell command's process group is registered with the process guardian: killing the agent with
//! SIGKILL (no cleanup of its own) must not leave the command running.

use anyhow::Result;
use serde_json::json;

use crate::common::{
    READ_TIMEOUT, TestHome, WireProcess, is_alive, shell_call_line, wait_for_pid, wait_until_gone,
};

#[tokio::test]
async fn no_shell_command_outlives_a_sigkilled_agent() -> Result<()> {
    let pid_dir = tempfile::tempdir()?;
    let pid_file = pid_dir.path().join("sleeper");
    // `exec` makes the recorded pid the sleeper itself, the process that would be left behind.
    let command = format!("sh -c 'echo $$ > {}; exec sleep 1000'", pid_file.display());
    let scripts = [&shell_call_line("tc-1", &command)[..], "text: done"];
    let home = TestHome::new()?.scripted(&scripts)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    wire.start_prompt(json!("go")).await?;
    let pid = wait_for_pid(&pid_file).await?;
    assert!(is_alive(pid), "the command should be running");

    // SIGKILL: the agent cleans up nothing; its guardian must.
    wire.child.start_kill()?;
    tokio::time::timeout(READ_TIMEOUT, wire.child.wait()).await??;
    // The guardian acts when it sees its pipe close, a moment after our wait returns.
    wait_until_gone(pid, "the shell command after the agent's SIGKILL").await?;
    Ok(())
}
