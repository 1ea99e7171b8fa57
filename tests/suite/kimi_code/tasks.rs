//! seeds/002 "后台任务": TaskList, TaskOutput and TaskStop over tasks started by `Bash`, with seeds/002's
//! fields and retrieval statuses (`success` / `timeout` / `not_ready`, `status: timed_out`,
//! `stop_reason`, `terminal_reason: stopped`), TaskStop asking first and harmless on an ended task.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{kimi_code, turn};
use crate::common::TestHome;
use crate::common::mock_model::{MockModel, Reply, tool_result};

/// The task id a `Bash` call with `run_in_background` reported.
fn task_id(messages: &[Value], call: &str) -> String {
    tool_result(messages, call)
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("task_id: ").map(str::to_owned))
        })
        .unwrap_or_default()
}

/// `key: value` of a record's line, if the text has it.
fn field<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines().find_map(|l| l.strip_prefix(&format!("{key}: ")))
}

#[tokio::test]
async fn task_tools_report_seeds_records_statuses_and_stop_reasons() -> Result<()> {
    let mock = MockModel::start(|n, messages| {
        let (nap, short) = (task_id(messages, "b-1"), task_id(messages, "b-2"));
        match n {
            0 => Reply::Calls(vec![
                ("b-1".into(), "Bash".into(),
                 json!({"command": "echo hi; sleep 30", "run_in_background": true, "description": "nap"})),
                ("b-2".into(), "Bash".into(),
                 json!({"command": "sleep 30", "run_in_background": true, "description": "short", "timeout": 1000})),
            ]),
            1 => Reply::Calls(vec![
                ("o-1".into(), "TaskOutput".into(), json!({"task_id": short, "block": true, "timeout": 20})),
                ("o-2".into(), "TaskOutput".into(), json!({"task_id": nap})),
                ("o-3".into(), "TaskOutput".into(), json!({"task_id": "bash-zzzzzzzz"})),
                // Waited for, and still running when the wait ends.
                ("o-5".into(), "TaskOutput".into(), json!({"task_id": nap, "block": true, "timeout": 0})),
                ("o-6".into(), "TaskOutput".into(), json!({"task_id": nap, "timeout": 3601})),
                ("l-2".into(), "TaskList".into(), json!({"limit": 101})),
            ]),
            // The list runs before the stop (which waits for the calls before it).
            2 => Reply::Calls(vec![
                ("l-1".into(), "TaskList".into(), json!({})),
                ("s-1".into(), "TaskStop".into(), json!({"task_id": nap})),
            ]),
            3 => Reply::Calls(vec![
                ("o-4".into(), "TaskOutput".into(), json!({"task_id": nap})),
                ("s-2".into(), "TaskStop".into(), json!({"task_id": short, "reason": "again"})),
                ("l-3".into(), "TaskList".into(), json!({"active_only": false})),
            ]),
            _ => Reply::Text("done".into()),
        }
    })
    .await;
    let home = TestHome::new()?.with_config(&mock.config(json!({})))?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "tasks").await?;
    let requests = mock.requests().await;
    let (nap, short) = (task_id(&requests[1], "b-1"), task_id(&requests[1], "b-2"));
    assert!(
        nap.starts_with("bash-") && short.starts_with("bash-"),
        "{nap} {short}"
    );
    // Starting and stopping ask; listing and reading do not.
    assert_eq!(
        turn.actions(),
        [
            "run background command",
            "run background command",
            "stop background task",
            "stop background task"
        ]
    );

    // A task past its time limit: waited for, then `timed_out`.
    let timed_out = turn.output("o-1")?;
    assert_eq!(
        field(&timed_out, "retrieval_status"),
        Some("success"),
        "{timed_out}"
    );
    assert_eq!(field(&timed_out, "status"), Some("timed_out"), "{timed_out}");
    assert_eq!(
        field(&timed_out, "terminal_reason"),
        Some("timed_out"),
        "{timed_out}"
    );
    assert_eq!(field(&timed_out, "timeout_s"), Some("1"), "{timed_out}");
    // Still running, not waited for.
    let running = turn.output("o-2")?;
    assert_eq!(
        field(&running, "retrieval_status"),
        Some("not_ready"),
        "{running}"
    );
    assert_eq!(field(&running, "status"), Some("running"), "{running}");
    assert_eq!(field(&running, "kind"), Some("bash"));
    assert_eq!(field(&running, "command"), Some("echo hi; sleep 30"));
    assert!(
        field(&running, "pid").is_some_and(|p| p.parse::<u32>().is_ok()),
        "{running}"
    );
    assert!(field(&running, "output_path").is_some(), "{running}");
    assert_eq!(turn.message("o-2")?, "Task snapshot retrieved.");
    // Waited for until the wait's end, still running: `timeout`.
    let waited = turn.output("o-5")?;
    assert_eq!(field(&waited, "retrieval_status"), Some("timeout"), "{waited}");
    assert_eq!(field(&waited, "status"), Some("running"), "{waited}");
    assert_eq!(
        turn.message("o-6")?,
        "Error validating JSON arguments: 1 validation error for TaskOutputParams\ntimeout\n  Input should be \
         less than or equal to 3600"
    );
    // Active tasks only, by default: the one still running (the other timed out in the step before).
    let listed = turn.output("l-1")?;
    assert!(
        listed.starts_with("active_background_tasks: 1\ntask_id: "),
        "{listed}"
    );
    assert_eq!(field(&listed, "task_id"), Some(nap.as_str()));
    assert_eq!(turn.message("o-3")?, "Task not found: bash-zzzzzzzz");
    assert_eq!(
        turn.message("l-2")?,
        "Error validating JSON arguments: 1 validation error for TaskListParams\nlimit\n  Input should be less \
         than or equal to 100"
    );

    let stopped = turn.output("s-1")?;
    assert_eq!(
        (
            field(&stopped, "task_id"),
            field(&stopped, "status"),
            field(&stopped, "reason")
        ),
        (Some(nap.as_str()), Some("killed"), Some("Stopped by TaskStop"))
    );
    let after = turn.output("o-4")?;
    assert_eq!(
        field(&after, "stop_reason"),
        Some("Stopped by TaskStop"),
        "{after}"
    );
    assert_eq!(field(&after, "terminal_reason"), Some("stopped"), "{after}");
    assert_eq!(field(&after, "full_output_tool"), Some("Read"), "{after}");
    assert!(after.ends_with("[output]\nhi"), "{after}");
    // Stopping a task that already ended is no error: its state comes back.
    assert_eq!(turn.result("s-2")?["is_error"], json!(false));
    assert_eq!(field(&turn.output("s-2")?, "status"), Some("timed_out"));
    let all = turn.output("l-3")?;
    assert!(all.starts_with("background_tasks: 2\n"), "{all}");
    assert_eq!(all.matches("\n---\n").count(), 1, "{all}");
    let _ = tool_result(&requests[1], "b-1").context("the model saw the start")?;
    Ok(())
}
