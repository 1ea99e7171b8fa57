//! `/add-dir` and `--add-dir`: extra directories the file tools accept, listed, refused with the
//! reference's reasons, told to the model, and kept in `state.json` for the next start.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, payloads, tool_call_line};

fn texts(messages: &[Value]) -> Vec<String> {
    payloads(messages, "ContentPart")
        .iter()
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

fn read_result(messages: &[Value]) -> Result<Value> {
    payloads(messages, "ToolResult")
        .first()
        .map(|p| p["return_value"].clone())
        .context("no ToolResult")
}

#[tokio::test]
async fn add_dir_lets_the_file_tools_in_and_survives_a_restart() -> Result<()> {
    let read = tool_call_line(
        "tc-read",
        "ReadFile",
        Some(&json!({"path": "../extra/note.txt"}).to_string()),
    );
    let home = TestHome::new()?.scripted(&[read.as_str(), "text: a", read.as_str(), "text: b"])?;
    let extra = home.work().parent().context("no parent")?.join("extra");
    std::fs::create_dir_all(&extra)?;
    std::fs::write(extra.join("note.txt"), "hello from extra\n")?;
    let mut args = home.args();
    args.extend(["--session".to_owned(), "ws".to_owned()]);
    let mut wire = WireProcess::spawn_with(&home, args.clone()).await?;

    // Outside the workspace, a relative path is refused.
    let (_, messages) = wire.prompt(json!("read it")).await?;
    assert_eq!(read_result(&messages)?["is_error"], true);

    let (_, messages) = wire.prompt(json!("/add-dir")).await?;
    assert_eq!(
        texts(&messages),
        ["No additional directories. Usage: /add-dir <path>"]
    );
    let missing = home.work().join("missing");
    let (_, messages) = wire.prompt(json!("/add-dir missing")).await?;
    assert_eq!(
        texts(&messages),
        [format!("Directory does not exist: {}", missing.display())]
    );
    let (_, messages) = wire.prompt(json!("/add-dir \"../extra\"")).await?;
    assert_eq!(
        texts(&messages),
        [format!("Added directory to workspace: {}", extra.display())]
    );
    let (_, messages) = wire.prompt(json!("/add-dir ../extra")).await?;
    assert_eq!(
        texts(&messages),
        [format!("Directory already in workspace: {}", extra.display())]
    );

    // Now the same call reads the file, and the model was told about the directory.
    let (_, messages) = wire.prompt(json!("read it again")).await?;
    let result = read_result(&messages)?;
    assert_eq!(result["is_error"], false, "{result}");
    assert!(
        result["output"].to_string().contains("hello from extra"),
        "{result}"
    );
    wire.wait_exit().await?;
    let session = home.sessions_of_work_dir().join("ws");
    let context = std::fs::read_to_string(session.join("context.jsonl"))?;
    assert!(
        context.contains("The user added a directory to the workspace") && context.contains("note.txt"),
        "{context}"
    );
    let state: Value = serde_json::from_str(&std::fs::read_to_string(session.join("state.json"))?)?;
    assert_eq!(state["additional_dirs"], json!([extra.display().to_string()]));

    // The next start on the session has it.
    let mut wire = WireProcess::spawn_with(&home, args).await?;
    let (_, messages) = wire.prompt(json!("/add-dir")).await?;
    assert_eq!(
        texts(&messages),
        [format!("Additional directories:\n  - {}", extra.display())]
    );
    wire.wait_exit().await?;
    Ok(())
}

#[tokio::test]
async fn add_dir_on_the_command_line_is_kept_in_the_session() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hi"])?;
    let extra = home.work().parent().context("no parent")?.join("extra");
    std::fs::create_dir_all(&extra)?;
    let mut args = home.args();
    args.extend(["--session".to_owned(), "cli".to_owned(), "--add-dir".to_owned()]);
    args.push(extra.display().to_string());
    let mut wire = WireProcess::spawn_with(&home, args).await?;
    let (_, messages) = wire.prompt(json!("/add-dir")).await?;
    assert_eq!(
        texts(&messages),
        [format!("Additional directories:\n  - {}", extra.display())]
    );
    wire.wait_exit().await?;
    let state: Value = serde_json::from_str(&std::fs::read_to_string(
        home.sessions_of_work_dir().join("cli").join("state.json"),
    )?)?;
    assert_eq!(state["additional_dirs"], json!([extra.display().to_string()]));
    Ok(())
}
