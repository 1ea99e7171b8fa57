//! seeds/002 "Plan 模式": EnterPlanMode and ExitPlanMode; in plan mode Write and Edit reach only the plan
//! file, TaskStop (and the cron tools) are refused, and the model is told about its own tool names.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{calling, kimi_code};
use crate::common::mock_model::{MockModel, Reply, message_text, tool_result};
use crate::common::{TestHome, WireProcess, payloads};
use crate::suite::plan_mode::answer;

#[tokio::test]
async fn enter_plan_mode_asks_the_user_and_is_not_an_approval() -> Result<()> {
    let home = calling(&[("p-1", "EnterPlanMode", json!({}))])?;
    let (_home, mut wire) = kimi_code(home).await?;
    let prompt = wire.start_prompt(json!("plan it")).await?;
    let request = wire.wait_request("QuestionRequest").await?;
    assert_eq!(
        request["params"]["payload"]["questions"][0]["question"],
        json!("Enter plan mode?")
    );
    answer(&mut wire, &request, "Yes").await?;
    let (response, events) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(result["message"], json!("Plan mode on"));
    // The guidance names the plan file and this agent's Write (the reference's says WriteFile).
    let guidance = result["output"].as_str().unwrap_or_default();
    assert!(guidance.contains("\nPlan file: /"), "{guidance}");
    assert!(guidance.contains("(create it with Write first)"), "{guidance}");
    assert!(
        !events.iter().any(|m| m["params"]["type"] == "ApprovalRequest"),
        "EnterPlanMode needs no approval"
    );
    Ok(())
}

/// The plan file named in a plan-mode refusal.
fn plan_path(messages: &[Value], id: &str) -> Option<String> {
    tool_result(messages, id)?.split('`').nth(1).map(str::to_owned)
}

#[tokio::test]
async fn in_plan_mode_write_and_edit_reach_only_the_plan_file_and_exit_plan_mode_checks_options() -> Result<()>
{
    let mock = MockModel::start(|n, messages| match n {
        0 => Reply::Calls(vec![
            (
                "w-1".into(),
                "Write".into(),
                json!({"path": "x.txt", "content": "x"}),
            ),
            (
                "e-1".into(),
                "Edit".into(),
                json!({"path": "f.txt", "old_string": "a", "new_string": "b"}),
            ),
            (
                "s-1".into(),
                "TaskStop".into(),
                json!({"task_id": "bash-00000000"}),
            ),
            (
                "c-1".into(),
                "CronCreate".into(),
                json!({"cron": "*/5 * * * *", "prompt": "check"}),
            ),
        ]),
        1 => {
            let plan = plan_path(messages, "w-1").unwrap_or_default();
            let option = |label: &str| json!({"label": label, "description": ""});
            Reply::Calls(vec![
                (
                    "w-2".into(),
                    "Write".into(),
                    json!({"path": plan, "content": "# Plan\n1. do it\n"}),
                ),
                ("x-1".into(), "ExitPlanMode".into(), json!({"options": []})),
                (
                    "x-2".into(),
                    "ExitPlanMode".into(),
                    json!({"options": [option("a"), option("b"), option("c"), option("d")]}),
                ),
                (
                    "x-3".into(),
                    "ExitPlanMode".into(),
                    json!({"options": [option(&"y".repeat(81))]}),
                ),
                (
                    "x-4".into(),
                    "ExitPlanMode".into(),
                    json!({"options": [option("Approve"), option("b")]}),
                ),
                (
                    "x-6".into(),
                    "ExitPlanMode".into(),
                    json!({"options": [option("a"), option("b"), option("a")]}),
                ),
            ])
        }
        2 => Reply::call("x-5", "ExitPlanMode", json!({})),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = TestHome::new()?
        .with_config(&mock.config(json!({})))?
        .arg("--plan");
    std::fs::write(home.work().join("f.txt"), "a")?;
    let (home, mut wire) = kimi_code(home).await?;
    let prompt = wire.start_prompt(json!("plan the change")).await?;
    let question = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &question, "Approve").await?;
    let (response, events) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    // Nothing was asked: refused calls never ask, and the plan file is written without asking.
    assert!(!events.iter().any(|m| m["params"]["type"] == "ApprovalRequest"));
    let results = payloads(&events, "ToolResult");
    let result = |id: &str| {
        results
            .iter()
            .find(|r| r["tool_call_id"] == id)
            .map(|r| r["return_value"].clone())
            .unwrap_or_default()
    };
    let plan = plan_path(&mock.requests().await[1], "w-1").context("no plan path")?;
    // CronCreate writes the session's cron.json, which plan mode refuses like any other file.
    for id in ["w-1", "e-1", "c-1"] {
        assert_eq!(
            result(id)["message"],
            json!(format!(
                "Plan mode is active. You may only edit the current plan file: `{plan}`."
            ))
        );
    }
    assert_eq!(
        result("s-1")["message"],
        json!("TaskStop is not available in plan mode.")
    );
    assert_eq!(std::fs::read_to_string(home.work().join("f.txt"))?, "a");
    assert!(!home.work().join("x.txt").exists());
    assert_eq!(std::fs::read_to_string(&plan)?, "# Plan\n1. do it\n");
    let prefix = "Error validating JSON arguments: 1 validation error for Params\n";
    assert_eq!(
        result("x-1")["message"],
        json!(format!(
            "{prefix}options\n  List should have at least 1 item after validation, not 0"
        ))
    );
    assert_eq!(
        result("x-2")["message"],
        json!(format!(
            "{prefix}options\n  List should have at most 3 items after validation, not 4"
        ))
    );
    assert_eq!(
        result("x-3")["message"],
        json!(format!(
            "{prefix}options.0.label\n  String should have at most 80 characters"
        ))
    );
    assert_eq!(
        result("x-4")["message"],
        json!(format!(
            "{prefix}options.0.label\n  Value error, Option label 'Approve' is reserved. Do not use 'Approve', \
             'Reject', 'Reject And Exit', 'Revise' as option labels."
        ))
    );
    assert_eq!(
        result("x-6")["message"],
        json!(format!(
            "{prefix}options\n  Value error, Option labels must be unique. Found duplicate label(s)."
        ))
    );
    assert_eq!(result("x-5")["message"], json!("Plan approved"));

    // The plan-mode reminder names this agent's tools.
    let first = &mock.requests().await[0];
    let reminder = first
        .iter()
        .map(message_text)
        .find(|t| t.contains("Plan mode is on"))
        .context("no plan-mode reminder")?;
    assert!(reminder.contains("with Write"), "{reminder}");
    assert!(
        !reminder.contains("WriteFile") && !reminder.contains("StrReplaceFile"),
        "{reminder}"
    );
    Ok(())
}

/// seeds/002: yolo approves ordinary actions by itself, but leaving plan mode is still the user's
/// call. In both agents, under `--yolo`, ExitPlanMode asks its question and nothing asks an approval.
#[tokio::test]
async fn yolo_still_asks_the_user_to_approve_the_plan_in_both_agents() -> Result<()> {
    for (agent, write) in [(Some("kimi-code"), "Write"), (None, "WriteFile")] {
        let mock = MockModel::start(move |n, messages| match n {
            0 => Reply::call("w-1", write, json!({"path": "x.txt", "content": "x"})),
            1 => {
                let plan = plan_path(messages, "w-1").unwrap_or_default();
                Reply::Calls(vec![
                    (
                        "w-2".into(),
                        write.into(),
                        json!({"path": plan, "content": "# Plan\n"}),
                    ),
                    ("x-1".into(), "ExitPlanMode".into(), json!({})),
                ])
            }
            _ => Reply::Text("done".into()),
        })
        .await;
        let mut home = TestHome::new()?
            .with_config(&mock.config(json!({})))?
            .arg("--plan")
            .arg("--yolo");
        if let Some(agent) = agent {
            home = home.arg("--agent").arg(agent);
        }
        let mut wire = WireProcess::spawn(&home).await?;
        wire.initialize(json!({
            "protocol_version": "1.10",
            "capabilities": {"supports_question": true, "supports_plan_mode": true}
        }))
        .await?;
        let prompt = wire.start_prompt(json!("plan the change")).await?;
        let (question, before) = wire
            .read_until(|m| {
                m["method"] == "request" || m.get("id").and_then(Value::as_str) == Some(prompt.as_str())
            })
            .await?;
        assert_eq!(
            question["params"]["type"],
            json!("QuestionRequest"),
            "{agent:?}: {question}"
        );
        let asked = &question["params"]["payload"]["questions"][0]["question"];
        assert!(
            asked.as_str().is_some_and(|q| q.contains("plan")),
            "{agent:?}: {question}"
        );
        answer(&mut wire, &question, "Approve").await?;
        let (response, after) = wire.read_response(&prompt).await?;
        assert_eq!(response["result"]["status"], json!("finished"), "{agent:?}");
        let results = payloads(&after, "ToolResult");
        let exit = results
            .iter()
            .find(|r| r["tool_call_id"] == "x-1")
            .context("no ExitPlanMode result")?;
        assert_eq!(
            exit["return_value"]["message"],
            json!("Plan approved"),
            "{agent:?}"
        );
        assert!(
            !before
                .iter()
                .chain(&after)
                .any(|m| m["params"]["type"] == "ApprovalRequest"),
            "{agent:?}: yolo asks no approval"
        );
    }
    Ok(())
}
