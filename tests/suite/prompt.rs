//! `prompt`: the events of a turn, tool calls the model makes, and every way a turn can fail.

use anyhow::Result;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    TestHome, WireProcess, external_tool, init_with_tools, kinds, payloads, rpc_error, shell_call_line,
    status_without_usage, summarize, summary_kinds, tool_call_line,
};

fn event(kind: &str, payload: Value) -> Value {
    json!({"method": "event", "type": kind, "payload": payload})
}

fn text(t: &str) -> Value {
    event("ContentPart", json!({"type": "text", "text": t}))
}

fn status() -> Value {
    event("StatusUpdate", status_without_usage())
}

async fn spawn_initialized(home: &TestHome) -> Result<WireProcess> {
    let mut wire = WireProcess::spawn(home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    Ok(wire)
}

#[tokio::test]
async fn a_text_turn_streams_the_reference_events_in_order() -> Result<()> {
    let script = "id: scripted-1\nusage: {\"input_other\": 5, \"output\": 2}\ntext: Hello wire";
    let home = TestHome::new()?.scripted(&[script])?;
    let mut wire = spawn_initialized(&home).await?;
    let id = wire.start_prompt(json!("hi")).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": id, "result": {"status": "finished"}})
    );
    // Not normalized: a text turn has exactly one order.
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "hi"})),
            event("StepBegin", json!({"n": 1})),
            text("Hello wire"),
            event(
                "StatusUpdate",
                json!({
                    "context_usage": 5e-05,
                    "context_tokens": 5,
                    "max_context_tokens": 100000,
                    "token_usage": {"input_other": 5, "output": 2, "input_cache_read": 0, "input_cache_creation": 0},
                    "message_id": "scripted-1",
                    "plan_mode": false,
                    "mcp_status": null,
                })
            ),
            event("TurnEnd", json!({})),
        ]
    );
    assert_eq!(
        kinds(&messages),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:ContentPart",
            "event:StatusUpdate",
            "event:TurnEnd"
        ]
    );
    Ok(())
}

#[tokio::test]
async fn each_text_line_is_its_own_content_part() -> Result<()> {
    let script = "text: one\ntext: two\n# a comment\n\ntext: \"three\"";
    let home = TestHome::new()?.scripted(&[script])?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("line1\nline2")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "line1\nline2"})),
            event("StepBegin", json!({"n": 1})),
            text("one"),
            text("two"),
            text("three"),
            status(),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn content_part_input_is_echoed_in_turn_begin() -> Result<()> {
    let home =
        TestHome::new()?.scripted_with(&["text: ok"], json!({"capabilities": ["image_in", "video_in"]}))?;
    let mut wire = spawn_initialized(&home).await?;
    let input = json!([
        {"type": "text", "text": "hello"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}},
        {"type": "audio_url", "audio_url": {"url": "data:audio/aac;base64,AAA"}},
        {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAA", "id": "v1"}},
    ]);
    let (response, messages) = wire.prompt(input).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&messages, "TurnBegin"),
        vec![&json!({"user_input": [
            {"type": "text", "text": "hello"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA", "id": null}},
            {"type": "audio_url", "audio_url": {"url": "data:audio/aac;base64,AAA", "id": null}},
            {"type": "video_url", "video_url": {"url": "data:video/mp4;base64,AAA", "id": "v1"}},
        ]})]
    );
    Ok(())
}

#[tokio::test]
async fn an_unknown_tool_is_a_tool_error_and_the_turn_goes_on() -> Result<()> {
    let call = format!(
        "text: missing tool\n{}",
        tool_call_line("tc-1", "SendDMail", Some(r#"{"message": "hi"}"#))
    );
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("dmail")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "dmail"})),
            event("StepBegin", json!({"n": 1})),
            text("missing tool"),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "SendDMail", "arguments": "{\"message\": \"hi\"}"}, "extras": null})
            ),
            status(),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {
                    "is_error": true, "output": "", "message": "Tool `SendDMail` not found",
                    "display": [{"type": "brief", "text": "Tool `SendDMail` not found"}], "extras": null,
                }})
            ),
            event("StepBegin", json!({"n": 2})),
            text("done"),
            status(),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn broken_json_arguments_are_a_tool_error_without_calling_the_tool() -> Result<()> {
    let call = tool_call_line("tc-1", "ext_tool", Some("{\"path\": "));
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let kinds = kinds(&messages);
    assert!(
        !kinds.iter().any(|k| k == "request:ToolCallRequest"),
        "the tool must not be called: {kinds:?}"
    );
    let results = payloads(&messages, "ToolResult");
    assert_eq!(results.len(), 1, "{kinds:?}");
    let value = &results[0]["return_value"];
    assert_eq!(results[0]["tool_call_id"], "tc-1");
    assert_eq!(value["is_error"], json!(true));
    assert_eq!(value["output"], json!(""));
    assert_eq!(
        value["display"],
        json!([{"type": "brief", "text": "Invalid arguments"}])
    );
    let message = value["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Error parsing JSON arguments: ") && message.len() > 30,
        "{message}"
    );
    assert_eq!(
        payloads(&messages, "StepBegin"),
        vec![&json!({"n": 1}), &json!({"n": 2})]
    );
    Ok(())
}

#[tokio::test]
async fn max_steps_per_turn_stops_after_the_last_allowed_step() -> Result<()> {
    let call = format!(
        "text: start\n{}",
        tool_call_line("tc-1", "NoSuchTool", Some("{}"))
    );
    let home = TestHome::new()?
        .scripted(&[&call, "text: never"])?
        .arg("--max-steps-per-turn")
        .arg("1");
    let mut wire = spawn_initialized(&home).await?;
    let id = wire.start_prompt(json!("run")).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": id, "result": {"status": "max_steps_reached", "steps": 1}})
    );
    assert_eq!(
        summary_kinds(&messages),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:ContentPart",
            "event:ToolCall",
            "event:StatusUpdate",
            "event:ToolResult",
            "event:TurnEnd"
        ]
    );
    assert_eq!(payloads(&messages, "StepBegin"), vec![&json!({"n": 1})]);
    Ok(())
}

#[tokio::test]
async fn max_steps_from_loop_control_in_the_config() -> Result<()> {
    let call = tool_call_line("tc-1", "NoSuchTool", Some("{}"));
    let home = TestHome::new()?;
    let scripts = home.write_scripts("s.json", &[&call, &call, "text: never"])?;
    let home = home.with_config(&json!({
        "default_model": "scripted",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {"p": {"type": "_scripted_echo", "base_url": "", "api_key": "", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts}}},
        "loop_control": {"max_steps_per_turn": 2},
    }))?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("run")).await?;
    assert_eq!(
        response["result"],
        json!({"status": "max_steps_reached", "steps": 2})
    );
    assert_eq!(
        payloads(&messages, "StepBegin"),
        vec![&json!({"n": 1}), &json!({"n": 2})]
    );
    Ok(())
}

#[tokio::test]
async fn max_steps_reached_with_set_todo_list_matches_the_reference() -> Result<()> {
    let call = format!(
        "text: start\n{}",
        tool_call_line(
            "tc-1",
            "SetTodoList",
            Some(r#"{"todos": [{"title": "x", "status": "pending"}]}"#)
        )
    );
    let home = TestHome::new()?
        .scripted(&[&call])?
        .arg("--yolo")
        .arg("--max-steps-per-turn")
        .arg("1");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("run")).await?;
    assert_eq!(
        response["result"],
        json!({"status": "max_steps_reached", "steps": 1})
    );
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "run"})),
            event("StepBegin", json!({"n": 1})),
            text("start"),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "SetTodoList", "arguments": "{\"todos\": [{\"title\": \"x\", \"status\": \"pending\"}]}"}, "extras": null})
            ),
            status(),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {
                    "is_error": false, "output": "Todo list updated", "message": "Todo list updated",
                    "display": [{"type": "todo", "items": [{"title": "x", "status": "pending"}]}], "extras": null,
                }})
            ),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn streamed_tool_call_arguments_arrive_as_parts_and_are_assembled() -> Result<()> {
    let script = [
        "text: start".to_owned(),
        tool_call_line("tc-1", "ext_tool", None),
        r#"tool_call_part: {"arguments_part": "{"}"#.to_owned(),
        format!(
            "tool_call_part: {}",
            json!({"arguments_part": "\"path\":\"a.txt\""})
        ),
        r#"tool_call_part: {"arguments_part": "}"}"#.to_owned(),
        "tool_call_part:".to_owned(),
    ]
    .join("\n");
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    let prompt = wire.start_prompt(json!("stream")).await?;
    let request = wire.peek_request("ToolCallRequest").await?;
    assert_eq!(
        request["params"]["payload"],
        json!({"id": "tc-1", "name": "ext_tool", "arguments": "{\"path\":\"a.txt\"}"})
    );
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "read", "message": "", "display": []}}))
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "stream"})),
            event("StepBegin", json!({"n": 1})),
            text("start"),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "ext_tool", "arguments": null}, "extras": null})
            ),
            event("ToolCallPart", json!({"arguments_part": "{"})),
            event("ToolCallPart", json!({"arguments_part": "\"path\":\"a.txt\""})),
            event("ToolCallPart", json!({"arguments_part": "}"})),
            event("ToolCallPart", json!({"arguments_part": null})),
            status(),
            json!({"method": "request", "type": "ToolCallRequest", "payload": {"id": "tc-1", "name": "ext_tool", "arguments": "{\"path\":\"a.txt\"}"}}),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "read", "message": "", "display": [], "extras": null}})
            ),
            event("StepBegin", json!({"n": 2})),
            text("done"),
            status(),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn a_retryable_provider_error_emits_step_retry_then_fails() -> Result<()> {
    let home = TestHome::new()?
        .scripted(&["error: 500", "error: 500"])?
        .arg("--max-retries-per-step")
        .arg("2");
    let mut wire = spawn_initialized(&home).await?;
    let id = wire.start_prompt(json!("hi")).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(response, rpc_error(Some(&id), -32003, "Simulated 500 error"));
    assert_eq!(
        kinds(&messages),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:StepRetry",
            "event:StepInterrupted",
            "event:TurnEnd"
        ]
    );
    let retry = payloads(&messages, "StepRetry")[0].clone();
    let wait_s = retry["wait_s"].as_f64().unwrap_or(-1.0);
    assert!((0.0..=6.0).contains(&wait_s), "{retry}");
    let mut without_wait = retry.clone();
    without_wait["wait_s"] = Value::Null;
    assert_eq!(
        without_wait,
        json!({"n": 1, "next_attempt": 2, "max_attempts": 2, "wait_s": null, "error_type": "APIStatusError", "status_code": 500})
    );
    assert_eq!(payloads(&messages, "StepInterrupted"), vec![&json!({})]);
    wire.assert_alive().await
}

#[tokio::test]
async fn a_retried_step_that_then_succeeds_finishes() -> Result<()> {
    let home = TestHome::new()?.scripted(&["error: 503 busy", "text: recovered"])?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        kinds(&messages),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:StepRetry",
            "event:ContentPart",
            "event:StatusUpdate",
            "event:TurnEnd"
        ]
    );
    assert_eq!(payloads(&messages, "StepRetry")[0]["status_code"], json!(503));
    assert_eq!(payloads(&messages, "StepRetry")[0]["max_attempts"], json!(3));
    Ok(())
}

#[tokio::test]
async fn a_non_retryable_provider_error_fails_without_retry() -> Result<()> {
    let home = TestHome::new()?.scripted(&["error: 401 Invalid API key", "text: never"])?;
    let mut wire = spawn_initialized(&home).await?;
    let id = wire.start_prompt(json!("hi")).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(response, rpc_error(Some(&id), -32003, "Invalid API key"));
    assert_eq!(
        kinds(&messages),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:StepInterrupted",
            "event:TurnEnd"
        ]
    );
    wire.assert_alive().await
}

#[tokio::test]
async fn image_input_without_image_in_is_llm_not_supported() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let mut wire = spawn_initialized(&home).await?;
    let input = json!([{"type": "text", "text": "hello"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAA"}}]);
    let id = wire.start_prompt(input).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(
        response,
        rpc_error(
            Some(&id),
            -32002,
            "LLM model 'scripted_echo' does not support required capability: image_in."
        )
    );
    assert_eq!(kinds(&messages), ["event:TurnBegin", "event:TurnEnd"]);
    // The scripts were not touched: the next prompt gets the first one.
    let (response, messages) = wire.prompt(json!("text only")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "ok"})]
    );
    Ok(())
}

#[tokio::test]
async fn a_kimi_provider_without_base_url_is_llm_not_set() -> Result<()> {
    let home = TestHome::new()?;
    let scripts = home.write_scripts("scripts.json", &["text: ok"])?;
    let home = home.with_config(&json!({
        "default_model": "bad-model",
        "models": {"bad-model": {"provider": "bad-provider", "model": "", "max_context_size": 100000}},
        "providers": {"bad-provider": {"type": "kimi", "base_url": "", "api_key": "", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts}}},
    }))?;
    let mut wire = spawn_initialized(&home).await?;
    let id = wire.start_prompt(json!("hi")).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(response, rpc_error(Some(&id), -32001, "LLM is not set"));
    assert_eq!(kinds(&messages), ["event:TurnBegin", "event:TurnEnd"]);
    wire.assert_alive().await
}

#[tokio::test]
async fn an_invalid_echo_dsl_is_a_provider_error() -> Result<()> {
    let home = TestHome::new()?.scripted(&["bad line without colon"])?;
    let mut wire = spawn_initialized(&home).await?;
    let id = wire.start_prompt(json!("hi")).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(
        response,
        rpc_error(
            Some(&id),
            -32003,
            "Invalid echo DSL at line 1: 'bad line without colon'"
        )
    );
    assert_eq!(
        kinds(&messages),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:StepInterrupted",
            "event:TurnEnd"
        ]
    );
    wire.assert_alive().await
}

#[tokio::test]
async fn exhausted_scripts_are_a_provider_error_on_the_next_turn() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: only one"])?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, _) = wire.prompt(json!("first")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let id = wire.start_prompt(json!("second")).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(
        response,
        rpc_error(Some(&id), -32003, "ScriptedEchoChatProvider exhausted at turn 2.")
    );
    assert_eq!(
        kinds(&messages),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:StepInterrupted",
            "event:TurnEnd"
        ]
    );
    Ok(())
}

#[tokio::test]
async fn turns_run_one_after_another_on_one_connection() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: first", "text: second", "text: third"])?;
    let mut wire = spawn_initialized(&home).await?;
    for expected in ["first", "second", "third"] {
        let (response, messages) = wire.prompt(json!(expected)).await?;
        assert_eq!(response["result"], json!({"status": "finished"}));
        assert_eq!(
            payloads(&messages, "ContentPart"),
            vec![&json!({"type": "text", "text": expected})]
        );
    }
    Ok(())
}

#[tokio::test]
async fn an_unknown_slash_command_answers_without_calling_the_model() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: model reply"])?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("/nosuchcommand")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "/nosuchcommand"})),
            text("Unknown slash command \"/nosuchcommand\"."),
            event("TurnEnd", json!({})),
        ]
    );
    // The script is still there for a real turn.
    let (_, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "model reply"})]
    );
    Ok(())
}

// ---- Built-in tools --------------------------------------------------------------------------------

#[tokio::test]
async fn shell_under_yolo_runs_without_approval() -> Result<()> {
    let call = format!("text: step1\n{}", shell_call_line("tc-1", "echo ok"));
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("run shell")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert!(!messages.iter().any(|m| m["method"] == "request"), "{messages:?}");
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "run shell"})),
            event("StepBegin", json!({"n": 1})),
            text("step1"),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "Shell", "arguments": "{\"command\":\"echo ok\"}"}, "extras": null})
            ),
            status(),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {
                    "is_error": false, "output": "ok\n", "message": "Command executed successfully.", "display": [], "extras": null,
                }})
            ),
            event("StepBegin", json!({"n": 2})),
            text("done"),
            status(),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn set_todo_list_arguments_streamed_in_parts() -> Result<()> {
    let script = [
        "text: start".to_owned(),
        tool_call_line("tc-1", "SetTodoList", None),
        r#"tool_call_part: {"arguments_part": "{"}"#.to_owned(),
        format!(
            "tool_call_part: {}",
            json!({"arguments_part": "\"todos\":[{\"title\":\"a\",\"status\":\"pending\"}]"})
        ),
        r#"tool_call_part: {"arguments_part": "}"}"#.to_owned(),
        "tool_call_part:".to_owned(),
    ]
    .join("\n");
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("stream")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "stream"})),
            event("StepBegin", json!({"n": 1})),
            text("start"),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "SetTodoList", "arguments": null}, "extras": null})
            ),
            event("ToolCallPart", json!({"arguments_part": "{"})),
            event(
                "ToolCallPart",
                json!({"arguments_part": "\"todos\":[{\"title\":\"a\",\"status\":\"pending\"}]"})
            ),
            event("ToolCallPart", json!({"arguments_part": "}"})),
            event("ToolCallPart", json!({"arguments_part": null})),
            status(),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {
                    "is_error": false, "output": "Todo list updated", "message": "Todo list updated",
                    "display": [{"type": "todo", "items": [{"title": "a", "status": "pending"}]}], "extras": null,
                }})
            ),
            event("StepBegin", json!({"n": 2})),
            text("done"),
            status(),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}
