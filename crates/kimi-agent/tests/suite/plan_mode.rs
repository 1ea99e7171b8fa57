//! Plan mode as the approval layer enforces it: writes go only to the plan file.

use anyhow::Result;
use pretty_assertions::assert_eq;
use serde_json::json;

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
