//! What the model is offered: seeds/002's tool names (and git_diff) by the kimi-code agent, with
//! seeds/002's parameters; the reference's tools, unchanged but for git_diff, by the default agent.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{kimi_code, reference_name_in};
use crate::common::mock_model::{MockModel, Reply, message_text};
use crate::common::{TestHome, WireProcess, payloads};
use crate::suite::plan_mode::answer;

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

/// K10: the kimi-code model never reads of a tool it does not have. Every tool is offered (a model
/// that sees images and video, a search service), and the tools whose results are our own words
/// (ReadMediaFile's refusal of a text file, EnterPlanMode's guidance) are called.
#[tokio::test]
async fn no_text_the_kimi_code_model_reads_names_a_tool_it_lacks() -> Result<()> {
    let mock = MockModel::start(|n, _| match n {
        0 => Reply::Calls(vec![
            ("m-1".into(), "ReadMediaFile".into(), json!({"path": "notes.txt"})),
            ("p-1".into(), "EnterPlanMode".into(), json!({})),
            (
                "o-1".into(),
                "TaskOutput".into(),
                json!({"task_id": "bash-00000000"}),
            ),
        ]),
        _ => Reply::Text("done".into()),
    })
    .await;
    let mut config = mock.config(json!({
        "services": {"moonshot_search": {"base_url": "http://127.0.0.1:9/search", "api_key": "k"}}
    }));
    config["models"]["mock"]["capabilities"] = json!(["image_in", "video_in"]);
    let home = TestHome::new()?.with_config(&config)?;
    std::fs::write(home.work().join("notes.txt"), "text")?;
    let (_home, mut wire) = kimi_code(home).await?;
    let prompt = wire.start_prompt(json!("look")).await?;
    let question = wire.wait_request("QuestionRequest").await?;
    answer(&mut wire, &question, "Yes").await?;
    let (response, events) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], json!("finished"));

    let bodies = mock.bodies().await;
    let tools = bodies[0]["tools"].as_array().cloned().unwrap_or_default();
    let offered: Vec<&str> = tools
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for name in ["ReadMediaFile", "WebSearch", "TodoList", "Bash", "Edit"] {
        assert!(offered.contains(&name), "{name} not offered: {offered:?}");
    }
    for tool in &tools {
        let text = tool.to_string();
        assert_eq!(reference_name_in(&text), None, "{text}");
    }
    let ask = tools
        .iter()
        .find(|t| t["function"]["name"] == "AskUserQuestion")
        .context("no AskUserQuestion")?;
    assert_eq!(
        ask.pointer("/function/parameters/properties/questions/items/properties/header/maxLength"),
        Some(&json!(12)),
        "{ask}"
    );

    let results = payloads(&events, "ToolResult");
    assert_eq!(results.len(), 3, "{results:?}");
    let message = |id: &str| {
        results
            .iter()
            .find(|r| r["tool_call_id"] == id)
            .map(|r| r["return_value"]["message"].clone())
            .unwrap_or_default()
    };
    assert_eq!(
        message("m-1"),
        json!("`notes.txt` is a text file. Use Read to read text files.")
    );
    let guidance = results
        .iter()
        .find(|r| r["tool_call_id"] == "p-1")
        .and_then(|r| r["return_value"]["output"].as_str())
        .context("no EnterPlanMode output")?;
    assert!(guidance.contains("(create it with Write first)"), "{guidance}");
    // What the model read back: the tool messages of the next request.
    let read_back = &mock.requests().await[1];
    let tool_messages: Vec<String> = read_back
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(message_text)
        .collect();
    assert_eq!(tool_messages.len(), 3, "{read_back:?}");
    for text in tool_messages {
        assert_eq!(reference_name_in(&text), None, "{text}");
    }
    Ok(())
}
