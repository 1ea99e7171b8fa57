//! The toolset pipeline seen from outside: approval enforced from each tool's declared effect,
//! de-duplication and repeat detection, concurrent dispatch with results in call order, external tools,
//! Shell's process-group kill, and the output budget (model sees head and tail, client sees all).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    READ_TIMEOUT, TestHome, WireProcess, approval_answer, external_tool, init_with_tools, kinds, payloads,
    shell_call_line, tool_call_line,
};

/// The reference's message for a rejection without feedback.
const REJECTED: &str = "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.";

async fn spawn_initialized(home: &TestHome) -> Result<WireProcess> {
    let mut wire = WireProcess::spawn(home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    Ok(wire)
}

/// Ends the process (so every file is flushed) and returns the lines of its only session's context.
async fn context_after_exit(wire: &mut WireProcess, home: &TestHome) -> Result<Vec<Value>> {
    let status = wire.wait_exit().await?;
    assert_eq!(status.code(), Some(0));
    let dir = only_session(home)?;
    let text = std::fs::read_to_string(dir.join("context.jsonl"))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).with_context(|| format!("context line {l}")))
        .collect()
}

fn only_session(home: &TestHome) -> Result<PathBuf> {
    match home.session_dirs().as_slice() {
        [dir] => Ok(dir.clone()),
        dirs => bail!("expected one session, found {dirs:?}"),
    }
}

/// The text the model got for `tool_call_id` (its tool message's text parts, joined).
fn model_text(context: &[Value], tool_call_id: &str) -> Result<String> {
    let message = context
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == tool_call_id)
        .ok_or_else(|| anyhow!("no tool message for {tool_call_id}"))?;
    Ok(match &message["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
        other => bail!("unexpected content {other}"),
    })
}

/// `tool_call_id` of every tool message of the context, in order.
fn tool_message_ids(context: &[Value]) -> Vec<String> {
    context
        .iter()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["tool_call_id"].as_str().map(str::to_owned))
        .collect()
}

fn results(messages: &[Value]) -> Vec<&Value> {
    payloads(messages, "ToolResult")
}

fn requests(messages: &[Value], kind: &str) -> usize {
    kinds(messages)
        .iter()
        .filter(|k| *k == &format!("request:{kind}"))
        .count()
}

fn step_script(text: &str, calls: &[String]) -> String {
    let mut script = format!("text: {text}");
    for call in calls {
        script.push('\n');
        script.push_str(call);
    }
    script
}

// ---------------------------------------------------------------------------------------------------
// Approval from the declared effect

#[tokio::test]
async fn a_rejected_side_effect_never_runs_and_stops_the_turn() -> Result<()> {
    let call = step_script("touching", &[shell_call_line("tc-1", "touch marker")]);
    let home = TestHome::new()?.scripted(&[&call, "text: never reached"])?;
    let mut wire = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    assert_eq!(request["params"]["payload"]["action"], "run command");
    assert_eq!(
        request["params"]["payload"]["description"],
        "Run command `touch marker`"
    );
    wire.send(&approval_answer(&request, "reject")).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let results = results(&messages);
    assert_eq!(results.len(), 1);
    assert_eq!(
        results[0]["return_value"],
        json!({"is_error": true, "output": "", "message": REJECTED,
               "display": [{"type": "brief", "text": "Rejected by user"}], "extras": null})
    );
    // One step only: a rejection without feedback ends the turn.
    assert_eq!(payloads(&messages, "StepBegin").len(), 1);
    assert!(!home.work().join("marker").exists());
    Ok(())
}

#[tokio::test]
async fn an_unanswered_approval_then_cancel_never_runs() -> Result<()> {
    let call = step_script("touching", &[shell_call_line("tc-1", "touch marker")]);
    let home = TestHome::new()?.scripted(&[&call, "text: never reached"])?;
    let mut wire = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    let cancel = wire.request("cancel", json!({})).await?;
    assert_eq!(wire.response_to(&cancel).await?["result"], json!({}));
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "cancelled"}));
    // The pending request is reported rejected to the client.
    let responses = payloads(&messages, "ApprovalResponse");
    assert_eq!(
        responses,
        vec![
            &json!({"request_id": request["params"]["payload"]["id"], "response": "reject", "feedback": ""})
        ]
    );
    // A late answer changes nothing.
    wire.send(&approval_answer(&request, "approve")).await?;
    wire.assert_alive().await?;
    assert!(!home.work().join("marker").exists());
    Ok(())
}

#[tokio::test]
async fn an_approved_side_effect_runs() -> Result<()> {
    let call = step_script("touching", &[shell_call_line("tc-1", "touch marker")]);
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?;
    let mut wire = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("touch it")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    assert!(!home.work().join("marker").exists(), "ran before the approval");
    wire.send(&approval_answer(&request, "approve")).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(results(&messages)[0]["return_value"]["is_error"], json!(false));
    assert!(home.work().join("marker").exists());
    Ok(())
}

#[tokio::test]
async fn approve_for_session_lets_the_next_call_run_without_asking() -> Result<()> {
    let first = step_script("one", &[shell_call_line("tc-1", "touch a")]);
    let second = step_script("two", &[shell_call_line("tc-2", "touch b")]);
    let home = TestHome::new()?.scripted(&[&first, &second, "text: done", &second, "text: done"])?;
    let mut wire = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("touch both")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    wire.send(&approval_answer(&request, "approve_for_session"))
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        requests(&messages, "ApprovalRequest"),
        0,
        "{:?}",
        kinds(&messages)
    );
    assert!(home.work().join("a").exists() && home.work().join("b").exists());
    // Remembered for the next turn too.
    std::fs::remove_file(home.work().join("b"))?;
    let (response, messages) = wire.prompt(json!("again")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(requests(&messages, "ApprovalRequest"), 0);
    assert!(home.work().join("b").exists());
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// De-duplication and repeat detection

#[tokio::test]
async fn identical_calls_in_one_step_run_once_and_both_get_results() -> Result<()> {
    let command = "echo ran >> count; cat count";
    let step = step_script(
        "twice",
        &[
            tool_call_line(
                "tc-1",
                "Shell",
                Some(&json!({"command": command, "timeout": 30}).to_string()),
            ),
            // Same call, other key order and whitespace: still the same call.
            tool_call_line(
                "tc-2",
                "Shell",
                Some(&format!(
                    "{{ \"timeout\": 30,\n  \"command\": {} }}",
                    json!(command)
                )),
            ),
        ],
    );
    let home = TestHome::new()?.scripted(&[&step, "text: done"])?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let results = results(&messages);
    let mut ids: Vec<&str> = results
        .iter()
        .filter_map(|r| r["tool_call_id"].as_str())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, ["tc-1", "tc-2"]);
    for result in &results {
        assert_eq!(result["return_value"]["output"], "ran\n", "{result}");
    }
    assert_eq!(std::fs::read_to_string(home.work().join("count"))?, "ran\n");
    Ok(())
}

#[tokio::test]
async fn a_repeated_call_gets_a_reminder_in_the_model_message() -> Result<()> {
    let steps: Vec<String> = (1..=3)
        .map(|i| {
            step_script(
                &format!("try {i}"),
                &[shell_call_line(&format!("tc-{i}"), "echo same")],
            )
        })
        .collect();
    let mut scripts: Vec<&str> = steps.iter().map(String::as_str).collect();
    scripts.push("text: done");
    let home = TestHome::new()?.scripted(&scripts)?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let third = results(&messages)
        .into_iter()
        .find(|r| r["tool_call_id"] == "tc-3")
        .context("no result for tc-3")?
        .clone();
    let context = context_after_exit(&mut wire, &home).await?;
    for id in ["tc-1", "tc-2"] {
        let text = model_text(&context, id)?;
        assert!(!text.contains("<system-reminder>"), "{id}: {text}");
    }
    let text = model_text(&context, "tc-3")?;
    assert!(
        text.contains("same\n\n\n<system-reminder>\nYou have now sent this exact tool call"),
        "{text}"
    );
    assert!(
        third["return_value"]["output"]
            .as_str()
            .is_some_and(|o| o.contains("<system-reminder>"))
    );
    Ok(())
}

#[tokio::test]
async fn twelve_identical_steps_force_stop_the_turn() -> Result<()> {
    let steps: Vec<String> = (1..=13)
        .map(|i| step_script("again", &[shell_call_line(&format!("tc-{i}"), "echo stuck")]))
        .collect();
    let scripts: Vec<&str> = steps.iter().map(String::as_str).collect();
    let home = TestHome::new()?
        .scripted(&scripts)?
        .arg("--yolo")
        .arg("--max-steps-per-turn")
        .arg("20");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(payloads(&messages, "StepBegin").len(), 12);
    assert_eq!(results(&messages).len(), 12);
    let context = context_after_exit(&mut wire, &home).await?;
    let last = model_text(&context, "tc-12")?;
    assert!(last.contains("Make no more tool calls."), "{last}");
    Ok(())
}

#[tokio::test]
async fn an_alternating_cycle_escalates() -> Result<()> {
    let steps: Vec<String> = (1..=6)
        .map(|i| {
            let command = if i % 2 == 1 { "echo a" } else { "echo b" };
            step_script("loop", &[shell_call_line(&format!("tc-{i}"), command)])
        })
        .collect();
    let mut scripts: Vec<&str> = steps.iter().map(String::as_str).collect();
    scripts.push("text: done");
    let home = TestHome::new()?.scripted(&scripts)?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, _) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let context = context_after_exit(&mut wire, &home).await?;
    for id in ["tc-1", "tc-2", "tc-3"] {
        let text = model_text(&context, id)?;
        assert!(!text.contains("<system-reminder>"), "{id}: {text}");
    }
    let fourth = model_text(&context, "tc-4")?;
    assert!(
        fourth.contains("going round in a loop: the same 2 steps"),
        "{fourth}"
    );
    let sixth = model_text(&context, "tc-6")?;
    assert!(
        sixth.contains("stuck in a loop of 2 steps") && sixth.contains("- tool: Shell\n"),
        "{sixth}"
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Dispatch

#[tokio::test]
async fn calls_that_need_not_wait_run_at_once_and_results_keep_call_order() -> Result<()> {
    // Questions may run side by side: both requests are out before either is answered.
    let question =
        |q: &str| json!({"questions": [{"question": q, "options": [{"label": "a"}, {"label": "b"}]}]});
    let step = step_script(
        "both",
        &[
            tool_call_line("tc-1", "AskUserQuestion", Some(&question("one?").to_string())),
            tool_call_line("tc-2", "AskUserQuestion", Some("{\"questions\": ")),
            tool_call_line("tc-3", "AskUserQuestion", Some(&question("three?").to_string())),
        ],
    );
    let home = TestHome::new()?.scripted(&[&step, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10", "capabilities": {"supports_question": true}}))
        .await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    let first = wire.wait_request("QuestionRequest").await?;
    let second = wire.wait_request("QuestionRequest").await?;
    assert_eq!(first["params"]["payload"]["tool_call_id"], "tc-1");
    assert_eq!(second["params"]["payload"]["tool_call_id"], "tc-3");
    // Answer the later call first.
    for (request, label) in [(&second, "b"), (&first, "a")] {
        let payload = &request["params"]["payload"];
        let question = payload["questions"][0]["question"].as_str().context("question")?;
        let id = request["id"].as_str().context("request id")?;
        wire.respond(
            id,
            json!({"request_id": payload["id"], "answers": {question: label}}),
        )
        .await?;
    }
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    // Events go out as calls finish: tc-3 was answered before tc-1 (tc-2, bad JSON, failed at once).
    let event_order: Vec<&str> = results(&messages)
        .iter()
        .filter_map(|r| r["tool_call_id"].as_str())
        .filter(|id| *id != "tc-2")
        .collect();
    assert_eq!(event_order, ["tc-3", "tc-1"]);
    assert_eq!(results(&messages).len(), 3);
    let context = context_after_exit(&mut wire, &home).await?;
    assert_eq!(tool_message_ids(&context), ["tc-1", "tc-2", "tc-3"]);
    assert!(model_text(&context, "tc-2")?.contains("Error parsing JSON arguments: "));
    assert!(model_text(&context, "tc-3")?.contains("three?"));
    Ok(())
}

#[tokio::test]
async fn a_garbage_answer_to_a_tool_call_request_is_a_tool_error() -> Result<()> {
    let step = step_script(
        "calling",
        &[tool_call_line("tc-1", "ext_tool", Some(r#"{"path": "x"}"#))],
    );
    let home = TestHome::new()?.scripted(&[&step, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    let request = wire.wait_request("ToolCallRequest").await?;
    let id = request["id"].as_str().context("request id")?;
    wire.respond(id, json!({"what": "is this", "return_value": 42}))
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        results(&messages),
        vec![&json!({"tool_call_id": "tc-1", "return_value": {
            "is_error": true, "output": "", "message": "Invalid tool result payload from client.",
            "display": [{"type": "brief", "text": "Invalid tool result"}], "extras": null}})]
    );
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Shell

/// Whether process `pid` is gone (no such process, or a zombie nobody has reaped yet).
pub(crate) fn is_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        // The state follows the command name in parentheses, which may itself hold spaces.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

/// Polls for a condition that no event announces (a process dying after SIGKILL), up to the read timeout.
pub(crate) async fn eventually(what: &str, check: impl Fn() -> bool) -> Result<()> {
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    while !check() {
        if tokio::time::Instant::now() > deadline {
            bail!("timed out waiting until {what}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_grandchild_that_ignores_sigterm_dies_on_timeout() -> Result<()> {
    // The grandchild ignores SIGTERM, writes its pid, and would sleep for a minute.
    let command = r#"bash -c 'trap "" TERM; echo $$ > grandchild.pid; exec sleep 60' & wait"#;
    let call = tool_call_line(
        "tc-1",
        "Shell",
        Some(&json!({"command": command, "timeout": 1}).to_string()),
    );
    let home = TestHome::new()?
        .scripted(&[&step_script("slow", &[call]), "text: done"])?
        .arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let value = &results(&messages)[0]["return_value"];
    assert_eq!(value["message"], "Command killed by timeout (1s)");
    assert_eq!(
        value["display"],
        json!([{"type": "brief", "text": "Killed by timeout (1s)"}])
    );
    let pid: u32 = std::fs::read_to_string(home.work().join("grandchild.pid"))?
        .trim()
        .parse()?;
    eventually("the grandchild is gone", || is_gone(pid)).await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------------
// Output budget

fn seq(n: u32) -> String {
    (1..=n).map(|i| format!("{i}\n")).collect()
}

#[tokio::test]
async fn a_long_output_reaches_the_model_cut_and_the_client_whole() -> Result<()> {
    let call = step_script("long", &[shell_call_line("tc-1", "seq 1 30000")]);
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let full = seq(30000);
    assert!(full.len() > 150_000);
    let value = &results(&messages)[0]["return_value"];
    assert_eq!(value["output"].as_str(), Some(full.as_str()));
    assert_eq!(value["message"], "Command executed successfully.");

    let context = context_after_exit(&mut wire, &home).await?;
    let session = only_session(&home)?;
    let saved = session.join("tool-outputs").join("tc-1.txt");
    assert_eq!(std::fs::read_to_string(&saved)?, full);
    let text = model_text(&context, "tc-1")?;
    assert!(text.chars().count() < 52_000, "{}", text.len());
    assert!(text.contains("</system>1\n2\n3\n4\n"), "head kept");
    assert!(text.ends_with("29999\n30000\n"), "tail kept");
    assert!(text.contains("omitted here"), "marker");
    let path = saved.display().to_string();
    assert!(text.contains(&format!("is saved at {path}")), "path in marker");
    assert!(
        text.contains(&format!("full output is saved at {path}.")),
        "path in message"
    );
    assert!(!text.contains("\n15000\n"), "the middle is cut");
    Ok(())
}

#[tokio::test]
async fn a_short_output_is_the_same_for_model_and_client() -> Result<()> {
    let call = step_script("short", &[shell_call_line("tc-1", "seq 1 3")]);
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, _) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let context = context_after_exit(&mut wire, &home).await?;
    assert_eq!(
        model_text(&context, "tc-1")?,
        "<system>Command executed successfully.</system>1\n2\n3\n"
    );
    assert!(!only_session(&home)?.join("tool-outputs").exists());
    Ok(())
}
