//! Plan mode: the approval layer lets writes go only to the plan file, and the EnterPlanMode /
//! ExitPlanMode tools ask the user through `QuestionRequest`s.

use std::path::PathBuf;

use anyhow::{Context, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, payloads, tool_call_line};

#[tokio::test]
async fn set_plan_mode_reports_and_records_the_new_state() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let id = wire.request("set_plan_mode", json!({"enabled": true})).await?;
    let (response, before) = wire.read_response(&id).await?;
    assert_eq!(response["result"], json!({"status": "ok", "plan_mode": true}));
    let status = payloads(&before, "StatusUpdate");
    assert_eq!(status.len(), 1);
    assert_eq!(status[0]["plan_mode"], json!(true));
    // The next step reports plan mode in its StatusUpdate too.
    let (_, events) = wire.prompt(json!("hi")).await?;
    assert_eq!(payloads(&events, "StatusUpdate")[0]["plan_mode"], json!(true));
    Ok(())
}

#[tokio::test]
async fn in_plan_mode_a_write_outside_the_plan_file_is_refused_without_asking() -> Result<()> {
    let args = json!({"path": "notes.txt", "content": "x"}).to_string();
    let call = tool_call_line("tc-1", "WriteFile", Some(&args));
    let home = TestHome::new()?.scripted(&[call.as_str(), "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let id = wire.request("set_plan_mode", json!({"enabled": true})).await?;
    wire.read_response(&id).await?;
    let (response, events) = wire.prompt(json!("write")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert!(
        !events.iter().any(|m| m["method"] == "request"),
        "no approval may be asked for a refused write"
    );
    let result = payloads(&events, "ToolResult")[0]["return_value"].clone();
    assert_eq!(result["is_error"], json!(true));
    let message = result["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Plan mode is active. You may only edit the current plan file: `"),
        "{message}"
    );
    assert_eq!(
        result["display"],
        json!([{"type": "brief", "text": "Plan mode restriction"}])
    );
    assert!(!home.work().join("notes.txt").exists());
    // The plan file path lives under HOME/.kimi/plans, not the share dir.
    let plan: &str = message.split('`').nth(1).unwrap_or_default();
    assert!(
        plan.starts_with(&home.home().join(".kimi/plans").to_string_lossy().into_owned()),
        "{plan}"
    );
    Ok(())
}

fn plan_client() -> Value {
    json!({"protocol_version": "1.10", "capabilities": {"supports_question": true, "supports_plan_mode": true}})
}

/// Answers a `QuestionRequest` by choosing `label` for its (only) question.
pub(super) async fn answer(wire: &mut WireProcess, request: &Value, label: &str) -> Result<()> {
    let payload = &request["params"]["payload"];
    let question = payload["questions"][0]["question"].as_str().unwrap_or_default();
    let id = request["id"].as_str().unwrap_or_default();
    wire.respond(
        id,
        json!({"request_id": payload["id"], "answers": {question: label}}),
    )
    .await
}

fn state(home: &TestHome) -> Result<Value> {
    let dir = home.session_dirs().into_iter().next().context("no session")?;
    Ok(serde_json::from_str(&std::fs::read_to_string(
        dir.join("state.json"),
    )?)?)
}

/// Runs one prompt whose refused write reveals the plan file, and writes `plan` there.
async fn write_plan(wire: &mut WireProcess, plan: &str) -> Result<PathBuf> {
    let (_, events) = wire.prompt(json!("find the plan file")).await?;
    let message = payloads(&events, "ToolResult")[0]["return_value"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let path = PathBuf::from(message.split('`').nth(1).context("no plan path")?);
    std::fs::create_dir_all(path.parent().context("plan file has no parent")?)?;
    std::fs::write(&path, plan)?;
    Ok(path)
}

fn refused_write() -> String {
    tool_call_line(
        "tc-w",
        "WriteFile",
        Some(&json!({"path": "x.txt", "content": "x"}).to_string()),
    )
}

#[tokio::test]
async fn enter_plan_mode_asks_and_yes_turns_plan_mode_on() -> Result<()> {
    let call = tool_call_line("tc-1", "EnterPlanMode", Some("{}"));
    let home = TestHome::new()?.scripted(&[call.as_str(), "text: planning"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let prompt = wire.start_prompt(json!("big change")).await?;
    let request = wire.wait_request("QuestionRequest").await?;
    let question = &request["params"]["payload"]["questions"][0];
    assert_eq!(
        (question["question"].clone(), question["header"].clone()),
        (json!("Enter plan mode?"), json!("Plan Mode"))
    );
    let labels: Vec<&Value> = question["options"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| &o["label"])
        .collect();
    assert_eq!(labels, [&json!("Yes"), &json!("No")]);
    assert_eq!(request["params"]["payload"]["tool_call_id"], json!("tc-1"));
    answer(&mut wire, &request, "Yes").await?;
    let (response, events) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(
        (result["is_error"].clone(), result["message"].clone()),
        (json!(false), json!("Plan mode on"))
    );
    assert!(
        result["output"]
            .as_str()
            .unwrap_or_default()
            .contains("/.kimi/plans/"),
        "{result}"
    );
    // The next step runs in plan mode, and the session remembers it.
    let statuses = payloads(&events, "StatusUpdate");
    assert_eq!(statuses.last().map(|s| s["plan_mode"].clone()), Some(json!(true)));
    assert_eq!(state(&home)?["plan_mode"], json!(true));
    assert!(state(&home)?["plan_slug"].is_string());
    Ok(())
}

#[tokio::test]
async fn enter_plan_mode_no_leaves_plan_mode_off_and_yolo_skips_the_question() -> Result<()> {
    let call = tool_call_line("tc-1", "EnterPlanMode", Some("{}"));
    let home = TestHome::new()?.scripted(&[call.as_str(), "text: fine", call.as_str(), "text: planning"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let prompt = wire.start_prompt(json!("small change")).await?;
    let request = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &request, "No").await?;
    let (_, events) = wire.read_response(&prompt).await?;
    assert_eq!(
        payloads(&events, "ToolResult")[0]["return_value"]["message"],
        json!("Declined")
    );
    assert_eq!(state(&home)?["plan_mode"], json!(false));

    let yolo = wire.prompt(json!("/yolo")).await?;
    assert_eq!(yolo.0["result"]["status"], json!("finished"));
    let (_, events) = wire.prompt(json!("again")).await?;
    assert!(
        !events.iter().any(|m| m["method"] == "request"),
        "yolo must not ask"
    );
    assert_eq!(
        payloads(&events, "ToolResult")[0]["return_value"]["message"],
        json!("Plan mode on (auto)")
    );
    Ok(())
}

#[tokio::test]
async fn exit_plan_mode_shows_the_plan_and_approval_ends_plan_mode() -> Result<()> {
    let exit = tool_call_line("tc-2", "ExitPlanMode", Some("{}"));
    let home = TestHome::new()?
        .scripted(&[
            refused_write().as_str(),
            "text: found",
            exit.as_str(),
            "text: executing",
        ])?
        .arg("--plan");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let path = write_plan(&mut wire, "# Plan\n1. do it\n").await?;
    let prompt = wire.start_prompt(json!("submit")).await?;
    let display = wire.wait_event("PlanDisplay").await?;
    assert_eq!(
        display["params"]["payload"],
        json!({"content": "# Plan\n1. do it\n", "file_path": path.to_string_lossy()})
    );
    let request = wire.wait_request("QuestionRequest").await?;
    let question = &request["params"]["payload"]["questions"][0];
    assert_eq!(
        (
            question["question"].clone(),
            question["header"].clone(),
            question["other_label"].clone()
        ),
        (json!("Approve this plan"), json!("Plan"), json!("Revise"))
    );
    let labels: Vec<&Value> = question["options"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|o| &o["label"])
        .collect();
    assert_eq!(
        labels,
        [&json!("Approve"), &json!("Reject"), &json!("Reject and Exit")]
    );
    answer(&mut wire, &request, "Approve").await?;
    let (response, events) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(result["message"], json!("Plan approved"));
    assert!(
        result["output"]
            .as_str()
            .unwrap_or_default()
            .ends_with("## Approved Plan:\n# Plan\n1. do it\n"),
        "{result}"
    );
    // The model's next step already runs outside plan mode.
    assert_eq!(
        payloads(&events, "StatusUpdate")
            .last()
            .map(|s| s["plan_mode"].clone()),
        Some(json!(false))
    );
    assert_eq!(state(&home)?["plan_mode"], json!(false));
    assert_eq!(state(&home)?["plan_slug"], json!(null));
    Ok(())
}

#[tokio::test]
async fn a_rejected_plan_stops_the_turn_and_keeps_plan_mode() -> Result<()> {
    let exit = tool_call_line("tc-2", "ExitPlanMode", Some("{}"));
    let home = TestHome::new()?
        .scripted(&[
            refused_write().as_str(),
            "text: found",
            exit.as_str(),
            "text: never",
        ])?
        .arg("--plan");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    write_plan(&mut wire, "the plan").await?;
    let prompt = wire.start_prompt(json!("submit")).await?;
    let request = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &request, "Reject").await?;
    let (response, events) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(
        (result["is_error"].clone(), result["display"].clone()),
        (json!(true), json!([{"type": "brief", "text": "Plan rejected"}]))
    );
    assert_eq!(
        payloads(&events, "StepBegin").len(),
        1,
        "the turn stops after the rejected step"
    );
    assert_eq!(state(&home)?["plan_mode"], json!(true));
    Ok(())
}

#[tokio::test]
async fn plan_options_are_checked_and_the_chosen_one_is_named() -> Result<()> {
    let reserved = json!({"options": [{"label": "approve"}, {"label": "B"}]}).to_string();
    let choices =
        json!({"options": [{"label": "Fast", "description": "quick"}, {"label": "Safe"}]}).to_string();
    let home = TestHome::new()?
        .scripted(&[
            refused_write().as_str(),
            "text: found",
            tool_call_line("tc-r", "ExitPlanMode", Some(&reserved)).as_str(),
            tool_call_line("tc-c", "ExitPlanMode", Some(&choices)).as_str(),
            "text: executing",
        ])?
        .arg("--plan");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    write_plan(&mut wire, "two ways").await?;
    let prompt = wire.start_prompt(json!("submit")).await?;
    let request = wire.wait_request("QuestionRequest").await?;
    let options = &request["params"]["payload"]["questions"][0]["options"];
    assert_eq!(
        options,
        &json!([
            {"label": "Fast", "description": "quick"},
            {"label": "Safe", "description": ""},
            {"label": "Reject", "description": "Reject and stay in plan mode"},
            {"label": "Reject and Exit", "description": "Reject and exit plan mode"}
        ])
    );
    answer(&mut wire, &request, "Safe").await?;
    let (_, events) = wire.read_response(&prompt).await?;
    let results = payloads(&events, "ToolResult");
    assert_eq!(
        results[0]["return_value"]["message"],
        json!(
            "Error validating JSON arguments: 1 validation error for Params\noptions.0.label\n  Value error, Option label 'approve' is reserved. Do not use 'Approve', 'Reject', 'Reject And Exit', 'Revise' as option labels."
        )
    );
    assert_eq!(
        results[1]["return_value"]["message"],
        json!("Plan approved: Safe")
    );
    Ok(())
}

#[tokio::test]
async fn exit_plan_mode_outside_plan_mode_is_an_error() -> Result<()> {
    let exit = tool_call_line("tc-1", "ExitPlanMode", Some("{}"));
    let home = TestHome::new()?.scripted(&[exit.as_str(), "text: ok"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let (_, events) = wire.prompt(json!("go")).await?;
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(
        (result["is_error"].clone(), result["message"].clone()),
        (
            json!(true),
            json!("Not in plan mode. ExitPlanMode is only available during plan mode.")
        )
    );
    Ok(())
}

#[tokio::test]
async fn ask_user_question_round_trips_the_answer() -> Result<()> {
    let args =
        json!({"questions": [{"question": "Which db?", "options": [{"label": "pg"}, {"label": "sqlite"}]}]});
    let call = tool_call_line("tc-1", "AskUserQuestion", Some(&args.to_string()));
    let home = TestHome::new()?.scripted(&[call.as_str(), "text: ok"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(plan_client()).await?;
    let prompt = wire.start_prompt(json!("ask me")).await?;
    let request = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &request, "pg").await?;
    let (_, events) = wire.read_response(&prompt).await?;
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(result["output"], json!(r#"{"answers": {"Which db?": "pg"}}"#));
    Ok(())
}
