//! The turn/step loop as a real model meets it (issue 11), through the binary and the mock
//! OpenAI-compatible server: several calls per step run in the model's order, a dropped stream leaves
//! no side effect, each mode's reminders reach the model where due and only there, repeats that differ
//! in spacing or go round a loop escalate, a rejected subagent call, PostToolUseFailure, StrReplaceFile
//! ambiguity, and a ToolResult for every call the client saw when a turn is cancelled.
//!
//! What the model is told is checked in the request bodies the mock received.

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, PausingModel, Reply, message_text, tool_result};
use crate::common::{TestHome, WireProcess, approval_answer, external_tool, kinds, payloads};

/// `initialize` params of a client that answers questions and knows plan mode.
fn plan_client() -> Value {
    json!({"protocol_version": "1.10", "capabilities": {"supports_question": true, "supports_plan_mode": true}})
}

fn call(id: &str, name: &str, arguments: Value) -> (String, String, Value) {
    (id.to_owned(), name.to_owned(), arguments)
}

/// A home whose config points at `model`, with `extra` top-level config keys.
fn home_for(model: &MockModel, extra: Value) -> Result<TestHome> {
    TestHome::new()?.with_config(&model.config(extra))
}

/// Spawns with the retry wait shortened (a cut stream is retried).
async fn spawn(home: &TestHome) -> Result<WireProcess> {
    WireProcess::spawn_with_env(home, home.args(), &[("KIMI_AGENT_RETRY_BACKOFF_SCALE", "0.01")]).await
}

/// How many reminders in `messages` open with `opening`.
fn reminders(messages: &[Value], opening: &str) -> usize {
    messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            message_text(m)
                .matches(&format!("<system-reminder>\n{opening}"))
                .count()
        })
        .sum()
}

/// The text of the last message of a request.
fn last_text(messages: &[Value]) -> String {
    messages.last().map(message_text).unwrap_or_default()
}

/// The only session directory of `home`.
fn session_dir(home: &TestHome) -> Result<PathBuf> {
    match home.session_dirs().as_slice() {
        [dir] => Ok(dir.clone()),
        dirs => bail!("expected one session, found {dirs:?}"),
    }
}

/// The plan file of the session's current plan (from state.json's slug).
fn plan_file(home: &TestHome) -> Result<PathBuf> {
    let state: Value =
        serde_json::from_str(&std::fs::read_to_string(session_dir(home)?.join("state.json"))?)?;
    let slug = state["plan_slug"].as_str().context("no plan slug")?;
    Ok(home.home().join(".kimi/plans").join(format!("{slug}.md")))
}

/// `type` of every event and request, in arrival order.
fn order(messages: &[Value]) -> Vec<String> {
    kinds(messages)
}

fn position(messages: &[Value], pred: impl Fn(&Value) -> bool) -> Option<usize> {
    messages.iter().position(pred)
}

fn is_event(message: &Value, kind: &str) -> bool {
    message["method"] == "event" && message["params"]["type"] == kind
}

// ---------------------------------------------------------------------------------------------------
// Point 1: the calls of a step run in the model's order

#[tokio::test]
async fn a_read_right_after_a_slow_write_in_one_step_sees_the_write() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::Calls(vec![
            call(
                "tc-w",
                "Shell",
                json!({"command": "sleep 0.3; printf written > out.txt"}),
            ),
            call("tc-r", "ReadFile", json!({"path": "out.txt"})),
        ]),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?.arg("--yolo");
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("write then read")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let requests = model.requests().await;
    let read = tool_result(&requests[1], "tc-r").context("no ReadFile result")?;
    assert!(read.contains("written"), "the read ran before the write: {read}");
    // The write's result came first: it ran alone, before the read.
    let results: Vec<&Value> = payloads(&messages, "ToolResult")
        .into_iter()
        .map(|r| &r["tool_call_id"])
        .collect();
    assert_eq!(results, [&json!("tc-w"), &json!("tc-r")]);
    Ok(())
}

#[tokio::test]
async fn two_appending_writes_run_in_the_model_order_whatever_order_they_are_approved_in() -> Result<()> {
    let append = |id: &str, text: &str| {
        call(
            id,
            "WriteFile",
            json!({"path": "log.txt", "content": text, "mode": "append"}),
        )
    };
    let model = MockModel::start(move |n, _| match n {
        0 => Reply::Calls(vec![append("tc-1", "first\n"), append("tc-2", "second\n")]),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("log twice")).await?;
    // Both are put to the user at once...
    let first = wire.wait_request("ApprovalRequest").await?;
    let second = wire.wait_request("ApprovalRequest").await?;
    assert_eq!(first["params"]["payload"]["tool_call_id"], "tc-1");
    assert_eq!(second["params"]["payload"]["tool_call_id"], "tc-2");
    // ...and the later one is approved first.
    wire.send(&approval_answer(&second, "approve")).await?;
    wire.send(&approval_answer(&first, "approve")).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert_eq!(
        std::fs::read_to_string(home.work().join("log.txt"))?,
        "first\nsecond\n"
    );
    Ok(())
}

#[tokio::test]
async fn a_client_tool_runs_alone_after_the_calls_before_it() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::Calls(vec![
            call("tc-1", "ext_tool", json!({"path": "a"})),
            call("tc-2", "ext_tool", json!({"path": "b"})),
        ]),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10", "external_tools": [external_tool("ext_tool")]}))
        .await?;
    let prompt = wire.start_prompt(json!("two client calls")).await?;
    let mut all = Vec::new();
    for id in ["tc-1", "tc-2"] {
        let (request, before) = wire
            .read_until(|m| m["params"]["type"] == "ToolCallRequest")
            .await?;
        all.extend(before);
        assert_eq!(request["params"]["payload"]["id"], id);
        let result = json!({"tool_call_id": id, "return_value":
            {"is_error": false, "output": format!("{id} ok"), "message": "", "display": []}});
        wire.respond(request["id"].as_str().context("id")?, result)
            .await?;
        all.push(request);
    }
    let (response, rest) = wire.read_response(&prompt).await?;
    all.extend(rest);
    assert_eq!(response["result"]["status"], json!("finished"));
    // The second request went out only once the first call's result was in.
    let first_result = position(&all, |m| {
        is_event(m, "ToolResult") && m["params"]["payload"]["tool_call_id"] == "tc-1"
    });
    let second_request = position(&all, |m| {
        m["params"]["type"] == "ToolCallRequest" && m["params"]["payload"]["id"] == "tc-2"
    });
    assert!(first_result < second_request, "{:?}", order(&all));
    Ok(())
}

#[tokio::test]
async fn two_subagents_of_one_step_run_side_by_side_and_ask_at_once() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        let task = messages
            .iter()
            .find(|m| m["role"] == "user")
            .map(message_text)
            .unwrap_or_default();
        let last_is_tool = messages.last().is_some_and(|m| m["role"] == "tool");
        let agent = |id: &str, prompt: &str| {
            call(
                id,
                "Agent",
                json!({"description": "touch", "prompt": prompt, "subagent_type": "coder"}),
            )
        };
        match (task.strip_prefix("SUBTASK "), last_is_tool) {
            (Some(name), false) => Reply::call(
                &format!("tc-{name}"),
                "Shell",
                json!({"command": format!("touch {name}")}),
            ),
            (Some(name), true) => Reply::Text(format!("Touched {name}. {}", "All went well. ".repeat(20))),
            (None, false) => Reply::Calls(vec![agent("tc-a", "SUBTASK one"), agent("tc-b", "SUBTASK two")]),
            (None, true) => Reply::Text("done".into()),
        }
    })
    .await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("delegate twice")).await?;
    // Each subagent asks for its command before either is answered: neither waits for the other.
    let first = wire.wait_request("ApprovalRequest").await?;
    let second = wire.wait_request("ApprovalRequest").await?;
    let asked = |r: &Value| {
        (
            r["params"]["payload"]["agent_id"].clone(),
            r["params"]["payload"]["tool_call_id"].clone(),
        )
    };
    let (a, b) = (asked(&first), asked(&second));
    assert!(a.0.is_string() && b.0.is_string() && a.0 != b.0, "{a:?} {b:?}");
    let mut commands = [a.1.clone(), b.1.clone()];
    commands.sort_by_key(|v| v.to_string());
    assert_eq!(commands, [json!("tc-one"), json!("tc-two")]);
    wire.send(&approval_answer(&second, "approve")).await?;
    wire.send(&approval_answer(&first, "approve")).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert!(home.work().join("one").exists() && home.work().join("two").exists());
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Point 2: no side effect from an attempt that fails

/// Lets the held answer break off once the agent has had its chance to act on every complete call:
/// the client has seen the unfinished call start (so each call before it was handed on, and the
/// agent's stream now waits on the held answer while its calls may go on), and the server has answered
/// a request sent after that. Before the fix, a complete call's approval, hook or command went ahead
/// during this hold, so it was out before the break every time, not only when a race fell its way.
/// Everything read stays buffered for the turn's own reads.
async fn break_off_once_settled(wire: &mut WireProcess, model: &PausingModel) -> Result<()> {
    wire.peek_until(|m| is_event(m, "ToolCall") && m["params"]["payload"]["id"] == "cut-off")
        .await?;
    let ping = wire.request("no_such_method", json!({})).await?;
    wire.response_to(&ping).await?;
    model.release();
    Ok(())
}

/// The `ToolResult` of `tool_call_id`, and where it is in `messages`.
fn result_of<'a>(messages: &'a [Value], tool_call_id: &str) -> Option<(usize, &'a Value)> {
    let at = position(messages, |m| {
        is_event(m, "ToolResult") && m["params"]["payload"]["tool_call_id"] == tool_call_id
    })?;
    Some((at, &messages[at]["params"]["payload"]["return_value"]))
}

#[tokio::test]
async fn a_stream_cut_after_a_complete_command_asks_nothing_and_runs_nothing() -> Result<()> {
    let model = PausingModel::start(|n, _| match n {
        0 => Reply::Cut(vec![call("tc-1", "Shell", json!({"command": "touch marker"}))]),
        _ => Reply::Text("done".into()),
    })
    .await?;
    let home = TestHome::new()?.with_config(&model.config(json!({})))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    break_off_once_settled(&mut wire, &model).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert!(
        !order(&messages).iter().any(|k| k.starts_with("request:")),
        "nothing may be put to the user from a failed attempt: {:?}",
        order(&messages)
    );
    assert_eq!(payloads(&messages, "StepRetry").len(), 1);
    // The client saw the call, so it hears that it was dropped, before the retry.
    let (dropped, value) = result_of(&messages, "tc-1").context("no ToolResult for the dropped call")?;
    let retry = position(&messages, |m| is_event(m, "StepRetry")).context("no StepRetry")?;
    assert!(dropped < retry);
    assert_eq!(
        (value["is_error"].clone(), value["message"].clone()),
        (
            json!(true),
            json!("This call was dropped: the model's answer broke off before it was complete.")
        )
    );
    assert!(!home.work().join("marker").exists());
    // The model never hears of the failed attempt.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[1], requests[0]);
    Ok(())
}

#[tokio::test]
async fn with_yolo_a_cut_stream_still_changes_nothing() -> Result<()> {
    // A write, not a command: nothing to ask, and done in-process as soon as it may start, so before
    // the fix it was written during the hold every time (a command's process could lose the race).
    let model = PausingModel::start(|n, _| match n {
        0 => Reply::Cut(vec![call(
            "tc-1",
            "WriteFile",
            json!({"path": "marker", "content": "x"}),
        )]),
        _ => Reply::Text("done".into()),
    })
    .await?;
    let home = TestHome::new()?
        .with_config(&model.config(json!({})))?
        .arg("--yolo");
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    break_off_once_settled(&mut wire, &model).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert!(!home.work().join("marker").exists());
    Ok(())
}

#[tokio::test]
async fn a_read_with_a_pre_tool_use_hook_waits_for_the_whole_answer() -> Result<()> {
    let model = PausingModel::start(|n, _| match n {
        0 => Reply::Cut(vec![call("tc-r", "ReadFile", json!({"path": "a.txt"}))]),
        1 => Reply::call("tc-r2", "ReadFile", json!({"path": "a.txt"})),
        _ => Reply::Text("done".into()),
    })
    .await?;
    let hooks = json!([{"event": "PreToolUse", "matcher": "^ReadFile$", "command": "echo ran >> hook.log"}]);
    let home = TestHome::new()?.with_config(&model.config(json!({"hooks": hooks})))?;
    std::fs::write(home.work().join("a.txt"), "alpha")?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10", "hooks": [
        {"id": "sub-1", "event": "PreToolUse", "matcher": "^ReadFile$", "timeout": 30},
    ]}))
    .await?;
    let prompt = wire.start_prompt(json!("read it")).await?;
    break_off_once_settled(&mut wire, &model).await?;
    // The retried answer is complete: its read's hooks run, and the client is asked once.
    let (request, before) = wire
        .read_until(|m| m["method"] == "request" && m["params"]["type"] == "HookRequest")
        .await?;
    assert_eq!(
        request["params"]["payload"]["input_data"]["tool_call_id"],
        "tc-r2",
        "{:?}",
        order(&before)
    );
    assert_eq!(payloads(&before, "StepRetry").len(), 1);
    assert_eq!(
        payloads(&before, "HookTriggered").len(),
        1,
        "only the retried read's hooks may run: {:?}",
        order(&before)
    );
    let (dropped, _) = result_of(&before, "tc-r").context("no ToolResult for the dropped read")?;
    let retry = position(&before, |m| is_event(m, "StepRetry")).context("no StepRetry")?;
    let triggered = position(&before, |m| is_event(m, "HookTriggered")).context("no HookTriggered")?;
    assert!(dropped < retry && retry < triggered, "{:?}", order(&before));
    let payload = &request["params"]["payload"];
    wire.respond(
        request["id"].as_str().context("request id")?,
        json!({"request_id": payload["id"], "action": "allow"}),
    )
    .await?;
    let (response, after) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert!(!order(&after).contains(&"request:HookRequest".to_owned()));
    // The command hook ran once: for the retried read, not for the dropped one.
    assert_eq!(std::fs::read_to_string(home.work().join("hook.log"))?, "ran\n");
    Ok(())
}

#[tokio::test]
async fn an_early_reads_result_is_dropped_with_its_failed_attempt() -> Result<()> {
    let model = PausingModel::start(|n, _| match n {
        0 => Reply::Cut(vec![
            call("tc-r", "ReadFile", json!({"path": "a.txt"})),
            call("tc-1", "Shell", json!({"command": "touch marker"})),
        ]),
        1 => Reply::call("tc-r2", "ReadFile", json!({"path": "a.txt"})),
        _ => Reply::Text("done".into()),
    })
    .await?;
    let home = TestHome::new()?.with_config(&model.config(json!({})))?;
    std::fs::write(home.work().join("a.txt"), "alpha")?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("read, then touch")).await?;
    // The plain read runs while the answer is still coming.
    wire.peek_until(|m| is_event(m, "ToolResult") && m["params"]["payload"]["tool_call_id"] == "tc-r")
        .await?;
    break_off_once_settled(&mut wire, &model).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let (read, value) = result_of(&messages, "tc-r").context("no ToolResult for the early read")?;
    assert_eq!(value["is_error"], json!(false), "{value}");
    let retry = position(&messages, |m| is_event(m, "StepRetry")).context("no StepRetry")?;
    assert!(read < retry, "{:?}", order(&messages));
    assert!(!order(&messages).iter().any(|k| k.starts_with("request:")));
    assert!(!home.work().join("marker").exists());
    // The retried step's request is the first one again, and the next holds only the retry's results.
    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[1], requests[0]);
    assert_eq!(tool_result(&requests[2], "tc-r"), None);
    assert!(
        tool_result(&requests[2], "tc-r2").is_some_and(|t| t.contains("alpha")),
        "{:?}",
        requests[2]
    );
    let calls: Vec<&Value> = requests[2]
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| &c["id"])
        .collect();
    assert_eq!(calls, [&json!("tc-r2")]);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Point 3: the reminders each mode owes the model

#[tokio::test]
async fn plan_mode_switched_by_the_client_is_told_where_due_and_only_there() -> Result<()> {
    let model = MockModel::start(|_, _| Reply::Text("ok".into())).await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let (_, _) = wire.prompt(json!("before")).await?;
    let on = wire.request("set_plan_mode", json!({"enabled": true})).await?;
    wire.response_to(&on).await?;
    wire.prompt(json!("while planning")).await?;
    wire.prompt(json!("still planning")).await?;
    let off = wire.request("set_plan_mode", json!({"enabled": false})).await?;
    wire.response_to(&off).await?;
    wire.prompt(json!("after")).await?;
    wire.prompt(json!("later")).await?;
    let (response, _) = wire.prompt(json!("/plan on")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    wire.prompt(json!("planning again")).await?;

    let requests = model.requests().await;
    assert_eq!(requests.len(), 6);
    // Plan mode off: nothing.
    assert_eq!(reminders(&requests[0], ""), 0);
    // Turned on: the full text with the plan file, merged into the user's own message.
    let last = requests[1].last().context("no messages")?;
    assert_eq!(last["role"], "user");
    let text = message_text(last);
    assert!(text.starts_with("while planning"), "{text}");
    assert!(text.contains("<system-reminder>\nPlan mode is on."), "{text}");
    assert!(
        text.contains("Plan file: ") && text.contains(".kimi/plans/"),
        "{text}"
    );
    assert!(
        text.contains("(it does not exist yet: create it with WriteFile"),
        "{text}"
    );
    assert_eq!(requests[1].iter().filter(|m| m["role"] == "user").count(), 2);
    // Not again on the next call.
    assert_eq!(reminders(&requests[2], "Plan mode is"), 1);
    // Turned off: told once.
    assert!(last_text(&requests[3]).contains("<system-reminder>\nPlan mode is off."));
    assert_eq!(reminders(&requests[4], "Plan mode is off"), 1);
    // `/plan on`: told again, with the new plan file.
    let text = last_text(&requests[5]);
    assert!(text.contains("<system-reminder>\nPlan mode is on."), "{text}");
    let second_plan = plan_file(&home)?;
    assert!(text.contains(&second_plan.display().to_string()), "{text}");
    Ok(())
}

#[tokio::test]
async fn a_model_that_only_follows_the_reminder_writes_its_plan_and_gets_it_approved() -> Result<()> {
    let model = MockModel::start(|n, messages| match n {
        0 => Reply::call("tc-enter", "EnterPlanMode", json!({})),
        1 => {
            // The plan file is known only from the reminder.
            let text = last_text(messages);
            let path = text
                .split("Plan file: ")
                .nth(1)
                .and_then(|rest| rest.split(" (").next())
                .unwrap_or("no-plan-file-in-reminder")
                .to_owned();
            Reply::call(
                "tc-write",
                "WriteFile",
                json!({"path": path, "content": "# Plan\n1. change it\n"}),
            )
        }
        2 => Reply::call("tc-exit", "ExitPlanMode", json!({})),
        _ => Reply::Text("carrying out the plan".into()),
    })
    .await;
    // The plan file's write goes through the same pipeline as any call: its PostToolUse hook fires.
    let hooks = json!([{"event": "PostToolUse", "matcher": "^WriteFile$", "command": "cat > wrote.json"}]);
    let home = home_for(&model, json!({"hooks": hooks}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let prompt = wire.start_prompt(json!("plan a big change")).await?;
    let enter = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &enter, "Yes").await?;
    let display = wire.wait_event("PlanDisplay").await?;
    let exit = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &exit, "Approve").await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));

    let requests = model.requests().await;
    assert_eq!(requests.len(), 4);
    assert_eq!(reminders(&requests[0], ""), 0);
    assert!(last_text(&requests[1]).contains("<system-reminder>\nPlan mode is on."));
    let written = tool_result(&requests[2], "tc-write").context("no write result")?;
    assert!(written.contains("File successfully overwritten"), "{written}");
    assert_eq!(reminders(&requests[2], "Plan mode is"), 1, "told once");
    let path = PathBuf::from(
        display["params"]["payload"]["file_path"]
            .as_str()
            .context("file_path")?,
    );
    assert_eq!(std::fs::read_to_string(&path)?, "# Plan\n1. change it\n");
    assert_eq!(display["params"]["payload"]["content"], "# Plan\n1. change it\n");
    assert!(last_text(&requests[3]).contains("<system-reminder>\nPlan mode is off."));
    // The client saw plan mode go on and off again, and no approval was asked for the plan file.
    let modes: Vec<Value> = payloads(&messages, "StatusUpdate")
        .into_iter()
        .map(|s| s["plan_mode"].clone())
        .collect();
    assert!(
        modes.contains(&json!(true)) && modes.last() == Some(&json!(false)),
        "{modes:?}"
    );
    assert!(!order(&messages).contains(&"request:ApprovalRequest".to_owned()));
    if payloads(&messages, "HookResolved").is_empty() {
        wire.wait_event("HookResolved").await?;
    }
    let hook: Value = serde_json::from_str(&std::fs::read_to_string(home.work().join("wrote.json"))?)?;
    assert_eq!(hook["tool_call_id"], json!("tc-write"));
    Ok(())
}

#[tokio::test]
async fn plan_mode_is_recalled_every_five_answers_while_it_stays_on() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0..6 => Reply::call(&format!("tc-{n}"), "Glob", json!({"pattern": format!("*.{n}")})),
        _ => Reply::Text("planned".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?.arg("--plan");
    let mut wire = spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let (response, _) = wire.prompt(json!("look around")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let requests = model.requests().await;
    let counts: Vec<(usize, usize)> = requests
        .iter()
        .map(|r| {
            (
                reminders(r, "Plan mode is on"),
                reminders(r, "Plan mode is still on"),
            )
        })
        .collect();
    assert_eq!(counts, [(1, 0), (1, 0), (1, 0), (1, 0), (1, 0), (1, 1), (1, 1)]);
    assert!(last_text(&requests[5]).contains(&plan_file(&home)?.display().to_string()));
    Ok(())
}

#[tokio::test]
async fn a_session_restarted_in_plan_mode_is_told_again_and_finds_its_plan() -> Result<()> {
    let model = MockModel::start(|_, _| Reply::Text("ok".into())).await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let on = wire.request("set_plan_mode", json!({"enabled": true})).await?;
    wire.response_to(&on).await?;
    wire.prompt(json!("start planning")).await?;
    assert_eq!(wire.wait_exit().await?.code(), Some(0));
    let plan = plan_file(&home)?;
    std::fs::write(&plan, "# Plan so far\n")?;
    let id = session_dir(&home)?
        .file_name()
        .context("session id")?
        .to_string_lossy()
        .into_owned();

    let mut args = home.args();
    args.extend(["--session".to_owned(), id]);
    let mut wire = WireProcess::spawn_with(&home, args).await?;
    wire.initialize(plan_client()).await?;
    wire.prompt(json!("go on")).await?;
    let requests = model.requests().await;
    let text = last_text(&requests[1]);
    assert!(
        text.contains("<system-reminder>\nPlan mode is on again."),
        "{text}"
    );
    assert!(
        text.contains(&format!("earlier planning session is in {}.", plan.display())),
        "{text}"
    );
    Ok(())
}

#[tokio::test]
async fn afk_is_told_once_and_its_end_too() -> Result<()> {
    let model = MockModel::start(|_, _| Reply::Text("ok".into())).await;
    let home = home_for(&model, json!({}))?.arg("--afk");
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    wire.prompt(json!("one")).await?;
    wire.prompt(json!("two")).await?;
    let (response, _) = wire.prompt(json!("/afk")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    wire.prompt(json!("three")).await?;
    wire.prompt(json!("four")).await?;
    let requests = model.requests().await;
    assert_eq!(requests.len(), 4);
    let afk = "Nobody is at the keyboard";
    let back = "Afk mode is off";
    let counts: Vec<(usize, usize)> = requests
        .iter()
        .map(|r| (reminders(r, afk), reminders(r, back)))
        .collect();
    assert_eq!(counts, [(1, 0), (1, 0), (1, 1), (1, 1)]);
    assert!(last_text(&requests[0]).contains("Do not call AskUserQuestion"));
    assert!(last_text(&requests[2]).starts_with("three"));
    Ok(())
}

#[tokio::test]
async fn subagents_get_no_plan_mode_reminders() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        let first_user = messages
            .iter()
            .find(|m| m["role"] == "user")
            .map(message_text)
            .unwrap_or_default();
        let last_role = messages.last().map(|m| m["role"].clone()).unwrap_or_default();
        match (first_user.starts_with("SUBTASK"), last_role == "tool") {
            (true, _) => Reply::Text(format!("Summary of the subtask: {}", "all is well. ".repeat(20))),
            (false, false) => Reply::call(
                "tc-a",
                "Agent",
                json!({"description": "look", "prompt": "SUBTASK: look around", "subagent_type": "explore"}),
            ),
            (false, true) => Reply::Text("done".into()),
        }
    })
    .await;
    let home = home_for(&model, json!({}))?.arg("--plan");
    let mut wire = spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let (response, _) = wire.prompt(json!("delegate")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let requests = model.requests().await;
    let (sub, root): (Vec<_>, Vec<_>) = requests.iter().partition(|r| {
        r.iter()
            .find(|m| m["role"] == "user")
            .is_some_and(|m| message_text(m).starts_with("SUBTASK"))
    });
    assert_eq!((sub.len(), root.len()), (1, 2));
    assert_eq!(reminders(sub[0], ""), 0);
    assert_eq!(reminders(root[0], "Plan mode is on."), 1);
    Ok(())
}

#[tokio::test]
async fn skip_afk_prompt_injection_keeps_every_afk_reminder_out() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::call("tc-1", "Glob", json!({"pattern": "*.txt"})),
        _ => Reply::Text("ok".into()),
    })
    .await;
    let home = home_for(&model, json!({"skip_afk_prompt_injection": true}))?.arg("--afk");
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    wire.prompt(json!("one")).await?;
    let (response, _) = wire.prompt(json!("/afk")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    wire.prompt(json!("two")).await?;
    let requests = model.requests().await;
    assert_eq!(requests.len(), 3);
    for (n, request) in requests.iter().enumerate() {
        assert_eq!(reminders(request, "Nobody is at the keyboard"), 0, "request {n}");
        assert_eq!(reminders(request, "Afk mode is off"), 0, "request {n}");
    }
    Ok(())
}

#[tokio::test]
async fn a_write_after_enter_plan_mode_in_the_same_step_is_refused() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::Calls(vec![
            call("tc-enter", "EnterPlanMode", json!({})),
            call("tc-write", "WriteFile", json!({"path": "x.txt", "content": "hi"})),
        ]),
        _ => Reply::Text("planning".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?.arg("--yolo");
    let mut wire = spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let (response, _) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let requests = model.requests().await;
    let written = tool_result(&requests[1], "tc-write").context("no write result")?;
    assert!(
        written.contains("Plan mode is active. You may only edit the current plan file"),
        "{written}"
    );
    assert!(!home.work().join("x.txt").exists());
    Ok(())
}

#[tokio::test]
async fn a_write_after_an_approved_exit_plan_mode_in_the_same_step_goes_ahead() -> Result<()> {
    let model = MockModel::start(|n, messages| match n {
        0 => {
            let text = last_text(messages);
            let path = text
                .split("Plan file: ")
                .nth(1)
                .and_then(|rest| rest.split(" (").next())
                .unwrap_or("no-plan-file-in-reminder")
                .to_owned();
            Reply::call(
                "tc-plan",
                "WriteFile",
                json!({"path": path, "content": "# Plan\n"}),
            )
        }
        1 => Reply::Calls(vec![
            call("tc-exit", "ExitPlanMode", json!({})),
            call("tc-write", "WriteFile", json!({"path": "x.txt", "content": "hi"})),
        ]),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?.arg("--plan").arg("--yolo");
    let mut wire = spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let prompt = wire.start_prompt(json!("plan, then do it")).await?;
    let exit = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &exit, "Approve").await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let requests = model.requests().await;
    let written = tool_result(&requests[2], "tc-write").context("no write result")?;
    assert!(written.contains("File successfully overwritten"), "{written}");
    assert_eq!(std::fs::read_to_string(home.work().join("x.txt"))?, "hi");
    Ok(())
}

async fn answer(wire: &mut WireProcess, request: &Value, label: &str) -> Result<()> {
    let payload = &request["params"]["payload"];
    let question = payload["questions"][0]["question"].as_str().context("question")?;
    let id = request["id"].as_str().context("request id")?;
    wire.respond(
        id,
        json!({"request_id": payload["id"], "answers": {question: label}}),
    )
    .await
}

// ---------------------------------------------------------------------------------------------------
// Point 4: repeats that differ in spacing, and loops of several calls

#[tokio::test]
async fn commands_that_differ_only_in_spacing_escalate_to_the_forced_stop() -> Result<()> {
    let spellings = ["echo x", "echo  x", "echo x "];
    let model = MockModel::start(move |n, _| {
        Reply::call(&format!("tc-{n}"), "Shell", json!({"command": spellings[n % 3]}))
    })
    .await;
    let home = home_for(&model, json!({}))?.arg("--yolo");
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, _) = wire.prompt(json!("loop")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let requests = model.requests().await;
    assert_eq!(requests.len(), 12, "the turn is stopped after the twelfth repeat");
    let result = |n: usize| tool_result(&requests[n + 1], &format!("tc-{n}")).unwrap_or_default();
    assert!(!result(1).contains("<system-reminder>"));
    assert!(result(2).contains("<system-reminder>\nYou have now sent this exact tool call"));
    let firm = result(4);
    assert!(
        firm.contains("- tool: Shell\n- repeated_times: 5\n- arguments: "),
        "{firm}"
    );
    assert!(result(7).contains("Make no more tool calls"));
    Ok(())
}

#[tokio::test]
async fn a_loop_of_four_different_calls_escalates_to_the_forced_stop() -> Result<()> {
    let model = MockModel::start(|n, _| {
        let path = ["a.txt", "b.txt", "c.txt", "d.txt"][n % 4];
        Reply::call(&format!("tc-{n}"), "ReadFile", json!({ "path": path }))
    })
    .await;
    let home = home_for(&model, json!({}))?;
    for name in ["a.txt", "b.txt", "c.txt", "d.txt"] {
        std::fs::write(home.work().join(name), name)?;
    }
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, _) = wire.prompt(json!("loop")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let requests = model.requests().await;
    assert_eq!(requests.len(), 15);
    let result = |n: usize| tool_result(&requests[n + 1], &format!("tc-{n}")).unwrap_or_default();
    for n in 0..7 {
        assert!(!result(n).contains("<system-reminder>"), "{n}: {}", result(n));
    }
    let firm = result(7);
    assert!(firm.contains("loop of 4 steps"), "{firm}");
    assert!(firm.contains("- repeated_times: 5\n"), "{firm}");
    assert!(result(10).contains("Make no more tool calls"));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Point 5: a subagent's rejected call, PostToolUseFailure

#[tokio::test]
async fn a_subagent_whose_call_is_rejected_finds_another_way() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        let sub = messages
            .iter()
            .any(|m| m["role"] == "user" && message_text(m).starts_with("SUBTASK"));
        let last_is_tool = messages.last().is_some_and(|m| m["role"] == "tool");
        match (sub, last_is_tool) {
            (true, false) => Reply::call("tc-s", "Shell", json!({"command": "touch marker"})),
            (true, true) => Reply::Text(format!("I could not run the command: {}", "it was refused. ".repeat(20))),
            (false, false) => Reply::call(
                "tc-a",
                "Agent",
                json!({"description": "touch", "prompt": "SUBTASK: touch the marker", "subagent_type": "coder"}),
            ),
            (false, true) => Reply::Text("done".into()),
        }
    })
    .await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("delegate")).await?;
    let approval = wire.wait_request("ApprovalRequest").await?;
    assert!(approval["params"]["payload"]["agent_id"].is_string());
    wire.send(&approval_answer(&approval, "reject")).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert!(!home.work().join("marker").exists());

    let requests = model.requests().await;
    let told = requests
        .iter()
        .find_map(|r| tool_result(r, "tc-s"))
        .context("the subagent never saw its rejection")?;
    assert!(told.contains("Reach the goal another way"), "{told}");
    let agent = payloads(&messages, "ToolResult")
        .into_iter()
        .find(|r| r["tool_call_id"] == "tc-a")
        .context("no Agent result")?;
    assert_eq!(agent["return_value"]["is_error"], json!(false), "{agent}");
    let output = agent["return_value"]["output"].as_str().unwrap_or_default();
    assert!(output.contains("I could not run the command"), "{output}");
    Ok(())
}

#[tokio::test]
async fn a_failing_tool_fires_post_tool_use_failure_and_a_working_one_post_tool_use() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::call("tc-1", "ReadFile", json!({"path": "missing.txt"})),
        1 => Reply::call("tc-2", "ReadFile", json!({"path": "present.txt"})),
        _ => Reply::Text("done".into()),
    })
    .await;
    let hooks = json!([
        {"event": "PostToolUseFailure", "matcher": "^ReadFile$", "command": "cat > failure.json"},
        {"event": "PostToolUse", "matcher": "^ReadFile$", "command": "cat > success.json"},
    ]);
    let home = home_for(&model, json!({"hooks": hooks}))?;
    std::fs::write(home.work().join("present.txt"), "here")?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("read")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    // The hooks run in the background; each reports when it is done, during the turn or after it.
    let name = |payload: &Value| payload["event"].as_str().unwrap_or_default().to_owned();
    let mut resolved: Vec<String> = payloads(&messages, "HookResolved")
        .into_iter()
        .map(name)
        .collect();
    while resolved.len() < 2 {
        resolved.push(name(&wire.wait_event("HookResolved").await?["params"]["payload"]));
    }
    resolved.sort();
    assert_eq!(resolved, ["PostToolUse", "PostToolUseFailure"]);
    let read = |name: &str| -> Result<Value> {
        Ok(serde_json::from_str(&std::fs::read_to_string(
            home.work().join(name),
        )?)?)
    };
    let failure = read("failure.json")?;
    assert_eq!(
        (
            failure["hook_event_name"].clone(),
            failure["tool_name"].clone(),
            failure["tool_call_id"].clone(),
            failure["tool_input"].clone()
        ),
        (
            json!("PostToolUseFailure"),
            json!("ReadFile"),
            json!("tc-1"),
            json!({"path": "missing.txt"})
        )
    );
    assert!(
        failure["error"]
            .as_str()
            .unwrap_or_default()
            .contains("missing.txt"),
        "{failure}"
    );
    let success = read("success.json")?;
    assert_eq!(success["tool_call_id"], json!("tc-2"));
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Point 6: StrReplaceFile ambiguity

#[tokio::test]
async fn an_ambiguous_replacement_is_a_tool_error_and_changes_nothing() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::call(
            "tc-1",
            "StrReplaceFile",
            json!({"path": "f.txt", "edit": {"old": "value = 1", "new": "value = 2"}}),
        ),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?;
    let original = "a:\n  value = 1\nb:\n  value = 1\n";
    std::fs::write(home.work().join("f.txt"), original)?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("edit")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert!(!order(&messages).contains(&"request:ApprovalRequest".to_owned()));
    let requests = model.requests().await;
    let told = tool_result(&requests[1], "tc-1").context("no result")?;
    assert!(
        told.contains("`old` was found 2 times (starting on lines 2, 4)") && told.contains("replace_all"),
        "{told}"
    );
    assert_eq!(std::fs::read_to_string(home.work().join("f.txt"))?, original);
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// A ToolResult for every call the client saw, when the turn is cancelled while the call waits

/// Cancels the running turn once `wait_kind` (a request) is out, and checks that `tool_call_id` got an
/// error ToolResult saying so before TurnEnd.
async fn cancel_while_waiting(wire: &mut WireProcess, prompt: &str, wait_kind: &str) -> Result<()> {
    wire.wait_request(wait_kind).await?;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    let (response, messages) = wire.read_response(prompt).await?;
    assert_eq!(response["result"]["status"], json!("cancelled"));
    let result = position(&messages, |m| {
        is_event(m, "ToolResult") && m["params"]["payload"]["tool_call_id"] == "tc-1"
    })
    .with_context(|| {
        format!(
            "no ToolResult after a cancel during {wait_kind}: {:?}",
            order(&messages)
        )
    })?;
    let end = position(&messages, |m| is_event(m, "TurnEnd")).context("no TurnEnd")?;
    assert!(result < end, "{:?}", order(&messages));
    let value = &messages[result]["params"]["payload"]["return_value"];
    assert_eq!(
        (value["is_error"].clone(), value["message"].clone()),
        (
            json!(true),
            json!("The turn was cancelled before this call finished.")
        )
    );
    Ok(())
}

async fn shell_model() -> MockModel {
    MockModel::start(|n, _| match n {
        0 => Reply::call("tc-1", "Shell", json!({"command": "touch marker"})),
        _ => Reply::Text("done".into()),
    })
    .await
}

#[tokio::test]
async fn a_call_cancelled_while_waiting_for_its_approval_gets_its_result() -> Result<()> {
    let model = shell_model().await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    cancel_while_waiting(&mut wire, &prompt, "ApprovalRequest").await?;
    assert!(!home.work().join("marker").exists());
    Ok(())
}

#[tokio::test]
async fn a_call_cancelled_while_waiting_for_a_hook_answer_gets_its_result() -> Result<()> {
    let model = shell_model().await;
    let home = home_for(&model, json!({}))?.arg("--yolo");
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10", "hooks": [
        {"id": "sub-1", "event": "PreToolUse", "matcher": "^Shell$", "timeout": 30},
    ]}))
    .await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    cancel_while_waiting(&mut wire, &prompt, "HookRequest").await?;
    assert!(!home.work().join("marker").exists());
    Ok(())
}

#[tokio::test]
async fn a_call_cancelled_while_waiting_for_the_client_tool_gets_its_result() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::call("tc-1", "ext_tool", json!({"path": "a"})),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = home_for(&model, json!({}))?;
    let mut wire = spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10", "external_tools": [external_tool("ext_tool")]}))
        .await?;
    let prompt = wire.start_prompt(json!("call the client")).await?;
    cancel_while_waiting(&mut wire, &prompt, "ToolCallRequest").await?;
    // The server is idle and answers the next prompt.
    let (response, _) = wire.prompt(json!("again")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    Ok(())
}
