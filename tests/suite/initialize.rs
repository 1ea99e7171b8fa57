//! The `initialize` handshake and external tools registered through it.

use anyhow::Result;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    TestHome, WireProcess, external_tool, init_with_tools, rpc_error, status_without_usage, summarize,
    tool_call_line,
};

/// The built-in slash commands: the reference's, in registry order, with their exact descriptions,
/// then `/btw`.
fn builtin_slash_commands() -> Value {
    json!([
        {"name": "init", "description": "Analyze the codebase and generate an `AGENTS.md` file", "aliases": []},
        {"name": "compact", "description": "Compact the context (optionally with a custom focus, e.g. /compact keep db discussions)", "aliases": []},
        {"name": "clear", "description": "Clear the context", "aliases": ["reset"]},
        {"name": "yolo", "description": "Toggle YOLO mode (auto-approve all actions)", "aliases": []},
        {"name": "afk", "description": "Toggle afk mode (auto-dismiss AskUserQuestion, auto-approve tool calls)", "aliases": []},
        {"name": "plan", "description": "Toggle plan mode. Usage: /plan [on|off|view|clear]", "aliases": []},
        {"name": "add-dir", "description": "Add a directory to the workspace. Usage: /add-dir <path>. Run without args to list added dirs", "aliases": []},
        {"name": "export", "description": "Export current session context to a markdown file", "aliases": []},
        {"name": "import", "description": "Import context from a file or session ID", "aliases": []},
        // Ours in wire mode (the reference has it in its terminal UI only; issue 18).
        {"name": "btw", "description": "Ask a side question without interrupting the main conversation", "aliases": []},
    ])
}

/// The hook events in the reference's `supported_events` order.
fn supported_events() -> Value {
    json!([
        "PreToolUse",
        "PostToolUse",
        "PostToolUseFailure",
        "UserPromptSubmit",
        "Stop",
        "StopFailure",
        "SessionStart",
        "SessionEnd",
        "SubagentStart",
        "SubagentStop",
        "PreCompact",
        "PostCompact",
        "Notification",
    ])
}

/// Takes `slash_commands` out of `result`, checks the built-ins lead it in order and that anything after
/// them is a skill (skills are ours, so their names and descriptions are not the reference's).
fn check_slash_commands(result: &mut Value) -> Result<()> {
    let commands = result
        .as_object_mut()
        .and_then(|r| r.remove("slash_commands"))
        .unwrap_or(Value::Null);
    let commands = commands.as_array().cloned().unwrap_or_default();
    let builtins = builtin_slash_commands();
    let count = builtins.as_array().map_or(0, Vec::len);
    assert_eq!(
        Value::Array(commands.iter().take(count).cloned().collect()),
        builtins
    );
    for extra in &commands[count.min(commands.len())..] {
        let name = extra["name"].as_str().unwrap_or_default();
        assert!(
            name.starts_with("skill:"),
            "unexpected slash command after the built-ins: {extra}"
        );
        assert!(
            extra["description"].as_str().is_some_and(|d| !d.is_empty()),
            "{extra}"
        );
        assert_eq!(extra["aliases"], json!([]), "{extra}");
    }
    Ok(())
}

fn expected_result() -> Value {
    json!({
        "protocol_version": "1.10",
        "server": {"name": "kimi-agent", "version": env!("CARGO_PKG_VERSION")},
        "hooks": {"supported_events": supported_events(), "configured": {}},
        "capabilities": {"supports_question": true},
        // Extension (docs/protocol.md X1): no sandbox by default.
        "sandbox": {"mode": "danger-full-access", "network": true, "enforced": false, "landlock_abi": null,
                    "writable_roots": null, "error": null},
    })
}

#[tokio::test]
async fn handshake_reports_version_commands_hooks_and_capabilities() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    // Reference: the client's protocol_version is not checked; the server always answers its own.
    let id = wire
        .request("initialize", json!({"protocol_version": "1.1"}))
        .await?;
    let (response, before) = wire.read_response(&id).await?;
    assert_eq!(before, Vec::<Value>::new());
    assert_eq!(response["jsonrpc"], "2.0");
    let mut result = response["result"].clone();
    check_slash_commands(&mut result)?;
    // No external_tools key: none were submitted.
    assert_eq!(result, expected_result());
    Ok(())
}

#[tokio::test]
async fn initialize_accepts_client_info_and_capabilities() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let mut result = wire
        .initialize(json!({
            "protocol_version": "1.10",
            "client": {"name": "test-client", "version": "0.0.1"},
            "capabilities": {"supports_question": false, "supports_plan_mode": true},
            "hooks": [],
        }))
        .await?;
    check_slash_commands(&mut result)?;
    assert_eq!(result, expected_result());
    Ok(())
}

#[tokio::test]
async fn initialize_without_protocol_version_is_invalid_params() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let id = wire.request("initialize", json!({})).await?;
    wire.expect_error(Some(&id), -32602, "Invalid parameters for method `initialize`")
        .await?;
    wire.assert_alive().await
}

#[tokio::test]
async fn external_tools_are_accepted_and_reported() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let tools = [
        external_tool("ext_one"),
        json!({"name": "ext_two", "description": "", "parameters": {"type": "object"}}),
    ];
    let result = wire.initialize(init_with_tools(&tools)).await?;
    assert_eq!(
        result["external_tools"],
        json!({"accepted": ["ext_one", "ext_two"], "rejected": []})
    );
    // Re-initializing may register the same external tool again.
    let result = wire.initialize(init_with_tools(&tools[..1])).await?;
    assert_eq!(
        result["external_tools"],
        json!({"accepted": ["ext_one"], "rejected": []})
    );
    Ok(())
}

#[tokio::test]
async fn an_external_tool_with_an_invalid_schema_is_rejected_with_a_reason() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let tools = [
        json!({"name": "bad_schema", "description": "x", "parameters": {"type": 5}}),
        external_tool("good"),
    ];
    let result = wire.initialize(init_with_tools(&tools)).await?;
    assert_eq!(result["external_tools"]["accepted"], json!(["good"]));
    let rejected = result["external_tools"]["rejected"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(rejected.len(), 1, "{result}");
    assert_eq!(rejected[0]["name"], "bad_schema");
    assert!(
        rejected[0]["reason"]
            .as_str()
            .is_some_and(|r| !r.trim().is_empty()),
        "{rejected:?}"
    );
    Ok(())
}

#[tokio::test]
async fn an_external_tool_with_non_object_parameters_is_invalid_params() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let tools = [json!({"name": "bad", "description": "x", "parameters": "not an object"})];
    let id = wire.request("initialize", init_with_tools(&tools)).await?;
    wire.expect_error(Some(&id), -32602, "Invalid parameters for method `initialize`")
        .await?;
    wire.assert_alive().await
}

#[tokio::test]
async fn an_external_tool_named_like_a_builtin_is_rejected() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let tools = [
        json!({"name": "Shell", "description": "Conflicts with built-in", "parameters": {"type": "object", "properties": {}}}),
    ];
    let mut result = wire.initialize(init_with_tools(&tools)).await?;
    check_slash_commands(&mut result)?;
    let mut expected = expected_result();
    expected["external_tools"] =
        json!({"accepted": [], "rejected": [{"name": "Shell", "reason": "conflicts with builtin tool"}]});
    assert_eq!(result, expected);
    Ok(())
}

#[tokio::test]
async fn prompt_works_without_initialize() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello without init"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages),
        vec![
            json!({"method": "event", "type": "TurnBegin", "payload": {"user_input": "hi"}}),
            json!({"method": "event", "type": "StepBegin", "payload": {"n": 1}}),
            json!({"method": "event", "type": "ContentPart", "payload": {"type": "text", "text": "hello without init"}}),
            json!({"method": "event", "type": "StatusUpdate", "payload": status_without_usage()}),
            json!({"method": "event", "type": "TurnEnd", "payload": {}}),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn configured_hooks_are_counted_per_event() -> Result<()> {
    let home = TestHome::new()?;
    let scripts = home.write_scripts("scripts.json", &["text: hello"])?;
    let home = home.with_config(&json!({
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts}}},
        "hooks": [
            {"event": "PreToolUse", "command": "true", "matcher": "Shell"},
            {"event": "PreToolUse", "command": "true"},
            {"event": "Stop", "command": "true"},
        ],
    }))?;
    let mut wire = WireProcess::spawn(&home).await?;
    let result = wire.initialize(json!({"protocol_version": "1.10"})).await?;
    assert_eq!(
        result["hooks"],
        json!({"supported_events": supported_events(), "configured": {"PreToolUse": 2, "Stop": 1}})
    );
    Ok(())
}

#[tokio::test]
async fn a_prompt_pipelined_behind_initialize_sees_its_external_tools() -> Result<()> {
    let call = tool_call_line("tc-1", "ext_tool", Some("{}"));
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    // Both lines are written before anything is read.
    let init = wire
        .request("initialize", init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    let (init_response, before) = wire.read_response(&init).await?;
    assert_eq!(
        before,
        Vec::<Value>::new(),
        "the turn began before initialize was answered"
    );
    assert_eq!(
        init_response["result"]["external_tools"]["accepted"],
        json!(["ext_tool"])
    );
    let request = wire.wait_request("ToolCallRequest").await?;
    assert_eq!(request["params"]["payload"]["name"], "ext_tool");
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "", "message": "", "display": []}}))
        .await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    Ok(())
}

// ---- External tool round trips -------------------------------------------------------------------

/// Arguments with unusual spacing and key order: they must reach the client byte for byte.
const RAW_ARGS: &str = r#"{ "path":"README.md" ,  "n" : 1 }"#;

async fn start_external_call(after: &str) -> Result<(TestHome, WireProcess, String, Value)> {
    let script = format!(
        "text: calling external tool\n{}",
        tool_call_line("tc-1", "ext_tool", Some(RAW_ARGS))
    );
    let home = TestHome::new()?.scripted(&[&script, after])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let result = wire
        .initialize(init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    assert_eq!(
        result["external_tools"],
        json!({"accepted": ["ext_tool"], "rejected": []})
    );
    let prompt = wire.start_prompt(json!("run external tool")).await?;
    let request = wire.peek_request("ToolCallRequest").await?;
    // The JSON-RPC id is the tool call id; the arguments string is forwarded unchanged.
    assert_eq!(
        request,
        json!({"jsonrpc": "2.0", "method": "request", "id": "tc-1", "params": {"type": "ToolCallRequest", "payload": {"id": "tc-1", "name": "ext_tool", "arguments": RAW_ARGS}}})
    );
    Ok((home, wire, prompt, request))
}

fn tool_result(return_value: Value) -> Value {
    json!({"method": "event", "type": "ToolResult", "payload": {"tool_call_id": "tc-1", "return_value": return_value}})
}

fn error_value(message: &str, brief: &str) -> Value {
    json!({"is_error": true, "output": "", "message": message, "display": [{"type": "brief", "text": brief}], "extras": null})
}

/// The whole turn around one external call whose ToolResult is `result`.
fn external_turn(result: Value) -> Vec<Value> {
    vec![
        json!({"method": "event", "type": "TurnBegin", "payload": {"user_input": "run external tool"}}),
        json!({"method": "event", "type": "StepBegin", "payload": {"n": 1}}),
        json!({"method": "event", "type": "ContentPart", "payload": {"type": "text", "text": "calling external tool"}}),
        json!({"method": "event", "type": "ToolCall", "payload": {"type": "function", "id": "tc-1", "function": {"name": "ext_tool", "arguments": RAW_ARGS}, "extras": null}}),
        json!({"method": "event", "type": "StatusUpdate", "payload": status_without_usage()}),
        json!({"method": "request", "type": "ToolCallRequest", "payload": {"id": "tc-1", "name": "ext_tool", "arguments": RAW_ARGS}}),
        result,
        json!({"method": "event", "type": "StepBegin", "payload": {"n": 2}}),
        json!({"method": "event", "type": "ContentPart", "payload": {"type": "text", "text": "done"}}),
        json!({"method": "event", "type": "StatusUpdate", "payload": status_without_usage()}),
        json!({"method": "event", "type": "TurnEnd", "payload": {}}),
    ]
}

#[tokio::test]
async fn an_external_tool_result_reaches_the_model_and_the_turn_goes_on() -> Result<()> {
    let (_home, mut wire, prompt, _) = start_external_call("text: done").await?;
    wire.respond(
        "tc-1",
        json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "Opened", "message": "Opened README.md", "display": []}}),
    )
    .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let ok = json!({"is_error": false, "output": "Opened", "message": "Opened README.md", "display": [], "extras": null});
    assert_eq!(summarize(&messages), external_turn(tool_result(ok)));
    Ok(())
}

#[tokio::test]
async fn an_external_tool_error_answer_becomes_a_tool_error() -> Result<()> {
    let (_home, mut wire, prompt, _) = start_external_call("text: done").await?;
    wire.respond_error("tc-1", -32000, "the client could not run it")
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let expected = tool_result(error_value("the client could not run it", "External tool error"));
    assert_eq!(summarize(&messages), external_turn(expected));
    Ok(())
}

#[tokio::test]
async fn a_garbage_external_tool_answer_becomes_an_invalid_result_error() -> Result<()> {
    let (_home, mut wire, prompt, _) = start_external_call("text: done").await?;
    wire.respond("tc-1", json!({"foo": 1})).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let expected = tool_result(error_value(
        "Invalid tool result payload from client.",
        "Invalid tool result",
    ));
    assert_eq!(summarize(&messages), external_turn(expected));
    Ok(())
}

#[tokio::test]
async fn cancelling_while_an_external_tool_is_pending_cancels_the_turn() -> Result<()> {
    let (_home, mut wire, prompt, _) = start_external_call("text: after cancel").await?;
    let cancel = wire.request("cancel", json!({})).await?;
    let cancel_response = wire.response_to(&cancel).await?;
    assert_eq!(
        cancel_response,
        json!({"jsonrpc": "2.0", "id": cancel, "result": {}})
    );
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": prompt, "result": {"status": "cancelled"}})
    );
    let kinds = crate::common::kinds(&messages);
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("event:TurnEnd"),
        "{kinds:?}"
    );
    assert!(!kinds.iter().any(|k| k == "event:StepInterrupted"), "{kinds:?}");
    // A late answer to the abandoned request is ignored, and the next turn runs.
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "late", "message": "", "display": []}}))
        .await?;
    let (response, messages) = wire.prompt(json!("again")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        crate::common::payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "after cancel"})]
    );
    Ok(())
}

#[tokio::test]
async fn closing_stdin_while_an_external_tool_is_pending_exits_promptly() -> Result<()> {
    let (_home, mut wire, _prompt, _) = start_external_call("text: done").await?;
    // A deadline on the awaited exit, under the server's 5 s shutdown grace: the pending call is given up
    // at once, not when the grace runs out.
    let status = tokio::time::timeout(std::time::Duration::from_secs(3), wire.wait_exit())
        .await
        .map_err(|_| anyhow::anyhow!("no exit within 3 s of EOF with an external call pending"))??;
    assert_eq!(status.code(), Some(0));
    Ok(())
}

#[tokio::test]
async fn an_external_tool_answer_for_the_wrong_id_does_not_resolve_the_call() -> Result<()> {
    let (_home, mut wire, prompt, _) = start_external_call("text: done").await?;
    // An answer under another id is ignored; the turn is still waiting for tc-1.
    wire.respond("tc-2", json!({"tool_call_id": "tc-2", "return_value": {"is_error": false, "output": "x", "message": "", "display": []}}))
        .await?;
    let steer = wire
        .request("steer", json!({"user_input": "still there?"}))
        .await?;
    let steer_response = wire.response_to(&steer).await?;
    assert_eq!(steer_response["result"], json!({"status": "steered"}));
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "y", "message": "", "display": []}}))
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    // Only the answer under the right id produced a result.
    let results = crate::common::payloads(&messages, "ToolResult");
    assert_eq!(results.len(), 1, "{results:?}");
    assert_eq!(results[0]["return_value"]["output"], "y");
    Ok(())
}

#[tokio::test]
async fn an_invalid_response_message_does_not_resolve_a_pending_call() -> Result<()> {
    let (_home, mut wire, prompt, _) = start_external_call("text: done").await?;
    // Neither result nor error: answered -32600, and the pending call is left alone.
    wire.send(&json!({"jsonrpc": "2.0", "id": "tc-1", "method": null}))
        .await?;
    let (error, skipped) = wire.read_until(|m| m.get("error").is_some()).await?;
    assert_eq!(error, rpc_error(None, -32600, "Invalid response"));
    assert!(
        !crate::common::kinds(&skipped)
            .iter()
            .any(|k| k == "event:ToolResult"),
        "{skipped:?}"
    );
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "y", "message": "", "display": []}}))
        .await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    Ok(())
}

#[tokio::test]
async fn an_external_tool_result_is_forwarded_as_given() -> Result<()> {
    // Content-part output, is_error set by the client, display blocks and a tool_call_id that does not
    // match (reference: only the JSON-RPC id matters; the inner id is merely compared and logged).
    let (_home, mut wire, prompt, _) = start_external_call("text: done").await?;
    let output = json!([{"type": "text", "text": "part one"}, {"type": "text", "text": "part two"}]);
    let display = json!([{"type": "brief", "text": "Client says no"}]);
    wire.respond(
        "tc-1",
        json!({"tool_call_id": "not-tc-1", "return_value": {"is_error": true, "output": output, "message": "refused", "display": display}}),
    )
    .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let expected = tool_result(
        json!({"is_error": true, "output": output, "message": "refused", "display": display, "extras": null}),
    );
    assert_eq!(summarize(&messages), external_turn(expected));
    Ok(())
}
