//! The `Agent` tool: subagents run their own loop, their events reach the client wrapped in
//! `SubagentEvent`s, their approvals name them, and their files live under `subagents/<id>/`.
//! The scripted provider serves one script per model call, parent and subagents alike.

use anyhow::{Context, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, approval_answer, payloads, tool_call_line};

fn agent_call(id: &str, args: Value) -> String {
    tool_call_line(id, "Agent", Some(&args.to_string()))
}

/// A report long enough that no second "more detail" turn is asked for.
fn long_report() -> String {
    format!(
        "text: {}",
        "The module parses the config and validates it. "
            .repeat(6)
            .trim_end()
    )
}

fn session_dir(home: &TestHome) -> Result<std::path::PathBuf> {
    home.session_dirs().into_iter().next().context("no session dir")
}

#[tokio::test]
async fn a_subagent_runs_its_own_turn_and_reports_back() -> Result<()> {
    let report = long_report();
    let call = agent_call(
        "tc-a",
        json!({"description": "read config", "prompt": "Explain the config", "subagent_type": "explore"}),
    );
    let home = TestHome::new()?.scripted(&[call.as_str(), report.as_str(), "text: all done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, events) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"]["status"], json!("finished"));

    let wrapped = payloads(&events, "SubagentEvent");
    let agent_id = wrapped[0]["agent_id"].as_str().context("no agent_id")?.to_owned();
    assert!(agent_id.starts_with('a') && agent_id.len() == 9, "{agent_id}");
    for event in &wrapped {
        assert_eq!(
            (
                event["parent_tool_call_id"].clone(),
                event["agent_id"].clone(),
                event["subagent_type"].clone()
            ),
            (json!("tc-a"), json!(agent_id), json!("explore"))
        );
    }
    let inner: Vec<&str> = wrapped
        .iter()
        .filter_map(|e| e["event"]["type"].as_str())
        .collect();
    assert_eq!(inner.first(), Some(&"TurnBegin"));
    assert_eq!(inner.last(), Some(&"TurnEnd"));
    assert!(
        inner.contains(&"StepBegin") && inner.contains(&"ContentPart"),
        "{inner:?}"
    );
    assert_eq!(
        wrapped[0]["event"]["payload"]["user_input"],
        json!("Explain the config")
    );

    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    let text = report.trim_start_matches("text: ");
    assert_eq!(
        result["output"],
        json!(format!(
            "agent_id: {agent_id}\nresumed: false\nactual_subagent_type: explore\nstatus: completed\n\n[summary]\n{text}"
        ))
    );
    // The parent's next step saw the report and finished the turn.
    let texts: Vec<&Value> = payloads(&events, "ContentPart")
        .into_iter()
        .map(|p| &p["text"])
        .collect();
    assert_eq!(texts.last(), Some(&&json!("all done")));

    // Files: the instance record, and the subagent's own unwrapped wire.jsonl and context.
    let dir = session_dir(&home)?.join("subagents").join(&agent_id);
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("meta.json"))?)?;
    assert_eq!(
        (
            meta["status"].clone(),
            meta["subagent_type"].clone(),
            meta["description"].clone()
        ),
        (json!("idle"), json!("explore"), json!("read config"))
    );
    let own_wire = std::fs::read_to_string(dir.join("wire.jsonl"))?;
    assert!(
        own_wire.contains(r#""type":"TurnBegin""#) && !own_wire.contains("SubagentEvent"),
        "{own_wire}"
    );
    let context = std::fs::read_to_string(dir.join("context.jsonl"))?;
    assert!(context.contains("Explain the config"), "{context}");
    // The parent's wire.jsonl has the wrapped events.
    let root_wire = std::fs::read_to_string(session_dir(&home)?.join("wire.jsonl"))?;
    assert!(root_wire.contains(r#""type":"SubagentEvent""#));
    Ok(())
}

#[tokio::test]
async fn a_short_report_gets_one_request_for_more_detail() -> Result<()> {
    let report = long_report();
    let call = agent_call("tc-a", json!({"description": "d", "prompt": "p"}));
    let home =
        TestHome::new()?.scripted(&[call.as_str(), "text: too short", report.as_str(), "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let (_, events) = wire.prompt(json!("go")).await?;
    let turns = payloads(&events, "SubagentEvent")
        .into_iter()
        .filter(|e| e["event"]["type"] == "TurnBegin")
        .count();
    assert_eq!(turns, 2);
    let output = payloads(&events, "ToolResult")[0]["return_value"]["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(output.ends_with(report.trim_start_matches("text: ")), "{output}");
    assert!(output.contains("actual_subagent_type: coder"), "{output}");
    Ok(())
}

#[tokio::test]
async fn a_subagents_approval_request_names_it() -> Result<()> {
    let report = long_report();
    let call = agent_call(
        "tc-a",
        json!({"description": "d", "prompt": "touch a file", "subagent_type": "coder"}),
    );
    let shell = tool_call_line(
        "tc-s",
        "Shell",
        Some(&json!({"command": "touch made-by-subagent"}).to_string()),
    );
    let home = TestHome::new()?.scripted(&[call.as_str(), shell.as_str(), report.as_str(), "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    // A client that names itself gets approval details, from subagents too.
    wire.initialize(json!({"protocol_version": "1.10", "client": {"name": "my-editor"}}))
        .await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    let payload = &request["params"]["payload"];
    assert_eq!(payload["subagent_type"], json!("coder"));
    assert_eq!(
        payload["description"],
        "Run command `touch made-by-subagent` (approve for session covers every \"run command\" request)"
    );
    assert!(
        payload["agent_id"].as_str().is_some_and(|id| id.starts_with('a')),
        "{payload}"
    );
    assert_eq!(payload["tool_call_id"], json!("tc-s"));
    wire.send(&approval_answer(&request, "approve")).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));
    assert!(home.work().join("made-by-subagent").exists());
    Ok(())
}

#[tokio::test]
async fn subagents_cannot_start_subagents_and_bad_arguments_are_tool_errors() -> Result<()> {
    let report = long_report();
    let nested = agent_call("tc-n", json!({"description": "d", "prompt": "p"}));
    let home = TestHome::new()?.scripted(&[
        agent_call(
            "tc-1",
            json!({"description": "d", "prompt": "p", "subagent_type": "nope"}),
        )
        .as_str(),
        agent_call(
            "tc-2",
            json!({"description": "d", "prompt": "p", "resume": "a00000000"}),
        )
        .as_str(),
        agent_call("tc-3", json!({"description": "d", "prompt": "p", "timeout": 5})).as_str(),
        agent_call("tc-4", json!({"description": "d", "prompt": "p"})).as_str(),
        nested.as_str(),
        report.as_str(),
        "text: done",
    ])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let (_, events) = wire.prompt(json!("go")).await?;
    let results = payloads(&events, "ToolResult");
    let message = |i: usize| results[i]["return_value"]["message"].clone();
    assert_eq!(
        message(0),
        json!("Failed to run agent: 'Builtin subagent type not found: nope'")
    );
    assert_eq!(
        message(1),
        json!("Failed to run agent: Subagent instance not found: a00000000")
    );
    assert!(
        message(2)
            .as_str()
            .unwrap_or_default()
            .contains("Input should be greater than or equal to 30")
    );
    // Inside the subagent, `Agent` is not a tool at all.
    let nested_result = payloads(&events, "SubagentEvent")
        .into_iter()
        .find(|e| e["event"]["type"] == "ToolResult")
        .context("no nested result")?;
    assert_eq!(
        nested_result["event"]["payload"]["return_value"]["message"],
        json!("Tool `Agent` not found")
    );
    Ok(())
}

#[tokio::test]
async fn cancelling_the_parent_turn_stops_the_subagent() -> Result<()> {
    let call = agent_call("tc-a", json!({"description": "d", "prompt": "p"}));
    let shell = tool_call_line("tc-s", "Shell", Some(&json!({"command": "sleep 60"}).to_string()));
    let home = TestHome::new()?
        .scripted(&[call.as_str(), shell.as_str()])?
        .arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    // Wait until the subagent's Shell call is under way.
    wire.read_until(|m| m["params"]["payload"]["event"]["type"] == "ToolCall")
        .await?;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("cancelled"));
    wire.assert_alive().await?;
    // The instance is marked killed, so it can be resumed later.
    let instances = session_dir(&home)?.join("subagents");
    let instance = std::fs::read_dir(&instances)?
        .next()
        .context("no instance")??
        .path();
    let meta: Value = serde_json::from_str(&std::fs::read_to_string(instance.join("meta.json"))?)?;
    assert_eq!(meta["status"], json!("killed"));
    Ok(())
}
