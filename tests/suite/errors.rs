//! Bad input and state errors: each test asserts the reference's exact code and message, then proves the
//! server still answers the next request.

use anyhow::Result;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    TestHome, WireProcess, approval_answer, external_tool, init_with_error_data, init_with_tools, payloads,
    rpc_error, rpc_result, shell_call_line, tool_call_line,
};

async fn spawn_ok() -> Result<(TestHome, WireProcess)> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let wire = WireProcess::spawn(&home).await?;
    Ok((home, wire))
}

/// Sends `line` and expects exactly `error` (id null), then that the server still answers; then the
/// same for a client that asked for errors as data, whose `data` names the error's kind.
async fn bad_line_answers(line: &str, code: i64, message: &str) -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    wire.send_raw(line).await?;
    wire.expect_error(None, code, message).await?;
    wire.assert_alive().await?;
    let kind = match (code, message) {
        (-32700, _) => "invalid_json",
        (_, "Invalid response") => "invalid_response",
        _ => "invalid_request",
    };
    wire.initialize(init_with_error_data()).await?;
    wire.send_raw(line).await?;
    wire.expect_error_data(None, code, message, json!({"kind": kind}))
        .await?;
    wire.assert_alive_with_data().await
}

#[tokio::test]
async fn malformed_json_is_a_parse_error_with_a_null_id() -> Result<()> {
    bad_line_answers("{not-json}", -32700, "Invalid JSON format").await
}

#[tokio::test]
async fn a_blank_line_is_a_parse_error() -> Result<()> {
    bad_line_answers("", -32700, "Invalid JSON format").await?;
    bad_line_answers("   \t ", -32700, "Invalid JSON format").await
}

#[tokio::test]
async fn a_wrong_jsonrpc_version_is_an_invalid_request() -> Result<()> {
    bad_line_answers(r#"{"jsonrpc":"2.1","id":"bad"}"#, -32600, "Invalid request").await
}

#[tokio::test]
async fn an_integer_id_is_an_invalid_request() -> Result<()> {
    bad_line_answers(
        r#"{"jsonrpc":"2.0","id":7,"method":"cancel"}"#,
        -32600,
        "Invalid request",
    )
    .await
}

#[tokio::test]
async fn a_batch_array_is_an_invalid_request() -> Result<()> {
    bad_line_answers(
        r#"[{"jsonrpc":"2.0","id":"a","method":"cancel"}]"#,
        -32600,
        "Invalid request",
    )
    .await
}

#[tokio::test]
async fn a_json_scalar_is_an_invalid_request() -> Result<()> {
    bad_line_answers("42", -32600, "Invalid request").await
}

#[tokio::test]
async fn a_response_without_result_or_error_is_an_invalid_response() -> Result<()> {
    // Reference: only an explicit `"method": null` gets this answer ...
    bad_line_answers(
        r#"{"jsonrpc":"2.0","id":"x","method":null}"#,
        -32600,
        "Invalid response",
    )
    .await?;
    // ... without the key the line is dropped unanswered, as is an error object on any message that
    // is not one.
    let (_home, mut wire) = spawn_ok().await?;
    wire.send_raw(r#"{"jsonrpc":"2.0","id":"x"}"#).await?;
    wire.assert_alive().await?;
    bad_line_answers(
        r#"{"jsonrpc":"2.0","id":"x","method":"cancel","error":{"code":"bad"}}"#,
        -32600,
        "Invalid request",
    )
    .await
}

#[tokio::test]
async fn an_unknown_method_is_named_in_the_error() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    wire.send(&json!({"jsonrpc": "2.0", "id": "bad", "method": "nope"}))
        .await?;
    wire.expect_error(Some("bad"), -32601, "Unexpected method received: nope")
        .await?;
    wire.assert_alive().await
}

#[tokio::test]
async fn a_notification_of_an_unknown_method_gets_no_answer() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    wire.send(&json!({"jsonrpc": "2.0", "method": "nope", "params": {}}))
        .await?;
    // A known method sent as a notification is dropped too (every inbound method needs an id).
    wire.send(&json!({"jsonrpc": "2.0", "method": "cancel"})).await?;
    // The next message must be the answer to this request: nothing was written for the notifications.
    wire.assert_alive().await
}

#[tokio::test]
async fn prompt_without_user_input_is_invalid_params() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    wire.send(&json!({"jsonrpc": "2.0", "id": "bad", "method": "prompt", "params": {}}))
        .await?;
    wire.expect_error(Some("bad"), -32602, "Invalid parameters for method `prompt`")
        .await?;
    wire.assert_alive().await
}

#[tokio::test]
async fn prompt_with_user_input_of_the_wrong_type_is_invalid_params() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    for (n, input) in [json!(5), json!({"text": "hi"}), json!(null), json!([1, 2])]
        .into_iter()
        .enumerate()
    {
        let id = format!("bad-{n}");
        wire.send(&json!({"jsonrpc": "2.0", "id": id, "method": "prompt", "params": {"user_input": input}}))
            .await?;
        wire.expect_error(Some(&id), -32602, "Invalid parameters for method `prompt`")
            .await?;
    }
    wire.assert_alive().await
}

#[tokio::test]
async fn a_content_part_of_unknown_type_is_invalid_params() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    let input = json!([{"type": "text", "text": "hi"}, {"type": "hologram", "hologram": {"url": "x"}}]);
    wire.send(&json!({"jsonrpc": "2.0", "id": "bad", "method": "prompt", "params": {"user_input": input}}))
        .await?;
    wire.expect_error(Some("bad"), -32602, "Invalid parameters for method `prompt`")
        .await?;
    // The same for steer, whose params are checked before the turn state.
    wire.send(
        &json!({"jsonrpc": "2.0", "id": "bad-steer", "method": "steer", "params": {"user_input": input}}),
    )
    .await?;
    wire.expect_error(Some("bad-steer"), -32602, "Invalid parameters for method `steer`")
        .await?;
    wire.assert_alive().await
}

#[tokio::test]
async fn an_oversized_line_is_skipped_and_answered() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: still here"])?;
    let mut wire =
        WireProcess::spawn_with_env(&home, home.args(), &[("KIMI_AGENT_MAX_LINE_BYTES", "1024")]).await?;
    // A well-formed request, 10 KB long: only its length makes it bad.
    let huge = json!({"jsonrpc": "2.0", "id": "huge", "method": "prompt", "params": {"user_input": "x".repeat(10_240)}});
    wire.send(&huge).await?;
    let error = wire.next().await?;
    assert_eq!(error["id"], Value::Null, "{error}");
    assert_eq!(error["error"]["code"], json!(-32700), "{error}");
    assert_eq!(error["error"]["message"], json!("Invalid JSON format"), "{error}");
    assert_eq!(
        error["error"]["data"]["reason"],
        json!("line too long"),
        "{error}"
    );
    // The rest of the long line was skipped, not read as the next message: the next request is answered.
    wire.assert_alive().await?;
    let (response, _) = wire.prompt(json!("small")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    Ok(())
}

#[tokio::test]
async fn invalid_utf8_is_replaced_not_fatal() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    // Bytes that are not UTF-8 at all: not JSON.
    wire.send_bytes(b"\xff\xfe\xfd").await?;
    wire.expect_error(None, -32700, "Invalid JSON format").await?;
    // Reference: lines are decoded with errors="replace", so a bad byte inside a string survives as U+FFFD.
    wire.send_bytes(b"{\"jsonrpc\":\"2.0\",\"id\":\"u\",\"method\":\"nope\xff\"}")
        .await?;
    wire.expect_error(Some("u"), -32601, "Unexpected method received: nope\u{fffd}")
        .await?;
    wire.assert_alive().await
}

#[tokio::test]
async fn an_answer_to_an_unknown_request_is_ignored() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    wire.respond("nobody-asked", json!({"request_id": "x", "response": "approve"}))
        .await?;
    wire.respond_error("nobody-asked-either", -32000, "no").await?;
    wire.assert_alive().await?;
    let (response, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    Ok(())
}

#[tokio::test]
async fn cancel_and_steer_without_a_turn_are_invalid_state() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.expect_error(Some(&cancel), -32000, "No agent turn is in progress")
        .await?;
    // Reference e2e: cancel may come without params at all.
    wire.send(&json!({"jsonrpc": "2.0", "id": "cancel-bare", "method": "cancel"}))
        .await?;
    wire.expect_error(Some("cancel-bare"), -32000, "No agent turn is in progress")
        .await?;
    let steer = wire
        .request("steer", json!({"user_input": "do something"}))
        .await?;
    wire.expect_error(Some(&steer), -32000, "No agent turn is in progress")
        .await?;
    // The server is not stuck in any state: a prompt still runs.
    let prompt = wire.start_prompt(json!("hi")).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response, rpc_result(&prompt, json!({"status": "finished"})));
    Ok(())
}

/// A turn held open on an external tool whose request is not answered yet.
async fn held_turn() -> Result<(TestHome, WireProcess, String, Value)> {
    let call = tool_call_line("tc-1", "ext_tool", Some(r#"{"path": "a"}"#));
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    let prompt = wire.start_prompt(json!("run")).await?;
    let request = wire.wait_request("ToolCallRequest").await?;
    Ok((home, wire, prompt, request))
}

/// Answers the held tool call and checks the held turn still finishes normally.
async fn release(wire: &mut WireProcess, prompt: &str) -> Result<()> {
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "ok", "message": "", "display": []}}))
        .await?;
    let (response, _) = wire.read_response(prompt).await?;
    assert_eq!(response, rpc_result(prompt, json!({"status": "finished"})));
    wire.assert_alive().await
}

#[tokio::test]
async fn a_second_prompt_during_a_turn_is_refused() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn().await?;
    let second = wire.start_prompt(json!("second")).await?;
    let response = wire.response_to(&second).await?;
    assert_eq!(
        response,
        rpc_error(Some(&second), -32000, "An agent turn is already in progress")
    );
    release(&mut wire, &prompt).await
}

#[tokio::test]
async fn replay_during_a_turn_is_refused() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn().await?;
    let replay = wire.request("replay", json!({})).await?;
    let response = wire.response_to(&replay).await?;
    assert_eq!(
        response,
        rpc_error(Some(&replay), -32000, "An agent turn is already in progress")
    );
    release(&mut wire, &prompt).await
}

#[tokio::test]
async fn initialize_during_a_turn_is_refused() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn().await?;
    let init = wire
        .request("initialize", json!({"protocol_version": "1.10"}))
        .await?;
    let response = wire.response_to(&init).await?;
    assert_eq!(
        response,
        rpc_error(Some(&init), -32000, "An agent turn is already in progress")
    );
    release(&mut wire, &prompt).await
}

#[tokio::test]
async fn bad_input_during_a_turn_does_not_disturb_it() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn().await?;
    wire.send_raw("{not-json}").await?;
    let (error, _) = wire.read_until(|m| m.get("error").is_some()).await?;
    assert_eq!(error, rpc_error(None, -32700, "Invalid JSON format"));
    release(&mut wire, &prompt).await
}

#[tokio::test]
async fn a_second_prompt_while_waiting_for_approval_is_refused() -> Result<()> {
    let call = format!("text: step1\n{}", shell_call_line("tc-1", "echo hi"));
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("run")).await?;
    let approval = wire.wait_request("ApprovalRequest").await?;
    let payload = &approval["params"]["payload"];
    assert_eq!(approval["id"], payload["id"], "{approval}");
    assert_eq!(payload["tool_call_id"], "tc-1");
    assert_eq!(payload["sender"], "Shell");
    assert_eq!(payload["source_kind"], "foreground_turn");
    assert_eq!(
        payload["display"],
        json!([{"type": "shell", "language": "bash", "command": "echo hi"}])
    );

    let second = wire.start_prompt(json!("second")).await?;
    let response = wire.response_to(&second).await?;
    assert_eq!(
        response,
        rpc_error(Some(&second), -32000, "An agent turn is already in progress")
    );

    wire.send(&approval_answer(&approval, "approve")).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response, rpc_result(&prompt, json!({"status": "finished"})));
    assert_eq!(
        payloads(&messages, "ApprovalResponse"),
        vec![&json!({"request_id": payload["id"], "response": "approve", "feedback": ""})]
    );
    assert_eq!(
        payloads(&messages, "ToolResult"),
        vec![
            &json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "hi\n", "message": "Command executed successfully.", "display": [], "extras": null}})
        ]
    );
    wire.assert_alive().await
}

#[tokio::test]
async fn many_pipelined_requests_are_all_answered_in_order() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    let mut ids = Vec::new();
    for _ in 0..200 {
        ids.push(wire.request("cancel", json!({})).await?);
    }
    for id in &ids {
        wire.expect_error(Some(id), -32000, "No agent turn is in progress")
            .await?;
    }
    Ok(())
}

#[tokio::test]
async fn a_large_prompt_under_the_limit_is_accepted() -> Result<()> {
    let (_home, mut wire) = spawn_ok().await?;
    let big = "word ".repeat(200_000);
    let (response, messages) = wire.prompt(json!(big)).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&messages, "TurnBegin"),
        vec![&json!({"user_input": big})]
    );
    Ok(())
}

#[tokio::test]
async fn invalid_params_for_steer_during_a_turn_do_not_disturb_it() -> Result<()> {
    let (_home, mut wire, prompt, _) = held_turn().await?;
    wire.send(&json!({"jsonrpc": "2.0", "id": "bad-steer", "method": "steer", "params": {"user_input": 42}}))
        .await?;
    let response = wire.response_to("bad-steer").await?;
    assert_eq!(
        response,
        rpc_error(Some("bad-steer"), -32602, "Invalid parameters for method `steer`")
    );
    release(&mut wire, &prompt).await
}
