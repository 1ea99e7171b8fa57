//! Ralph mode (`--max-ralph-iterations N`, `[loop_control] max_ralph_iterations`): a prompt runs as a
//! task turn, then as a CONTINUE/STOP decision fed again until the model says STOP or the N extra
//! runs are used up (`max_steps_reached`). Each run is a nested `TurnBegin` ... `TurnEnd`.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply, message_text};
use crate::common::{TestHome, WireProcess, payloads, tool_call_line};

async fn spawn_initialized(home: &TestHome) -> Result<WireProcess> {
    let mut wire = WireProcess::spawn(home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    Ok(wire)
}

/// A scripted home whose config file sets `loop_control.max_ralph_iterations`.
fn home_with_config_iterations(scripts: &[&str], iterations: i64) -> Result<TestHome> {
    let mut home = TestHome::new()?;
    let path = home.scripted_config(scripts, json!({}))?;
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    config["loop_control"] = json!({"max_ralph_iterations": iterations});
    std::fs::write(&path, serde_json::to_string(&config)?)?;
    home.config = Some(path);
    Ok(home)
}

/// The `user_input` of every TurnBegin, the outer one first.
fn turn_inputs(messages: &[Value]) -> Vec<Value> {
    payloads(messages, "TurnBegin")
        .into_iter()
        .map(|p| p["user_input"].clone())
        .collect()
}

/// The texts the model streamed, in order.
fn answers(messages: &[Value]) -> Vec<String> {
    payloads(messages, "ContentPart")
        .into_iter()
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

fn is_decision(input: &Value) -> bool {
    input.as_str().is_some_and(|text| {
        text.starts_with("fix the bug\n\n")
            && text.contains("automated loop")
            && text.contains("- CONTINUE\n- STOP")
            && text.contains("<choice>")
    })
}

#[tokio::test]
async fn continue_then_stop_ends_the_loop_after_three_runs() -> Result<()> {
    let home = TestHome::new()?
        .scripted(&[
            "text: patched it",
            "text: not yet <choice>CONTINUE</choice>",
            "text: all done <choice>STOP</choice>",
            "text: never asked",
        ])?
        .arg("--max-ralph-iterations")
        .arg("2");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("fix the bug")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let inputs = turn_inputs(&messages);
    assert_eq!(inputs.len(), 4, "{inputs:#?}");
    assert_eq!(inputs[0], json!("fix the bug"));
    // The task turn carries the user's message as content parts, as the reference does.
    assert_eq!(inputs[1], json!([{"type": "text", "text": "fix the bug"}]));
    assert!(is_decision(&inputs[2]), "{}", inputs[2]);
    assert_eq!(inputs[2], inputs[3]);
    assert_eq!(payloads(&messages, "TurnEnd").len(), 4);
    assert_eq!(
        answers(&messages),
        [
            "patched it",
            "not yet <choice>CONTINUE</choice>",
            "all done <choice>STOP</choice>"
        ]
    );
    wire.assert_alive().await
}

#[tokio::test]
async fn always_continue_stops_at_the_limit_from_the_config_file() -> Result<()> {
    let home = home_with_config_iterations(
        &[
            "text: a",
            "text: b <choice>CONTINUE</choice>",
            "text: c <choice>CONTINUE</choice>",
        ],
        1,
    )?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("fix the bug")).await?;
    assert_eq!(
        response["result"],
        json!({"status": "max_steps_reached", "steps": 2})
    );
    let inputs = turn_inputs(&messages);
    assert_eq!(inputs.len(), 3, "{inputs:#?}");
    assert!(is_decision(&inputs[2]), "{}", inputs[2]);
    assert_eq!(payloads(&messages, "TurnEnd").len(), 3);
    assert_eq!(answers(&messages), ["a", "b <choice>CONTINUE</choice>"]);
    wire.assert_alive().await
}

#[tokio::test]
async fn zero_iterations_on_the_command_line_runs_the_prompt_once() -> Result<()> {
    // The flag wins over the file's 3.
    let home = home_with_config_iterations(&["text: done", "text: never asked"], 3)?
        .arg("--max-ralph-iterations")
        .arg("0");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("fix the bug")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(turn_inputs(&messages), [json!("fix the bug")]);
    assert_eq!(payloads(&messages, "TurnEnd").len(), 1);
    assert_eq!(answers(&messages), ["done"]);
    wire.assert_alive().await
}

#[tokio::test]
async fn slash_commands_do_not_loop() -> Result<()> {
    let home = TestHome::new()?
        .scripted(&[])?
        .arg("--max-ralph-iterations")
        .arg("-1");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("/no-such-command")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(turn_inputs(&messages), [json!("/no-such-command")]);
    wire.assert_alive().await
}

#[tokio::test]
async fn the_model_is_told_it_runs_in_a_loop() -> Result<()> {
    let model = MockModel::start(|n, _| match n {
        0 => Reply::Text("patched it".into()),
        _ => Reply::Text("tests pass now <choice>STOP</choice>".into()),
    })
    .await;
    let home =
        TestHome::new()?.with_config(&model.config(json!({"loop_control": {"max_ralph_iterations": -1}})))?;
    let mut wire = spawn_initialized(&home).await?;
    let (response, _) = wire.prompt(json!("fix the bug")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let requests = model.requests().await;
    assert_eq!(requests.len(), 2, "{requests:#?}");
    let last_user = |messages: &[Value]| -> Result<String> {
        let message = messages
            .iter()
            .rev()
            .find(|m| m["role"] == "user")
            .context("no user message")?;
        Ok(message_text(message))
    };
    assert_eq!(last_user(&requests[0])?, "fix the bug");
    let decision = last_user(&requests[1])?;
    assert!(decision.starts_with("fix the bug\n\n"), "{decision}");
    assert!(decision.contains("automated loop"), "{decision}");
    assert!(
        decision.contains("Choose STOP only once the task is completely done"),
        "{decision}"
    );
    assert!(decision.contains("<choice>"), "{decision}");
    // The first run's answer is in the history the decision sees.
    assert!(
        requests[1]
            .iter()
            .any(|m| m["role"] == "assistant" && message_text(m) == "patched it"),
        "{:#?}",
        requests[1]
    );
    wire.assert_alive().await
}

#[tokio::test]
async fn subagents_run_their_prompt_once() -> Result<()> {
    let call = tool_call_line(
        "tc-a",
        "Agent",
        Some(
            &json!({"description": "look", "prompt": "Explain the config", "subagent_type": "explore"})
                .to_string(),
        ),
    );
    let report = format!(
        "text: {}",
        "The module parses the config and validates it. "
            .repeat(6)
            .trim_end()
    );
    let home = TestHome::new()?
        .scripted(&[
            call.as_str(),
            report.as_str(),
            "text: explained",
            "text: <choice>STOP</choice>",
        ])?
        .arg("--max-ralph-iterations")
        .arg("3");
    let mut wire = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("fix the bug")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let inner: Vec<&str> = payloads(&messages, "SubagentEvent")
        .into_iter()
        .filter_map(|e| e["event"]["type"].as_str())
        .collect();
    assert_eq!(
        inner.iter().filter(|t| **t == "TurnBegin").count(),
        1,
        "{inner:?}"
    );
    let inputs = turn_inputs(&messages);
    assert_eq!(inputs.len(), 3, "{inputs:#?}");
    assert!(is_decision(&inputs[2]), "{}", inputs[2]);
    wire.assert_alive().await
}
