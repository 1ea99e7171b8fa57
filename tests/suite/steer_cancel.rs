//! `steer` and `cancel` during a turn, and EOF mid-turn. A turn is held open by an external tool whose
//! ToolCallRequest the test has not answered yet, so nothing here depends on timing.

use std::time::Duration;

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    TestHome, WireProcess, approval_answer, external_tool, init_with_tools, kinds, payloads, rpc_result,
    shell_call_line, status_without_usage, summarize, summary_kinds, tool_call_line,
};

/// Well under the server's 5 s shutdown grace: an exit that waited for the grace missed this deadline.
const UNDER_GRACE: Duration = Duration::from_secs(3);

/// Closes stdin and waits for the exit, at most [`UNDER_GRACE`]: a hang guard on the awaited exit that also
/// tells a turn that stopped by itself from one aborted when the grace ran out.
async fn exit_within_grace(wire: &mut WireProcess) -> Result<std::process::ExitStatus> {
    tokio::time::timeout(UNDER_GRACE, wire.wait_exit())
        .await
        .context("no exit within 3 s of EOF: the turn waited for the shutdown grace")?
}

/// Starts a turn whose first step calls `ext_tool` and waits for the call; `rest` are the later scripts.
/// Returns the messages up to and including the ToolCallRequest.
async fn held_turn(rest: &[&str]) -> Result<(TestHome, WireProcess, String, Vec<Value>)> {
    let call = format!(
        "text: working\n{}",
        tool_call_line("tc-1", "ext_tool", Some(r#"{"path": "a"}"#))
    );
    let mut scripts = vec![call.as_str()];
    scripts.extend_from_slice(rest);
    let home = TestHome::new()?.scripted(&scripts)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    let prompt = wire.start_prompt(json!("run")).await?;
    let (request, mut before) = wire
        .read_until(|m| m["params"]["type"] == "ToolCallRequest")
        .await?;
    before.push(request);
    Ok((home, wire, prompt, before))
}

fn tool_ok() -> Value {
    json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "ok", "message": "", "display": []}})
}

fn event(kind: &str, payload: Value) -> Value {
    json!({"method": "event", "type": kind, "payload": payload})
}

#[tokio::test]
async fn steer_during_a_turn_is_injected_after_the_step() -> Result<()> {
    let (_home, mut wire, prompt, before) = held_turn(&["text: done after steer"]).await?;
    let steer = wire
        .request("steer", json!({"user_input": "also do this"}))
        .await?;
    let response = wire.response_to(&steer).await?;
    assert_eq!(response, rpc_result(&steer, json!({"status": "steered"})));
    wire.respond("tc-1", tool_ok()).await?;
    let (response, after) = wire.read_response(&prompt).await?;
    assert_eq!(response, rpc_result(&prompt, json!({"status": "finished"})));

    let mut all = before;
    all.extend(after);
    assert_eq!(
        summarize(&all),
        vec![
            event("TurnBegin", json!({"user_input": "run"})),
            event("StepBegin", json!({"n": 1})),
            event("ContentPart", json!({"type": "text", "text": "working"})),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "ext_tool", "arguments": "{\"path\": \"a\"}"}, "extras": null})
            ),
            event("StatusUpdate", status_without_usage()),
            json!({"method": "request", "type": "ToolCallRequest", "payload": {"id": "tc-1", "name": "ext_tool", "arguments": "{\"path\": \"a\"}"}}),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "ok", "message": "", "display": [], "extras": null}})
            ),
            event("SteerInput", json!({"user_input": "also do this"})),
            event("StepBegin", json!({"n": 2})),
            event("ContentPart", json!({"type": "text", "text": "done after steer"})),
            event("StatusUpdate", status_without_usage()),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn steer_with_content_parts_is_echoed_in_steer_input() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn(&["text: done"]).await?;
    let input = json!([{"type": "text", "text": "first"}, {"type": "text", "text": "second"}]);
    let steer = wire.request("steer", json!({"user_input": input})).await?;
    let response = wire.response_to(&steer).await?;
    assert_eq!(response["result"], json!({"status": "steered"}));
    wire.respond("tc-1", tool_ok()).await?;
    let (response, after) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&after, "SteerInput"),
        vec![&json!({"user_input": input})]
    );
    Ok(())
}

#[tokio::test]
async fn two_steers_are_both_injected_in_order() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn(&["text: done"]).await?;
    for text in ["one", "two"] {
        let steer = wire.request("steer", json!({"user_input": text})).await?;
        let response = wire.response_to(&steer).await?;
        assert_eq!(response["result"], json!({"status": "steered"}));
    }
    wire.respond("tc-1", tool_ok()).await?;
    let (response, after) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&after, "SteerInput"),
        vec![&json!({"user_input": "one"}), &json!({"user_input": "two"})]
    );
    assert_eq!(payloads(&after, "StepBegin"), vec![&json!({"n": 2})]);
    Ok(())
}

#[tokio::test]
async fn cancel_answers_at_once_and_the_prompt_ends_cancelled() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn(&["text: after cancel"]).await?;
    let cancel = wire.request("cancel", json!({})).await?;
    // The cancel answer does not wait for the turn.
    let response = wire.response_to(&cancel).await?;
    assert_eq!(response, rpc_result(&cancel, json!({})));
    let (response, after) = wire.read_response(&prompt).await?;
    assert_eq!(response, rpc_result(&prompt, json!({"status": "cancelled"})));
    let kinds = kinds(&after);
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("event:TurnEnd"),
        "{kinds:?}"
    );
    assert_eq!(
        kinds.iter().filter(|k| *k == "event:TurnEnd").count(),
        1,
        "{kinds:?}"
    );
    assert!(
        !kinds
            .iter()
            .any(|k| k == "event:StepInterrupted" || k == "event:StepBegin"),
        "{kinds:?}"
    );

    // The turn is over: cancel again is an error, and a new prompt works.
    wire.assert_alive().await?;
    let (response, messages) = wire.prompt(json!("again")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "after cancel"})]
    );
    Ok(())
}

#[tokio::test]
async fn steer_after_cancel_is_refused() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn(&[]).await?;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "cancelled"}));
    let steer = wire.request("steer", json!({"user_input": "late"})).await?;
    wire.expect_error(Some(&steer), -32000, "No agent turn is in progress")
        .await
}

#[tokio::test]
async fn closing_stdin_mid_turn_exits_zero_quickly() -> Result<()> {
    let (_home, mut wire, _prompt, _) = held_turn(&["text: never"]).await?;
    // Waited on with a deadline well under the server's 5 s shutdown grace: the turn must stop by itself,
    // not be aborted after the grace runs out.
    let status = exit_within_grace(&mut wire).await?;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

#[tokio::test]
async fn closing_stdin_when_idle_exits_zero() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let status = exit_within_grace(&mut wire).await?;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

#[tokio::test]
async fn steer_while_waiting_for_approval_is_accepted_and_consumed() -> Result<()> {
    let call = format!("text: working\n{}", shell_call_line("tc-1", "echo hi"));
    let home = TestHome::new()?.scripted(&[&call, "text: done after steer"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("run")).await?;
    let approval = wire.peek_request("ApprovalRequest").await?;
    let steer = wire
        .request("steer", json!({"user_input": "also do this"}))
        .await?;
    let response = wire.response_to(&steer).await?;
    assert_eq!(response, rpc_result(&steer, json!({"status": "steered"})));
    wire.send(&approval_answer(&approval, "approve")).await?;
    let (response, after) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summary_kinds(&after),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:ContentPart",
            "event:ToolCall",
            "event:StatusUpdate",
            "request:ApprovalRequest",
            "event:ApprovalResponse",
            "event:ToolResult",
            "event:SteerInput",
            "event:StepBegin",
            "event:ContentPart",
            "event:StatusUpdate",
            "event:TurnEnd",
        ]
    );
    assert_eq!(
        payloads(&after, "SteerInput"),
        vec![&json!({"user_input": "also do this"})]
    );
    Ok(())
}

#[tokio::test]
async fn cancel_while_waiting_for_approval_rejects_it() -> Result<()> {
    let call = shell_call_line("tc-1", "echo hi");
    let home = TestHome::new()?.scripted(&[&call, "text: after"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("run")).await?;
    let approval = wire.wait_request("ApprovalRequest").await?;
    let cancel = wire.request("cancel", json!({})).await?;
    let response = wire.response_to(&cancel).await?;
    assert_eq!(response, rpc_result(&cancel, json!({})));
    let (response, mut after) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "cancelled"}));
    // Reference: the turn's pending approvals are cancelled with a reject. That event travels outside the
    // turn, so it may come after the prompt's answer.
    if payloads(&after, "ApprovalResponse").is_empty() {
        after.push(wire.wait_event("ApprovalResponse").await?);
    }
    assert_eq!(
        payloads(&after, "ApprovalResponse"),
        vec![
            &json!({"request_id": approval["params"]["payload"]["id"], "response": "reject", "feedback": ""})
        ]
    );
    assert!(kinds(&after).contains(&"event:TurnEnd".to_owned()));
    // A late approval does nothing; the server is idle and a new prompt runs.
    wire.send(&approval_answer(&approval, "approve")).await?;
    wire.assert_alive().await?;
    let (response, _) = wire.prompt(json!("again")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    Ok(())
}

#[tokio::test]
async fn closing_stdin_right_after_a_prompt_exits_zero_quickly() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.start_prompt(json!("hi")).await?;
    let status = exit_within_grace(&mut wire).await?;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

#[tokio::test]
async fn sigterm_mid_turn_ends_the_session_like_eof() -> Result<()> {
    let (_home, mut wire, _prompt, _) = held_turn(&["text: never"]).await?;
    let pid = wire.child.id().context("no pid")?;
    // Only the child this test started, by its id.
    let killed = tokio::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .await?;
    assert!(killed.success());
    let status = tokio::time::timeout(UNDER_GRACE, wire.child.wait())
        .await
        .context("no exit within 3 s of SIGTERM: the turn waited for the shutdown grace")??;
    assert_eq!(status.code(), Some(0), "{status:?}");
    Ok(())
}
