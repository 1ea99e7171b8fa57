//! `state.json` across restarts (issue 4): the todo list, actions approved for the session, and the
//! reference's rule that `--yolo` applies to one run only.

use anyhow::{Context, Result, ensure};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, approval_answer, payloads, shell_call_line, tool_call_line};

const SESSION: &str = "stateful";

fn state_json(home: &TestHome) -> Result<Value> {
    let path = home.sessions_of_work_dir().join(SESSION).join("state.json");
    let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    Ok(serde_json::from_str(&text)?)
}

/// Starts the binary on [`SESSION`] with `scripts` and `extra` flags.
async fn start(home: &TestHome, scripts: &[&str], extra: &[&str]) -> Result<WireProcess> {
    let config = home.scripted_config(scripts, json!({}))?;
    let mut args = vec![
        "--wire".to_owned(),
        "--config-file".to_owned(),
        config.to_string_lossy().into_owned(),
        "--session".to_owned(),
        SESSION.to_owned(),
        "--work-dir".to_owned(),
        home.work().to_string_lossy().into_owned(),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    WireProcess::spawn_with(home, args).await
}

#[tokio::test]
async fn the_todo_list_is_restored_on_resume() -> Result<()> {
    let home = TestHome::new()?;
    let todos =
        json!({"todos": [{"title": "look", "status": "done"}, {"title": "fix", "status": "in_progress"}]});
    let set = tool_call_line("tc-1", "SetTodoList", Some(&todos.to_string()));
    let mut wire = start(&home, &[&set, "text: listed"], &[]).await?;
    let (response, _) = wire.prompt(json!("plan")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    wire.wait_exit().await?;
    assert_eq!(
        state_json(&home)?["todos"],
        json!([{"title": "look", "status": "done"}, {"title": "fix", "status": "in_progress"}])
    );

    // A new process: SetTodoList without `todos` reads the list back.
    let query = tool_call_line("tc-2", "SetTodoList", Some(r#"{"todos": null}"#));
    let mut wire = start(&home, &[&query, "text: read"], &[]).await?;
    let (response, messages) = wire.prompt(json!("what was the plan?")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let results = payloads(&messages, "ToolResult");
    ensure!(results.len() == 1, "{messages:#?}");
    assert_eq!(
        results[0]["return_value"]["output"],
        json!("Current todo list:\n- [done] look\n- [in_progress] fix")
    );
    wire.wait_exit().await?;
    Ok(())
}

#[tokio::test]
async fn an_action_approved_for_the_session_stays_approved_after_a_restart() -> Result<()> {
    let home = TestHome::new()?;
    let call = shell_call_line("tc-1", "true");
    let mut wire = start(&home, &[&call, "text: ran"], &[]).await?;
    let prompt = wire.start_prompt(json!("run it")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    wire.send(&approval_answer(&request, "approve_for_session"))
        .await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    wire.wait_exit().await?;
    let approval = state_json(&home)?["approval"].clone();
    assert_eq!(approval["yolo"], json!(false));
    ensure!(
        approval["auto_approve_actions"]
            .as_array()
            .is_some_and(|a| a.contains(&request["params"]["payload"]["action"])),
        "{approval}"
    );

    // The same action in a new process runs without asking.
    let call = shell_call_line("tc-2", "true");
    let mut wire = start(&home, &[&call, "text: ran again"], &[]).await?;
    let (response, messages) = wire.prompt(json!("run it again")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    ensure!(
        !messages.iter().any(|m| m["params"]["type"] == "ApprovalRequest"),
        "asked again: {messages:#?}"
    );
    assert_eq!(
        payloads(&messages, "ToolResult")[0]["return_value"]["is_error"],
        json!(false)
    );
    wire.wait_exit().await?;
    Ok(())
}

/// Reference (`soul/agent.py`): approval state is written to the session only when it changes, so a
/// run with `--yolo` leaves `approval.yolo` false and the next run without it asks again.
#[tokio::test]
async fn yolo_from_the_command_line_is_not_persisted() -> Result<()> {
    let home = TestHome::new()?;
    let call = shell_call_line("tc-1", "true");
    let mut wire = start(&home, &[&call, "text: ran"], &["--yolo"]).await?;
    let (response, messages) = wire.prompt(json!("run it")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    ensure!(!messages.iter().any(|m| m["params"]["type"] == "ApprovalRequest"));
    wire.wait_exit().await?;
    assert_eq!(state_json(&home)?["approval"]["yolo"], json!(false));

    let call = shell_call_line("tc-2", "true");
    let mut wire = start(&home, &[&call, "text: ran"], &[]).await?;
    let prompt = wire.start_prompt(json!("run it again")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    wire.send(&approval_answer(&request, "approve")).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    wire.wait_exit().await?;
    Ok(())
}

#[tokio::test]
async fn plan_mode_is_restored_on_resume() -> Result<()> {
    let home = TestHome::new()?;
    let mut wire = start(&home, &["text: planned"], &[]).await?;
    let id = wire.request("set_plan_mode", json!({"enabled": true})).await?;
    let (response, _) = wire.read_response(&id).await?;
    assert_eq!(response["result"]["plan_mode"], json!(true));
    let (response, _) = wire.prompt(json!("plan something")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    wire.wait_exit().await?;
    assert_eq!(state_json(&home)?["plan_mode"], json!(true));

    let mut wire = start(&home, &["text: still planning"], &[]).await?;
    let (response, messages) = wire.prompt(json!("go on")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let status = payloads(&messages, "StatusUpdate");
    ensure!(
        status.iter().any(|s| s["plan_mode"] == json!(true)),
        "{messages:#?}"
    );
    wire.wait_exit().await?;
    Ok(())
}
