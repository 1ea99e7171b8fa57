//! What the model is offered: seeds/002's tool names (and git_diff) by the kimi-code agent, with
//! seeds/002's parameters; the reference's tools, unchanged but for git_diff, by the default agent.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply};
use crate::common::{TestHome, WireProcess};

/// The tools of the first request the model got from an agent started with `agent_args`.
async fn offered(agent_args: &[&str]) -> Result<Vec<Value>> {
    let mock = MockModel::start(|_, _| Reply::Text("hi".into())).await;
    let mut home = TestHome::new()?.with_config(&mock.config(json!({})))?;
    for arg in agent_args {
        home = home.arg(arg);
    }
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({
        "protocol_version": "1.10",
        "capabilities": {"supports_question": true, "supports_plan_mode": true}
    }))
    .await?;
    wire.prompt(json!("hello")).await?;
    let body = mock.bodies().await.into_iter().next().context("no request")?;
    Ok(body["tools"].as_array().cloned().unwrap_or_default())
}

fn names(tools: &[Value]) -> Vec<&str> {
    tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect()
}

fn properties<'a>(tools: &'a [Value], name: &str) -> Vec<&'a str> {
    tools
        .iter()
        .find(|t| t["function"]["name"] == name)
        .and_then(|t| t["function"]["parameters"]["properties"].as_object())
        .map(|p| p.keys().map(String::as_str).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_kimi_code_agent_offers_seeds_tools_with_seeds_parameters() -> Result<()> {
    let tools = offered(&["--agent", "kimi-code"]).await?;
    // A text-only model without a search service: no ReadMediaFile, no WebSearch (seeds/002).
    assert_eq!(
        names(&tools),
        [
            "Agent",
            "AskUserQuestion",
            "TodoList",
            "Bash",
            "TaskList",
            "TaskOutput",
            "TaskStop",
            "Read",
            "Glob",
            "Grep",
            "Write",
            "Edit",
            "FetchURL",
            "EnterPlanMode",
            "ExitPlanMode",
            "CronCreate",
            "CronList",
            "CronDelete",
            "git_diff",
        ]
    );
    assert_eq!(
        properties(&tools, "Bash"),
        [
            "command",
            "cwd",
            "timeout",
            "description",
            "run_in_background",
            "disable_timeout"
        ]
    );
    assert_eq!(properties(&tools, "Read"), ["path", "line_offset", "n_lines"]);
    assert_eq!(properties(&tools, "Write"), ["path", "content", "mode"]);
    assert_eq!(
        properties(&tools, "Edit"),
        ["path", "old_string", "new_string", "replace_all"]
    );
    assert_eq!(properties(&tools, "Glob"), ["pattern", "path", "include_dirs"]);
    assert_eq!(
        properties(&tools, "Agent"),
        [
            "prompt",
            "description",
            "subagent_type",
            "resume",
            "run_in_background",
            "timeout"
        ]
    );
    assert_eq!(properties(&tools, "TodoList"), ["todos"]);
    assert_eq!(properties(&tools, "git_diff"), ["file", "ref", "cached"]);
    Ok(())
}

#[tokio::test]
async fn the_default_agent_still_offers_the_reference_tools() -> Result<()> {
    let tools = offered(&[]).await?;
    assert_eq!(
        names(&tools),
        [
            "Agent",
            "AskUserQuestion",
            "SetTodoList",
            "Shell",
            "TaskList",
            "TaskOutput",
            "TaskStop",
            "ReadFile",
            "Glob",
            "Grep",
            "WriteFile",
            "StrReplaceFile",
            "FetchURL",
            "ExitPlanMode",
            "EnterPlanMode",
            "CronCreate",
            "CronList",
            "CronDelete",
            "git_diff",
        ]
    );
    assert_eq!(
        properties(&tools, "Shell"),
        ["command", "timeout", "run_in_background", "description"]
    );
    assert_eq!(
        properties(&tools, "Glob"),
        ["pattern", "directory", "include_dirs"]
    );
    Ok(())
}

#[tokio::test]
async fn an_agent_file_extends_kimi_code_by_name() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let file = dir.path().join("mine.yaml");
    std::fs::write(
        &file,
        "version: 1\nagent:\n  extend: kimi-code\n  exclude_tools:\n    - \"kimi_code:Bash\"\n    - \"git_diff\"\n",
    )?;
    let tools = offered(&["--agent-file", &file.to_string_lossy()]).await?;
    let names = names(&tools);
    assert!(names.contains(&"Read") && names.contains(&"Edit"), "{names:?}");
    assert!(
        !names.contains(&"Bash") && !names.contains(&"git_diff"),
        "{names:?}"
    );
    assert!(
        !names.contains(&"Shell") && !names.contains(&"ReadFile"),
        "{names:?}"
    );
    Ok(())
}
