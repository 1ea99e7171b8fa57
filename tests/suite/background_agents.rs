//! Subagents on a mock model: `Agent(model=…)` runs on that model, and `Agent(run_in_background=true)`
//! runs as a background task (`agent-…`) while the parent goes on; TaskOutput shows its transcript, its end is announced like any task's, its events stay off
//! the wire, and its approval requests reach the client even after the parent's turn has ended.
//!
//! The model is a mock server that answers by who is asking: a request whose first user message is the
//! subagent's task gets the subagent's answers, every other request the parent's.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply, message_text, tool_result};
use crate::common::{TestHome, WireProcess, approval_answer, payloads};

const SUBTASK: &str = "SUBTASK: look around and report";

/// A report long enough that no "more detail" turn follows.
fn report() -> String {
    format!("Report: {}", "everything in order. ".repeat(12))
}

/// Whether a request is the subagent's (its first user message is the task).
fn is_subagent(messages: &[Value]) -> bool {
    messages
        .iter()
        .find(|m| m["role"] == "user")
        .is_some_and(|m| message_text(m).contains(SUBTASK))
}

fn task_id_in(text: &str) -> Option<String> {
    text.lines()
        .find_map(|line| line.strip_prefix("task_id: "))
        .map(str::to_owned)
}

/// Waits (bounded) until the one subagent instance under `dir` is idle again: its run ended.
async fn wait_until_idle(dir: &std::path::Path) -> Result<()> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let idle = std::fs::read_dir(dir)?.flatten().any(|entry| {
            std::fs::read_to_string(entry.path().join("meta.json"))
                .ok()
                .and_then(|text| serde_json::from_str::<Value>(&text).ok())
                .is_some_and(|meta| meta["status"] == "idle")
        });
        if idle {
            return Ok(());
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the background agent never finished"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

fn background_agent_call() -> Reply {
    Reply::call(
        "tc-agent",
        "Agent",
        json!({"description": "look around", "prompt": SUBTASK, "run_in_background": true}),
    )
}

fn result_of<'a>(messages: &'a [Value], tool_call_id: &str) -> Result<&'a Value> {
    payloads(messages, "ToolResult")
        .into_iter()
        .find(|p| p["tool_call_id"] == tool_call_id)
        .map(|p| &p["return_value"])
        .with_context(|| format!("no ToolResult for {tool_call_id}"))
}

#[tokio::test]
async fn a_background_agent_reports_through_task_output_and_is_announced() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        if is_subagent(messages) {
            return Reply::Text(report());
        }
        match tool_result(messages, "tc-agent") {
            None => background_agent_call(),
            Some(started) if tool_result(messages, "tc-out").is_none() => Reply::call(
                "tc-out",
                "TaskOutput",
                json!({"task_id": task_id_in(&started).unwrap_or_default(), "block": true, "timeout": 30}),
            ),
            Some(_) => Reply::Text("parent done".into()),
        }
    })
    .await;
    let home = TestHome::new()?.with_config(&model.config(json!({})))?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("delegate it")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let started = result_of(&messages, "tc-agent")?;
    assert_eq!(started["is_error"], false, "{started}");
    assert_eq!(started["message"], "Background task started.");
    let text = started["output"].as_str().unwrap_or_default();
    let task_id = task_id_in(text).context("no task id")?;
    assert!(task_id.starts_with("agent-"), "{task_id}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[1..4],
        ["kind: agent", "status: starting", "description: look around"]
    );
    let agent_id = lines[4].strip_prefix("agent_id: ").context("no agent id")?;
    assert_eq!(
        lines[5..8],
        [
            "actual_subagent_type: coder",
            "automatic_notification: true",
            "next_step: You will be automatically notified when it completes."
        ]
    );
    assert_eq!(
        lines.last().copied(),
        Some(format!("resume_hint: Use Agent(resume=\"{agent_id}\", prompt=\"...\") to continue this instance later.").as_str())
    );

    // TaskOutput waited for the end and shows the transcript with the report.
    let output = result_of(&messages, "tc-out")?["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(output.contains("\nstatus: completed\n"), "{output}");
    assert!(output.contains("[stage] runner_started\n"), "{output}");
    assert!(output.contains(&format!("[summary]\n{}", report())), "{output}");

    // The subagent's own events stay off the wire; its end is announced to the client.
    assert!(payloads(&messages, "SubagentEvent").is_empty());
    let notes = payloads(&messages, "Notification");
    assert!(
        notes
            .iter()
            .any(|n| n["source_id"] == json!(task_id) && n["type"] == "task.completed"),
        "{notes:?}"
    );

    // Its instance is idle again, with its own wire.jsonl holding the turn.
    let session = home.session_dirs().pop().context("no session")?;
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(
        session.join("subagents").join(agent_id).join("meta.json"),
    )?)?;
    assert_eq!(meta["status"], "idle");
    let wire_log = std::fs::read_to_string(session.join("subagents").join(agent_id).join("wire.jsonl"))?;
    assert!(wire_log.contains("\"TurnBegin\""), "{wire_log}");
    // Its transcript is private, as every file of the share directory.
    use std::os::unix::fs::PermissionsExt as _;
    let transcript = session.join("subagents").join(agent_id).join("output");
    let mode = std::fs::metadata(&transcript)?.permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "{}", transcript.display());
    Ok(())
}

#[tokio::test]
async fn a_background_agents_approval_reaches_the_client_after_the_turn_ended() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        if is_subagent(messages) {
            return match tool_result(messages, "tc-touch") {
                None => Reply::call(
                    "tc-touch",
                    "Shell",
                    json!({"command": "touch made-in-background"}),
                ),
                Some(_) => Reply::Text(report()),
            };
        }
        match tool_result(messages, "tc-agent") {
            None => background_agent_call(),
            Some(_) => Reply::Text("started it".into()),
        }
    })
    .await;
    let home = TestHome::new()?.with_config(&model.config(json!({})))?;
    let mut wire = WireProcess::spawn(&home).await?;
    // A client that names itself gets approval details, from background agents too.
    wire.initialize(json!({"protocol_version": "1.10", "client": {"name": "my-editor"}}))
        .await?;
    let prompt = wire.start_prompt(json!("delegate it")).await?;

    // The request may come before or after the parent's turn ends; it names the task either way and
    // stays answerable after the turn.
    let is_approval = |m: &Value| m["method"] == "request" && m["params"]["type"] == "ApprovalRequest";
    let (response, seen) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let request = match seen.into_iter().find(|m| is_approval(m)) {
        Some(request) => request,
        None => wire.read_until(is_approval).await?.0,
    };
    let payload = &request["params"]["payload"];
    assert_eq!(payload["source_kind"], "background_agent", "{payload}");
    assert!(
        payload["source_id"]
            .as_str()
            .is_some_and(|id| id.starts_with("agent-")),
        "{payload}"
    );
    assert_eq!(payload["subagent_type"], "coder");
    assert_eq!(
        payload["description"],
        "Run command `touch made-in-background` (approve for session covers every \"run command\" request)"
    );
    // While it waits, its task says so.
    let session = home.session_dirs().pop().context("no session")?;
    let task = payload["source_id"].as_str().unwrap_or_default();
    let runtime: Value = serde_json::from_str(&std::fs::read_to_string(
        session.join("tasks").join(task).join("runtime.json"),
    )?)?;
    assert_eq!(runtime["status"], "awaiting_approval", "{runtime}");
    wire.send(&approval_answer(&request, "approve")).await?;
    wait_until_idle(&session.join("subagents")).await?;

    // The next turn hears that the task completed, and the command ran.
    let (response, messages) = wire.prompt(json!("and now?")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert!(home.work().join("made-in-background").exists());
    let announced = payloads(&messages, "Notification")
        .iter()
        .any(|n| n["type"] == "task.completed");
    let requests = model.requests().await;
    let told_model = requests.last().is_some_and(|last| {
        last.iter()
            .any(|m| message_text(m).contains("Background task completed: look around"))
    });
    assert!(announced || told_model, "{messages:?}");
    Ok(())
}

#[tokio::test]
async fn a_subagent_given_a_model_alias_runs_on_that_model() -> Result<()> {
    // Two servers: the session's model, and the one the `model` argument names.
    let main = MockModel::start(|_, messages| match tool_result(messages, "tc-agent") {
        None => Reply::call(
            "tc-agent",
            "Agent",
            json!({"description": "on other", "prompt": SUBTASK, "model": "other"}),
        ),
        Some(_) => Reply::Text("parent done".into()),
    })
    .await;
    let other = MockModel::start(|_, _| Reply::Text(report())).await;
    let mut config = main.config(json!({}));
    config["models"]["other"] =
        json!({"provider": "other", "model": "other-model", "max_context_size": 100000});
    config["providers"]["other"] = json!({
        "type": "openai_legacy", "base_url": format!("{}/v1", other.server.uri()), "api_key": "sk-other"
    });
    let home = TestHome::new()?.with_config(&config)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("delegate it")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let result = result_of(&messages, "tc-agent")?;
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["output"].as_str().is_some_and(|o| o.contains(&report())),
        "{result}"
    );
    // The subagent asked the other server, and only the parent asked the session's.
    let asked_other = other.requests().await;
    assert_eq!(asked_other.len(), 1);
    assert!(is_subagent(&asked_other[0]));
    assert!(main.requests().await.iter().all(|r| !is_subagent(r)));
    Ok(())
}

#[tokio::test]
async fn a_running_background_agent_is_stopped_when_the_session_ends() -> Result<()> {
    // Even with keep_alive_on_exit: an agent task runs inside the process and cannot outlive it.
    for keep_alive in [false, true] {
        let model = MockModel::start(|_, messages| {
            if is_subagent(messages) {
                return Reply::call("tc-slow", "Shell", json!({"command": "touch started; sleep 30"}));
            }
            match tool_result(messages, "tc-agent") {
                None => background_agent_call(),
                Some(_) => Reply::Text("started it".into()),
            }
        })
        .await;
        let config = model.config(json!({"background": {"keep_alive_on_exit": keep_alive}}));
        let home = TestHome::new()?.with_config(&config)?.arg("--yolo");
        let mut wire = WireProcess::spawn(&home).await?;
        wire.initialize(json!({"protocol_version": "1.10"})).await?;
        let (response, messages) = wire.prompt(json!("delegate it")).await?;
        assert_eq!(response["result"], json!({"status": "finished"}));
        let started = result_of(&messages, "tc-agent")?["output"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let task = task_id_in(&started).context("no task id")?;
        // Wait (bounded) until the subagent's command runs, then end the session.
        let marker = home.work().join("started");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !marker.exists() {
            anyhow::ensure!(
                std::time::Instant::now() < deadline,
                "the subagent never ran its command"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let status = wire.wait_exit().await?;
        assert_eq!(status.code(), Some(0), "keep_alive {keep_alive}");
        let session = home.session_dirs().pop().context("no session")?;
        let runtime: Value = serde_json::from_str(&std::fs::read_to_string(
            session.join("tasks").join(&task).join("runtime.json"),
        )?)?;
        assert_eq!(
            (&runtime["status"], &runtime["failure_reason"]),
            (&json!("killed"), &json!("CLI session ended")),
            "keep_alive {keep_alive}: {runtime}"
        );
    }
    Ok(())
}
