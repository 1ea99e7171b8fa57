//! Session files on disk, `--session` / `--continue`, and `replay`.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{
    TestHome, WireProcess, approval_answer, context_roles, count_lines, dir_names, external_tool,
    init_with_tools, kinds, rpc_result, shell_call_line, status_without_usage, summarize, tool_call_line,
};

/// Runs one process: `initialize`, one prompt per entry of `inputs` (each must finish), then EOF.
async fn run_turns(home: &TestHome, extra: &[&str], inputs: &[&str]) -> Result<()> {
    let mut args = home.args();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let mut wire = WireProcess::spawn_with(home, args).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    for input in inputs {
        let (response, _) = wire.prompt(json!(input)).await?;
        assert_eq!(
            response["result"],
            json!({"status": "finished"}),
            "prompt {input}"
        );
    }
    assert_eq!(wire.wait_exit().await?.code(), Some(0));
    Ok(())
}

fn event(kind: &str, payload: Value) -> Value {
    json!({"method": "event", "type": kind, "payload": payload})
}

/// The records of a wire.jsonl after its header, as `{method: event, type, payload}`.
fn wire_records(path: &std::path::Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().context("empty wire.jsonl")?)?;
    assert_eq!(header, json!({"type": "metadata", "protocol_version": "1.10"}));
    lines
        .map(|line| {
            let record: Value = serde_json::from_str(line)?;
            assert!(
                record["timestamp"].is_f64() || record["timestamp"].is_u64(),
                "{record}"
            );
            Ok(event(
                record["message"]["type"].as_str().unwrap_or("?"),
                record["message"]["payload"].clone(),
            ))
        })
        .collect()
}

#[tokio::test]
async fn a_named_session_holds_exactly_the_three_files_after_one_turn() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    run_turns(&home, &["--session", "my-id"], &["hi"]).await?;

    let dir = home.sessions_of_work_dir().join("my-id");
    assert_eq!(home.session_dirs(), vec![dir.clone()]);
    assert_eq!(dir_names(&dir)?, ["context.jsonl", "state.json", "wire.jsonl"]);
    assert_eq!(count_lines(&dir.join("context.jsonl")), 5);
    assert_eq!(count_lines(&dir.join("wire.jsonl")), 6);
    assert_eq!(
        context_roles(&dir.join("context.jsonl"))?,
        [
            "_system_prompt",
            "_checkpoint",
            "user",
            "_checkpoint",
            "assistant"
        ]
    );
    assert_eq!(
        wire_records(&dir.join("wire.jsonl"))?,
        vec![
            event("TurnBegin", json!({"user_input": "hi"})),
            event("StepBegin", json!({"n": 1})),
            event("ContentPart", json!({"type": "text", "text": "hello"})),
            event("StatusUpdate", status_without_usage()),
            event("TurnEnd", json!({})),
        ]
    );
    let state: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("state.json"))?)?;
    // Reference: the first finished turn titles the session.
    assert_eq!(state["custom_title"], json!("hi"), "{state}");
    Ok(())
}

#[tokio::test]
async fn continue_appends_to_the_last_session_of_the_work_dir() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: first", "text: second"])?;
    run_turns(&home, &[], &["first"]).await?;
    let dirs = home.session_dirs();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = dirs[0].clone();
    assert_eq!(dir.parent(), Some(home.sessions_of_work_dir().as_path()));
    let (context, wire) = (dir.join("context.jsonl"), dir.join("wire.jsonl"));
    assert_eq!((count_lines(&context), count_lines(&wire)), (5, 6));

    run_turns(&home, &["--continue"], &["second"]).await?;
    assert_eq!(home.session_dirs(), vec![dir.clone()]);
    assert_eq!((count_lines(&context), count_lines(&wire)), (9, 11));
    assert_eq!(
        context_roles(&context)?,
        [
            "_system_prompt",
            "_checkpoint",
            "user",
            "_checkpoint",
            "assistant",
            "_checkpoint",
            "user",
            "_checkpoint",
            "assistant"
        ]
    );
    Ok(())
}

#[tokio::test]
async fn continue_after_a_named_session_resumes_it() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: first", "text: second"])?;
    run_turns(&home, &["--session", "named"], &["first"]).await?;
    run_turns(&home, &["--continue"], &["second"]).await?;
    let dir = home.sessions_of_work_dir().join("named");
    assert_eq!(home.session_dirs(), vec![dir.clone()]);
    assert_eq!(
        (
            count_lines(&dir.join("context.jsonl")),
            count_lines(&dir.join("wire.jsonl"))
        ),
        (9, 11)
    );
    Ok(())
}

#[tokio::test]
async fn continue_without_an_earlier_session_fails_at_start() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut args = home.args();
    args.push("--continue".into());
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = home.run_cli(&args).await?;
    assert_ne!(output.status.code(), Some(0), "{output:?}");
    assert!(output.status.code().is_some(), "killed by a signal: {output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("No previous session found for the working directory"),
        "{stderr}"
    );
    // Nothing was served and nothing was created.
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert_eq!(home.session_dirs(), Vec::<std::path::PathBuf>::new());
    Ok(())
}

#[tokio::test]
async fn an_empty_session_leaves_no_directory() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    run_turns(&home, &[], &[]).await?;
    assert_eq!(home.session_dirs(), Vec::<std::path::PathBuf>::new());
    Ok(())
}

#[tokio::test]
async fn an_empty_named_session_leaves_no_directory() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    run_turns(&home, &["--session", "nothing-said"], &[]).await?;
    assert_eq!(home.session_dirs(), Vec::<std::path::PathBuf>::new());
    Ok(())
}

/// The recorded (merged) events of one turn whose step streamed `text: a` and `text: b`.
fn recorded_two_line_turn() -> Vec<Value> {
    vec![
        event("TurnBegin", json!({"user_input": "hi"})),
        event("StepBegin", json!({"n": 1})),
        // Reference: the recorder merges consecutive text parts; the live stream does not.
        event("ContentPart", json!({"type": "text", "text": "ab"})),
        event("StatusUpdate", status_without_usage()),
        event("TurnEnd", json!({})),
    ]
}

#[tokio::test]
async fn replay_streams_the_recorded_turn_in_order() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: a\ntext: b"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (_, live) = wire.prompt(json!("hi")).await?;
    assert_eq!(
        kinds(&live).iter().filter(|k| *k == "event:ContentPart").count(),
        2
    );

    let replay = wire.request("replay", json!({})).await?;
    let (response, messages) = wire.read_response(&replay).await?;
    assert_eq!(
        response,
        rpc_result(&replay, json!({"status": "finished", "events": 5, "requests": 0}))
    );
    assert_eq!(summarize(&messages), recorded_two_line_turn());
    // A replay is not a turn: the server is idle again.
    wire.assert_alive().await
}

#[tokio::test]
async fn replay_in_a_new_process_reads_the_session_from_disk() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: a\ntext: b"])?;
    run_turns(&home, &["--session", "replayed"], &["hi"]).await?;

    let mut args = home.args();
    args.extend(["--session".to_owned(), "replayed".to_owned()]);
    let mut wire = WireProcess::spawn_with(&home, args).await?;
    // Replay works without initialize, and without params.
    wire.send(&json!({"jsonrpc": "2.0", "id": "replay-1", "method": "replay"}))
        .await?;
    let (response, messages) = wire.read_response("replay-1").await?;
    assert_eq!(
        response,
        rpc_result(
            "replay-1",
            json!({"status": "finished", "events": 5, "requests": 0})
        )
    );
    assert_eq!(summarize(&messages), recorded_two_line_turn());
    Ok(())
}

#[tokio::test]
async fn replay_of_an_empty_session_sends_nothing() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let replay = wire.request("replay", json!({})).await?;
    let (response, messages) = wire.read_response(&replay).await?;
    assert_eq!(
        response,
        rpc_result(&replay, json!({"status": "finished", "events": 0, "requests": 0}))
    );
    assert_eq!(messages, Vec::<Value>::new());
    Ok(())
}

#[tokio::test]
async fn replay_resends_recorded_tool_call_requests_as_requests() -> Result<()> {
    let call = tool_call_line("tc-1", "ext_tool", Some(r#"{"path": "a"}"#));
    let home = TestHome::new()?.scripted(&[&call, "text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_tools(&[external_tool("ext_tool")]))
        .await?;
    let prompt = wire.start_prompt(json!("run")).await?;
    wire.wait_request("ToolCallRequest").await?;
    let ok = json!({"is_error": false, "output": "ok", "message": "", "display": []});
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": ok}))
        .await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let replay = wire.request("replay", json!({})).await?;
    let (response, messages) = wire.read_response(&replay).await?;
    assert_eq!(
        response,
        rpc_result(&replay, json!({"status": "finished", "events": 9, "requests": 1}))
    );
    // A replayed request carries its payload id as the JSON-RPC id.
    let request = messages
        .iter()
        .find(|m| m["method"] == "request")
        .cloned()
        .unwrap_or_default();
    assert_eq!(request["id"], "tc-1", "{request}");
    let args = "{\"path\": \"a\"}";
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "run"})),
            event("StepBegin", json!({"n": 1})),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "ext_tool", "arguments": args}, "extras": null})
            ),
            event("StatusUpdate", status_without_usage()),
            json!({"method": "request", "type": "ToolCallRequest", "payload": {"id": "tc-1", "name": "ext_tool", "arguments": args}}),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "ok", "message": "", "display": [], "extras": null}})
            ),
            event("StepBegin", json!({"n": 2})),
            event("ContentPart", json!({"type": "text", "text": "done"})),
            event("StatusUpdate", status_without_usage()),
            event("TurnEnd", json!({})),
        ]
    );
    // Answering a replayed request does nothing: it was never pending.
    wire.respond("tc-1", json!({"tool_call_id": "tc-1", "return_value": ok}))
        .await?;
    wire.assert_alive().await
}

#[tokio::test]
async fn replay_after_an_approved_shell_turn_matches_the_reference() -> Result<()> {
    let call = format!("text: step1\n{}", shell_call_line("tc-1", "echo ok"));
    let home = TestHome::new()?
        .scripted(&[&call, "text: done"])?
        .arg("--session")
        .arg("replay-session");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let prompt = wire.start_prompt(json!("run shell")).await?;
    let approval = wire.wait_request("ApprovalRequest").await?;
    wire.send(&approval_answer(&approval, "approve")).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let replay = wire.request("replay", json!({})).await?;
    let (response, messages) = wire.read_response(&replay).await?;
    // Approvals travel outside the turn and are not recorded.
    assert_eq!(
        response,
        rpc_result(
            &replay,
            json!({"status": "finished", "events": 10, "requests": 0})
        )
    );
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "run shell"})),
            event("StepBegin", json!({"n": 1})),
            event("ContentPart", json!({"type": "text", "text": "step1"})),
            event(
                "ToolCall",
                json!({"type": "function", "id": "tc-1", "function": {"name": "Shell", "arguments": "{\"command\":\"echo ok\"}"}, "extras": null})
            ),
            event("StatusUpdate", status_without_usage()),
            event(
                "ToolResult",
                json!({"tool_call_id": "tc-1", "return_value": {"is_error": false, "output": "ok\n", "message": "Command executed successfully.", "display": [], "extras": null}})
            ),
            event("StepBegin", json!({"n": 2})),
            event("ContentPart", json!({"type": "text", "text": "done"})),
            event("StatusUpdate", status_without_usage()),
            event("TurnEnd", json!({})),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn the_work_dir_is_normalized_but_symlinks_are_kept() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: one", "text: two"])?;
    let config = home
        .config
        .clone()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    // Relative, with `..` and a trailing slash: the folder is named after the absolute, normalized path.
    let args = [
        "--wire",
        "--config-file",
        &config,
        "--session",
        "rel",
        "--work-dir",
        "../work/",
    ];
    let mut wire = WireProcess::spawn_with(&home, args.iter().map(|a| (*a).to_owned()).collect()).await?;
    let (response, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(wire.wait_exit().await?.code(), Some(0));
    assert_eq!(home.session_dirs(), vec![home.sessions_of_work_dir().join("rel")]);

    // Reference: a symlinked work dir is not resolved, so it gets its own folder.
    let link = home.root.path().join("link");
    std::os::unix::fs::symlink(home.work(), &link)?;
    let link_str = link.to_string_lossy().into_owned();
    let args = [
        "--wire",
        "--config-file",
        &config,
        "--session",
        "via-link",
        "--work-dir",
        &link_str,
    ];
    let mut wire = WireProcess::spawn_with(&home, args.iter().map(|a| (*a).to_owned()).collect()).await?;
    let (response, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(wire.wait_exit().await?.code(), Some(0));
    let by_link = home
        .share()
        .join("sessions")
        .join(crate::common::md5_hex(link_str.as_bytes()))
        .join("via-link");
    assert!(
        home.session_dirs().contains(&by_link),
        "{:?}",
        home.session_dirs()
    );
    Ok(())
}

#[tokio::test]
async fn continue_only_sees_sessions_of_its_own_work_dir() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: one"])?;
    run_turns(&home, &[], &["first"]).await?;
    let other = home.root.path().join("other-work");
    std::fs::create_dir_all(&other)?;
    let config = home.config.clone().unwrap_or_default();
    let output = home
        .run_cli(&[
            "--wire",
            "--config-file",
            &config.to_string_lossy(),
            "--continue",
            "--work-dir",
            &other.to_string_lossy(),
        ])
        .await?;
    assert_ne!(output.status.code(), Some(0), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stderr)
            .contains("No previous session found for the working directory")
    );
    Ok(())
}

#[tokio::test]
async fn replay_skips_records_it_cannot_read() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: unused"])?;
    let dir = home.sessions_of_work_dir().join("hand-made");
    std::fs::create_dir_all(&dir)?;
    // Written the way the reference writes (", " and ": " separators), with damage: a line that is not
    // JSON, an unknown message type, and a torn last line.
    let wire_jsonl = [
        r#"{"type": "metadata", "protocol_version": "1.10"}"#,
        r#"{"timestamp": 1.5, "message": {"type": "TurnBegin", "payload": {"user_input": "old"}}}"#,
        "this is not json",
        r#"{"timestamp": 2.5, "message": {"type": "NoSuchEvent", "payload": {}}}"#,
        r#"{"timestamp": 3.5, "message": {"type": "ContentPart", "payload": {"type": "text", "text": "kept"}}}"#,
        r#"{"timestamp": 4.5, "message": {"type": "TurnEnd", "payload": {}}}"#,
        r#"{"timestamp": 5.5, "mess"#,
    ]
    .join("\n");
    std::fs::write(dir.join("wire.jsonl"), wire_jsonl)?;
    std::fs::write(dir.join("context.jsonl"), "")?;

    let home = home.arg("--session").arg("hand-made");
    let mut wire = WireProcess::spawn(&home).await?;
    let replay = wire.request("replay", json!({})).await?;
    let (response, messages) = wire.read_response(&replay).await?;
    assert_eq!(
        response,
        rpc_result(&replay, json!({"status": "finished", "events": 3, "requests": 0}))
    );
    assert_eq!(
        summarize(&messages),
        vec![
            event("TurnBegin", json!({"user_input": "old"})),
            event("ContentPart", json!({"type": "text", "text": "kept"})),
            event("TurnEnd", json!({})),
        ]
    );
    wire.assert_alive().await
}

/// Session ids come from the command line; one that is a path must not place session files outside
/// `<share>/sessions/<hash>/` (the reference joins it as a path; we should refuse it instead).
#[tokio::test]
async fn a_session_id_cannot_escape_the_sessions_directory() -> Result<()> {
    for id in ["../../escape", "/ABSOLUTE"] {
        let home = TestHome::new()?.scripted(&["text: hello"])?;
        let absolute = home.root.path().join("abs-session");
        let id = if id == "/ABSOLUTE" {
            absolute.to_string_lossy().into_owned()
        } else {
            id.to_owned()
        };
        let mut args = home.args();
        args.extend(["--session".to_owned(), id.clone()]);
        let mut wire = WireProcess::spawn_with(&home, args).await?;
        // Either refused at start (the process ends) or served: both are fine, escaping is not.
        if let Ok((response, _)) = wire.prompt(json!("hi")).await {
            assert_eq!(response["result"], json!({"status": "finished"}));
        }
        wire.wait_exit().await?;
        assert!(
            !home.share().join("escape").exists(),
            "{id}: wrote <share>/escape"
        );
        assert!(!absolute.exists(), "{id}: wrote {}", absolute.display());
        for dir in home.session_dirs() {
            assert_eq!(
                dir.parent(),
                Some(home.sessions_of_work_dir().as_path()),
                "{id}: {}",
                dir.display()
            );
        }
    }
    Ok(())
}
