//! Background tasks from outside: `Shell(run_in_background)`, TaskList / TaskOutput / TaskStop, the
//! completion notification reaching the model's next request and the client, the running-task limit,
//! and what happens to tasks when the agent exits. The model is a mock server whose next answer can
//! use the task id a tool just returned.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply, message_text, tool_result};
use crate::common::{READ_TIMEOUT, TestHome, WireProcess, approval_answer, payloads};

async fn spawn_initialized(home: &TestHome) -> Result<WireProcess> {
    let mut wire = WireProcess::spawn(home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    Ok(wire)
}

/// The `task_id:` a tool's output reports.
pub(super) fn task_id_in(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("task_id: "))
        .map(str::to_owned)
}

/// The task id the tool call `tool_call_id` reported to the model ("" when absent: the next call then
/// fails visibly).
pub(super) fn reported_task(messages: &[Value], tool_call_id: &str) -> String {
    tool_result(messages, tool_call_id)
        .as_deref()
        .and_then(task_id_in)
        .unwrap_or_default()
}

pub(super) fn background_shell(id: &str, command: &str, description: &str) -> Reply {
    Reply::call(
        id,
        "Shell",
        json!({"command": command, "run_in_background": true, "description": description}),
    )
}

fn result_of<'a>(messages: &'a [Value], tool_call_id: &str) -> Result<&'a Value> {
    payloads(messages, "ToolResult")
        .into_iter()
        .find(|r| r["tool_call_id"] == tool_call_id)
        .map(|r| &r["return_value"])
        .ok_or_else(|| anyhow!("no ToolResult for {tool_call_id}"))
}

pub(super) fn output_of(messages: &[Value], tool_call_id: &str) -> Result<String> {
    result_of(messages, tool_call_id)?["output"]
        .as_str()
        .map(str::to_owned)
        .context("text output expected")
}

fn only_session(home: &TestHome) -> Result<PathBuf> {
    match home.session_dirs().as_slice() {
        [dir] => Ok(dir.clone()),
        dirs => bail!("expected one session, found {dirs:?}"),
    }
}

pub(super) fn runtime(session: &Path, task_id: &str) -> Result<Value> {
    let path = session.join("tasks").join(task_id).join("runtime.json");
    let text = std::fs::read_to_string(&path).with_context(|| path.display().to_string())?;
    Ok(serde_json::from_str(&text)?)
}

/// Waits (bounded) until the task's `runtime.json` shows `status`: the file is the only outside view
/// of a task finishing between turns.
pub(super) async fn wait_for_status(session: &Path, task_id: &str, status: &str) -> Result<Value> {
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    loop {
        let current = runtime(session, task_id)?;
        if current["status"] == status {
            return Ok(current);
        }
        if tokio::time::Instant::now() > deadline {
            bail!("task {task_id} never reached {status}: {current}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Whether any live (non-zombie) process is in group `pgid`, read from /proc independently of the agent.
fn group_alive(pgid: i64) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        let Some((_, fields)) = stat.rsplit_once(')') else {
            return false;
        };
        let fields: Vec<&str> = fields.split_whitespace().collect();
        // Fields after the name: state, ppid, pgrp.
        fields.first().is_some_and(|state| *state != "Z") && fields.get(2) == Some(&pgid.to_string().as_str())
    })
}

/// Waits (bounded) for group `pgid` to disappear: a SIGKILL lands asynchronously.
async fn group_gone_soon(pgid: i64) -> bool {
    for _ in 0..300 {
        if !group_alive(pgid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

fn pgid_of(session: &Path, task_id: &str) -> Result<i64> {
    runtime(session, task_id)?["child_pgid"]
        .as_i64()
        .context("runtime.json has no child_pgid")
}

/// The notification messages (user messages opening with `<notification `) of one model request.
pub(super) fn notification_messages(request: &[Value]) -> Vec<String> {
    request
        .iter()
        .filter(|m| m["role"] == "user")
        .map(message_text)
        .filter(|text| text.starts_with("<notification "))
        .collect()
}

fn index_of(messages: &[Value], pred: impl Fn(&Value) -> bool) -> Option<usize> {
    messages.iter().position(pred)
}

fn is_event(message: &Value, kind: &str) -> bool {
    message["method"] == "event" && message["params"]["type"] == kind
}

#[tokio::test]
async fn a_background_shell_is_listed_awaited_and_announced_at_the_next_step() -> Result<()> {
    let model = MockModel::start(|n, messages| match n {
        0 => background_shell("tc-bg", "echo started; sleep 1; echo finished", "bg job"),
        1 => {
            let id = reported_task(messages, "tc-bg");
            Reply::Calls(vec![
                ("tc-list".into(), "TaskList".into(), json!({})),
                (
                    "tc-out".into(),
                    "TaskOutput".into(),
                    json!({"task_id": id, "block": true, "timeout": 20}),
                ),
            ])
        }
        _ => Reply::Text("all done".into()),
    })
    .await;
    let home = TestHome::new()?
        .with_config(&model.config(json!({})))?
        .arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("run it in the background")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let started = result_of(&messages, "tc-bg")?;
    let id = task_id_in(started["output"].as_str().unwrap_or("")).context("no task id")?;
    assert!(id.starts_with("bash-") && id.len() == 13, "{id}");
    assert_eq!(started["is_error"], false);
    assert_eq!(started["message"], "Background task started.");
    assert_eq!(
        started["display"],
        json!([
            {"type": "brief", "text": format!("Started {id}")},
            {"type": "background_task", "task_id": id, "kind": "bash", "status": "running", "description": "bg job"}
        ])
    );
    let started_text = started["output"].as_str().unwrap_or("");
    assert!(
        started_text.starts_with(&format!(
            "task_id: {id}\nkind: bash\nstatus: running\ndescription: bg job\n\
             command: echo started; sleep 1; echo finished\nautomatic_notification: true\n"
        )),
        "{started_text}"
    );

    let listed = output_of(&messages, "tc-list")?;
    assert_eq!(
        listed,
        format!(
            "active_background_tasks: 1\n\n[1]\ntask_id: {id}\nkind: bash\nstatus: running\n\
             description: bg job\ncommand: echo started; sleep 1; echo finished"
        )
    );
    let output = output_of(&messages, "tc-out")?;
    assert!(output.starts_with("retrieval_status: success\n"), "{output}");
    assert!(output.contains("\nstatus: completed\n"), "{output}");
    assert!(output.contains("\nexit_code: 0\n"), "{output}");
    assert!(output.ends_with("\n[output]\nstarted\nfinished"), "{output}");

    // The client hears of the end once, at the start of the next step.
    let notifications = payloads(&messages, "Notification");
    assert_eq!(notifications.len(), 1, "{notifications:?}");
    let notification = notifications[0];
    assert_eq!(
        (
            &notification["category"],
            &notification["type"],
            &notification["source_kind"],
            &notification["source_id"],
            &notification["severity"],
            &notification["title"],
        ),
        (
            &json!("task"),
            &json!("task.completed"),
            &json!("background_task"),
            &json!(id),
            &json!("success"),
            &json!("Background task completed: bg job"),
        )
    );
    assert_eq!(notification["payload"]["exit_code"], 0);
    assert_eq!(notification["payload"]["task_kind"], "bash");
    let step3 = index_of(&messages, |m| {
        is_event(m, "StepBegin") && m["params"]["payload"]["n"] == 3
    })
    .context("no third step")?;
    let event = index_of(&messages, |m| is_event(m, "Notification")).context("no Notification")?;
    let turn_end = index_of(&messages, |m| is_event(m, "TurnEnd")).context("no TurnEnd")?;
    assert!(step3 < event && event < turn_end, "{step3} {event} {turn_end}");

    // The model hears of it in the request of that step, and not before.
    let requests = model.requests().await;
    assert_eq!(requests.len(), 3);
    assert_eq!(notification_messages(&requests[1]), Vec::<String>::new());
    let told = notification_messages(&requests[2]);
    assert_eq!(told.len(), 1, "{told:?}");
    let text = &told[0];
    let nid = notification["id"].as_str().unwrap_or("");
    assert!(
        text.starts_with(&format!(
            "<notification id=\"{nid}\" category=\"task\" type=\"task.completed\" \
             source_kind=\"background_task\" source_id=\"{id}\">\nTitle: Background task completed: bg job\n\
             Severity: success\nTask ID: {id}\nStatus: completed (Completed at: "
        )),
        "{text}"
    );
    assert!(
        text.ends_with(&format!(
            "<task-notification>\nTask ID: {id}\nTask Type: bash\nDescription: bg job\nStatus: completed\n\
             Exit code: 0\nOutput tail:\nstarted\nfinished\n</task-notification>\n</notification>"
        )),
        "{text}"
    );

    // The files are the reference's.
    wire.wait_exit().await?;
    let session = only_session(&home)?;
    let task_dir = session.join("tasks").join(&id);
    for file in [
        "spec.json",
        "runtime.json",
        "control.json",
        "consumer.json",
        "output.log",
    ] {
        assert!(task_dir.join(file).is_file(), "{file} missing");
    }
    let spec: Value = serde_json::from_str(&std::fs::read_to_string(task_dir.join("spec.json"))?)?;
    assert_eq!(
        (
            &spec["kind"],
            &spec["description"],
            &spec["tool_call_id"],
            &spec["timeout_s"]
        ),
        (&json!("bash"), &json!("bg job"), &json!("tc-bg"), &json!(60))
    );
    assert_eq!(
        std::fs::read_to_string(task_dir.join("output.log"))?,
        "started\nfinished\n"
    );
    let delivery: Value = serde_json::from_str(&std::fs::read_to_string(
        session.join("notifications").join(nid).join("delivery.json"),
    )?)?;
    assert_eq!(delivery["sinks"]["llm"]["status"], "acked");
    assert_eq!(delivery["sinks"]["wire"]["status"], "acked");
    assert_eq!(delivery["sinks"]["shell"]["status"], "pending");
    Ok(())
}

#[tokio::test]
async fn task_stop_asks_first_and_really_ends_the_process() -> Result<()> {
    let model = MockModel::start(|n, messages| match n {
        0 => background_shell("tc-bg", "sleep 60", "sleeper"),
        1 => Reply::call(
            "tc-stop",
            "TaskStop",
            json!({"task_id": reported_task(messages, "tc-bg"), "reason": "not needed"}),
        ),
        _ => Reply::Text("stopped".into()),
    })
    .await;
    let home = TestHome::new()?.with_config(&model.config(json!({})))?;
    let mut wire = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("sleep, then stop")).await?;
    let start = wire.wait_request("ApprovalRequest").await?;
    assert_eq!(start["params"]["payload"]["action"], "run background command");
    assert_eq!(
        start["params"]["payload"]["description"],
        "Run background command `sleep 60`"
    );
    wire.send(&approval_answer(&start, "approve")).await?;
    let stop = wire.wait_request("ApprovalRequest").await?;
    let id = stop["params"]["payload"]["display"][0]["task_id"]
        .as_str()
        .context("no task in the stop request")?
        .to_owned();
    assert_eq!(stop["params"]["payload"]["action"], "stop background task");
    assert_eq!(
        stop["params"]["payload"]["description"],
        format!("Stop background task `{id}`")
    );
    assert_eq!(
        stop["params"]["payload"]["display"],
        json!([{"type": "background_task", "task_id": id, "kind": "bash", "status": "running", "description": "sleeper"}])
    );
    let session = only_session(&home)?;
    let pgid = pgid_of(&session, &id)?;
    assert!(group_alive(pgid));
    wire.send(&approval_answer(&stop, "approve")).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let stopped = result_of(&messages, "tc-stop")?;
    assert_eq!(stopped["message"], "Task stop requested.");
    assert_eq!(
        stopped["output"],
        format!(
            "task_id: {id}\nkind: bash\nstatus: killed\ndescription: sleeper\ncommand: sleep 60\n\
             exit_code: -15\nreason: not needed"
        )
    );
    assert!(group_gone_soon(pgid).await, "group {pgid} survived TaskStop");
    let notifications = payloads(&messages, "Notification");
    assert_eq!(notifications.len(), 1);
    assert_eq!(notifications[0]["type"], "task.killed");
    assert_eq!(notifications[0]["title"], "Background task stopped: sleeper");
    let record = runtime(&session, &id)?;
    assert_eq!(
        (
            &record["status"],
            &record["interrupted"],
            &record["failure_reason"]
        ),
        (&json!("killed"), &json!(true), &json!("not needed"))
    );
    Ok(())
}

#[tokio::test]
async fn task_stop_is_refused_in_plan_mode() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::call("tc-stop", "TaskStop", json!({"task_id": "bash-12345678"})),
        _ => Reply::Text("ok".into()),
    })
    .await;
    let home = TestHome::new()?
        .with_config(&model.config(json!({})))?
        .arg("--plan");
    let mut wire = spawn_initialized(&home).await?;
    let (_, messages) = wire.prompt(json!("stop it")).await?;
    assert_eq!(
        result_of(&messages, "tc-stop")?,
        &json!({"is_error": true, "output": "", "message": "TaskStop is not available in plan mode.",
                "display": [{"type": "brief", "text": "Blocked in plan mode"}], "extras": null})
    );
    Ok(())
}

#[tokio::test]
async fn tasks_beyond_max_running_tasks_are_refused() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => background_shell("tc-1", "sleep 60", "first"),
        1 => background_shell("tc-2", "true", "second"),
        _ => Reply::Text("done".into()),
    })
    .await;
    let config = model.config(json!({"background": {"max_running_tasks": 1}}));
    let home = TestHome::new()?.with_config(&config)?.arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let (_, messages) = wire.prompt(json!("two tasks")).await?;
    assert_eq!(result_of(&messages, "tc-1")?["is_error"], false);
    assert_eq!(
        result_of(&messages, "tc-2")?,
        &json!({"is_error": true, "output": "",
                "message": "Failed to start background task: Too many background tasks are already running.",
                "display": [{"type": "brief", "text": "Start failed"}], "extras": null})
    );
    let tasks = crate::common::dir_names(&only_session(&home)?.join("tasks"))?;
    assert_eq!(tasks.len(), 1, "{tasks:?}");
    Ok(())
}

/// Starts `sleep 60` as a background task in a finished turn; returns the process, the session and
/// the task.
async fn session_with_a_sleeper(home: &TestHome) -> Result<(WireProcess, PathBuf, String)> {
    let mut wire = spawn_initialized(home).await?;
    let (_, messages) = wire.prompt(json!("start a sleeper")).await?;
    let id = task_id_in(&output_of(&messages, "tc-bg")?).context("no task id")?;
    let session = only_session(home)?;
    Ok((wire, session, id))
}

async fn sleeper_model() -> MockModel {
    MockModel::start(|n, _| match n {
        0 => background_shell("tc-bg", "sleep 60", "sleeper"),
        _ => Reply::Text("started".into()),
    })
    .await
}

#[tokio::test]
async fn no_task_outlives_eof_or_sigterm() -> Result<()> {
    for signal in [None, Some("-TERM")] {
        let model = sleeper_model().await;
        let home = TestHome::new()?
            .with_config(&model.config(json!({})))?
            .arg("--yolo");
        let (mut wire, session, id) = session_with_a_sleeper(&home).await?;
        let pgid = pgid_of(&session, &id)?;
        assert!(group_alive(pgid));
        if let Some(signal) = signal {
            let pid = wire.child.id().context("agent pid")?;
            std::process::Command::new("kill")
                .args([signal, &pid.to_string()])
                .status()?;
        }
        let status = wire.wait_exit().await?;
        assert_eq!(status.code(), Some(0), "{signal:?}");
        assert!(
            group_gone_soon(pgid).await,
            "the task outlived the agent ({signal:?})"
        );
        let record = runtime(&session, &id)?;
        assert_eq!(
            (&record["status"], &record["failure_reason"]),
            (&json!("killed"), &json!("CLI session ended")),
            "{signal:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn no_task_outlives_a_sigkilled_agent() -> Result<()> {
    // No chance to clean up: the process guardian kills the task's group when our pipe to it closes.
    let model = sleeper_model().await;
    let home = TestHome::new()?
        .with_config(&model.config(json!({})))?
        .arg("--yolo");
    let (mut wire, session, id) = session_with_a_sleeper(&home).await?;
    let pgid = pgid_of(&session, &id)?;
    assert!(group_alive(pgid));
    wire.child.kill().await?;
    assert!(group_gone_soon(pgid).await, "the task outlived a SIGKILLed agent");
    Ok(())
}

#[tokio::test]
async fn keep_alive_on_exit_leaves_the_task_to_the_next_agent() -> Result<()> {
    let model = sleeper_model().await;
    let config = model.config(json!({"background": {"keep_alive_on_exit": true}}));
    let home = TestHome::new()?.with_config(&config)?.arg("--yolo");
    let (mut wire, session, id) = session_with_a_sleeper(&home).await?;
    let pgid = pgid_of(&session, &id)?;
    wire.wait_exit().await?;
    assert!(group_alive(pgid), "a kept-alive task was stopped");
    assert_eq!(runtime(&session, &id)?["status"], "running");

    // The next agent on the session adopts the task and can stop it.
    let task = id.clone();
    let second = MockModel::start(move |n, _| match n {
        0 => Reply::call("tc-stop", "TaskStop", json!({"task_id": task})),
        _ => Reply::Text("stopped".into()),
    })
    .await;
    let session_id = session
        .file_name()
        .and_then(|n| n.to_str())
        .context("session id")?
        .to_owned();
    let home = home.with_config(&second.config(json!({})))?;
    let mut args = home.args();
    args.extend(["--session".to_owned(), session_id]);
    let mut wire = WireProcess::spawn_with(&home, args).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (_, messages) = wire.prompt(json!("stop the sleeper")).await?;
    let stopped = output_of(&messages, "tc-stop")?;
    assert!(stopped.contains("\nstatus: killed\n"), "{stopped}");
    assert!(group_gone_soon(pgid).await, "the adopted task survived TaskStop");
    wire.wait_exit().await?;
    Ok(())
}

#[tokio::test]
async fn a_cancelled_turn_leaves_the_task_running_and_the_next_turn_hears_of_it() -> Result<()> {
    let model = MockModel::start(|n, messages| match n {
        0 => background_shell(
            "tc-bg",
            "while [ ! -e go ]; do sleep 0.05; done; echo late",
            "waits for go",
        ),
        1 => Reply::call("tc-fg", "Shell", json!({"command": "sleep 30"})),
        _ => {
            let told = notification_messages(messages).len();
            Reply::Text(format!("notifications seen: {told}"))
        }
    })
    .await;
    let home = TestHome::new()?
        .with_config(&model.config(json!({})))?
        .arg("--yolo");
    let mut wire = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("start, then hang")).await?;
    let started = wire.wait_event("ToolResult").await?;
    let id = task_id_in(
        started["params"]["payload"]["return_value"]["output"]
            .as_str()
            .unwrap_or(""),
    )
    .context("no task id")?;
    let (_, mut first_turn) = wire
        .read_until(|m| is_event(m, "ToolCall") && m["params"]["payload"]["id"] == "tc-fg")
        .await?;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    let (response, rest) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "cancelled"}));
    first_turn.extend(rest);
    assert!(payloads(&first_turn, "Notification").is_empty());

    let session = only_session(&home)?;
    assert_eq!(runtime(&session, &id)?["status"], "running");
    std::fs::write(home.work().join("go"), "")?;
    wait_for_status(&session, &id, "completed").await?;

    let (response, second_turn) = wire.prompt(json!("anything new?")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let notifications = payloads(&second_turn, "Notification");
    assert_eq!(notifications.len(), 1);
    assert_eq!(notifications[0]["source_id"], json!(id));
    let requests = model.requests().await;
    let last = requests.last().context("no request")?;
    let told = notification_messages(last);
    assert_eq!(told.len(), 1);
    assert!(told[0].contains("Output tail:\nlate\n"), "{}", told[0]);
    // After the user's message of this turn, as the reference appends it at the step's start.
    let user_texts: Vec<String> = last
        .iter()
        .filter(|m| m["role"] == "user")
        .map(message_text)
        .collect();
    assert_eq!(user_texts.last(), Some(&told[0]));
    assert_eq!(
        user_texts
            .get(user_texts.len().wrapping_sub(2))
            .map(String::as_str),
        Some("anything new?")
    );
    Ok(())
}
