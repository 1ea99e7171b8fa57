//! MCP through real servers: the rmcp test server (tests/mcp_test_server) over stdio and
//! streamable HTTP, started by the agent (stdio) or by the test (HTTP).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};

use crate::common::{
    READ_TIMEOUT, TestHome, WireProcess, approval_answer, is_alive, payloads, tool_call_line,
};

/// The test server binary (a binary of this package, so cargo builds it for the suite).
pub(crate) fn test_server() -> Result<PathBuf> {
    Ok(PathBuf::from(env!("CARGO_BIN_EXE_mcp_test_server")))
}

/// A scripted home whose config sets `tool_call_timeout_ms` when given, with `servers` in an MCP config
/// file passed by `--mcp-config-file`.
pub(crate) fn home_with(
    scripts: &[&str],
    servers: Value,
    tool_call_timeout_ms: Option<u64>,
) -> Result<TestHome> {
    let home = TestHome::new()?;
    let config_path = home.scripted_config(scripts, json!({}))?;
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&config_path)?)?;
    if let Some(ms) = tool_call_timeout_ms {
        config["mcp"] = json!({"client": {"tool_call_timeout_ms": ms}});
    }
    let home = home.with_config(&config)?;
    let mcp_path = home.root.path().join("mcp.json");
    std::fs::write(
        &mcp_path,
        serde_json::to_string(&json!({ "mcpServers": servers }))?,
    )?;
    Ok(home.arg("--mcp-config-file").arg(&mcp_path.to_string_lossy()))
}

/// A stdio server entry for the test server with extra environment.
fn stdio_server(env: Value) -> Result<Value> {
    Ok(json!({"command": test_server()?.to_string_lossy(), "args": [], "env": env}))
}

pub(crate) fn call(id: &str, name: &str, args: Value) -> String {
    tool_call_line(id, name, Some(&args.to_string()))
}

pub(crate) fn init() -> Value {
    json!({"protocol_version": "1.10"})
}

/// The `return_value`s of the ToolResult events, in order.
pub(crate) fn results(messages: &[Value]) -> Vec<Value> {
    payloads(messages, "ToolResult")
        .into_iter()
        .map(|p| p["return_value"].clone())
        .collect()
}

pub(crate) fn text_output(value: &Value) -> String {
    value["output"]
        .as_array()
        .map(|parts| {
            parts
                .iter()
                .filter_map(|p| p["text"].as_str())
                .collect::<String>()
        })
        .unwrap_or_default()
}

const TOOLS: [&str; 8] = [
    "echo",
    "fail",
    "slow",
    "cancelled",
    "crash",
    "add_tool",
    "image",
    "pid",
];

fn status_event(mcp_status: Value) -> Value {
    json!({"method": "event", "type": "StatusUpdate", "payload": {
        "context_usage": null, "context_tokens": null, "max_context_tokens": null, "token_usage": null,
        "message_id": null, "plan_mode": null, "mcp_status": mcp_status,
    }})
}

fn summary(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter(|m| m.get("method").is_some())
        .map(|m| json!({"method": m["method"], "type": m["params"]["type"], "payload": m["params"]["payload"]}))
        .collect()
}

#[tokio::test]
async fn loading_events_then_an_approved_stdio_call() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let gate = dir.path().join("gate");
    let made = std::process::Command::new("mkfifo").arg(&gate).status()?;
    anyhow::ensure!(made.success(), "mkfifo failed");
    let scripts = [
        &format!("text: calling\n{}", call("tc-1", "echo", json!({"text": "hi"})))[..],
        "text: done",
    ];
    let home = home_with(
        &scripts,
        json!({"test": stdio_server(json!({"MCP_TEST_GATE": gate.to_string_lossy()}))?}),
        None,
    )?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    wire.wait_event("MCPLoadingBegin").await?;
    // The server is held before it answers `initialize`: let it go now.
    let writer = tokio::task::spawn_blocking(move || std::fs::OpenOptions::new().write(true).open(gate));
    let _gate = tokio::time::timeout(READ_TIMEOUT, writer).await???;
    let request = wire.peek_request("ApprovalRequest").await?;
    wire.send(&approval_answer(&request, "approve")).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    // `wait_event` took MCPLoadingBegin (it came third); the rest is here in order.
    let events = summary(&messages);
    assert_eq!(
        events[..4].to_vec(),
        vec![
            json!({"method": "event", "type": "TurnBegin", "payload": {"user_input": "go"}}),
            status_event(json!({"loading": true, "connected": 0, "total": 1, "tools": 0,
                "servers": [{"name": "test", "status": "connecting", "tools": []}]})),
            status_event(json!({"loading": false, "connected": 1, "total": 1, "tools": 8,
                "servers": [{"name": "test", "status": "connected", "tools": TOOLS}]})),
            json!({"method": "event", "type": "MCPLoadingEnd", "payload": {}}),
        ]
    );
    assert_eq!(events[4]["type"], "StepBegin");
    let approval = &request["params"]["payload"];
    assert_eq!(
        (
            &approval["sender"],
            &approval["action"],
            &approval["description"],
            &approval["display"]
        ),
        (
            &json!("echo"),
            &json!("mcp:echo"),
            &json!("Call MCP tool `echo`."),
            &json!([])
        )
    );
    assert_eq!(
        results(&messages),
        vec![
            json!({"is_error": false, "output": [{"type": "text", "text": "echo:hi"}],
            "message": "", "display": [], "extras": null})
        ]
    );
    // Steps after loading carry no MCP status (reference).
    for status in payloads(&messages, "StatusUpdate").into_iter().skip(2) {
        assert_eq!(status["mcp_status"], Value::Null);
    }
    // A second turn does not wait or report again.
    let (_, messages) = wire.prompt(json!("again")).await?;
    assert!(payloads(&messages, "MCPLoadingBegin").is_empty());
    Ok(())
}

#[tokio::test]
async fn error_results_and_media_are_converted() -> Result<()> {
    let scripts = [
        &format!(
            "{}\n{}",
            call("tc-1", "fail", json!({"text": "x"})),
            call("tc-2", "image", json!({}))
        )[..],
        &call("tc-3", "echo", json!({"text": 1})),
        "text: done",
    ];
    let home = home_with(&scripts, json!({"test": stdio_server(json!({}))?}), None)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (_, messages) = wire.prompt(json!("go")).await?;
    let results = results(&messages);
    let by_id = |id: &str| {
        payloads(&messages, "ToolResult")
            .into_iter()
            .find(|p| p["tool_call_id"] == id)
            .map(|p| p["return_value"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(results.len(), 3);
    assert_eq!(
        by_id("tc-1"),
        json!({"is_error": true, "output": [{"type": "text", "text": "failed:x"}],
            "message": "Tool returned an error. The output may be error message or incomplete output",
            "display": [], "extras": null})
    );
    assert_eq!(
        by_id("tc-2")["output"],
        json!([{"type": "text", "text": "an image"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "id": null}}])
    );
    // Arguments are checked against the tool's schema before the call.
    let invalid = by_id("tc-3");
    assert_eq!(invalid["is_error"], json!(true));
    assert!(
        invalid["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Error validating JSON arguments: ")),
        "{invalid}"
    );
    Ok(())
}

#[tokio::test]
async fn a_slow_call_times_out_and_the_server_hears_the_cancellation() -> Result<()> {
    let scripts = [
        &call("tc-1", "slow", json!({"ms": 60000}))[..],
        &call("tc-2", "cancelled", json!({})),
        "text: done",
    ];
    let home = home_with(&scripts, json!({"test": stdio_server(json!({}))?}), Some(300))?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"]["status"], "finished");
    let results = results(&messages);
    assert_eq!(
        results[0],
        json!({"is_error": true, "output": "",
            "message": "Timeout while calling MCP tool `slow`. You may explain to the user that the timeout config is set too low.",
            "display": [{"type": "brief", "text": "Timeout"}], "extras": null})
    );
    assert_eq!(text_output(&results[1]), "cancelled:1");
    Ok(())
}

#[tokio::test]
async fn cancelling_the_turn_cancels_the_mcp_request() -> Result<()> {
    let scripts = [
        &call("tc-1", "slow", json!({"ms": 60000}))[..],
        &call("tc-2", "cancelled", json!({})),
        "text: done",
    ];
    let dir = tempfile::tempdir()?;
    let started = dir.path().join("started");
    let made = std::process::Command::new("mkfifo").arg(&started).status()?;
    anyhow::ensure!(made.success(), "mkfifo failed");
    let env = json!({"MCP_TEST_STARTED": started.to_string_lossy()});
    let home = home_with(&scripts, json!({"test": stdio_server(env)?}), None)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    // Read-write so the open does not wait for the server, and reads wait for its byte instead of EOF.
    let mut in_flight = tokio::net::unix::pipe::OpenOptions::new()
        .read_write(true)
        .open_receiver(&started)?;
    let prompt = wire.start_prompt(json!("go")).await?;
    // Cancel only once the call has reached the server: before that there is nothing to cancel there.
    tokio::time::timeout(READ_TIMEOUT, in_flight.read_u8())
        .await
        .context("the slow call never reached the server")??;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    let (response, _) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"]["status"], "cancelled");
    let (_, messages) = wire.prompt(json!("count")).await?;
    assert_eq!(text_output(&results(&messages)[0]), "cancelled:1");
    Ok(())
}

#[tokio::test]
async fn a_crashed_server_is_restarted_on_next_use() -> Result<()> {
    let scripts = [
        &call("tc-1", "pid", json!({}))[..],
        &call("tc-2", "crash", json!({})),
        &call("tc-3", "pid", json!({})),
        "text: done",
    ];
    let home = home_with(&scripts, json!({"test": stdio_server(json!({}))?}), None)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (_, messages) = wire.prompt(json!("go")).await?;
    let results = results(&messages);
    let first = text_output(&results[0]);
    assert_eq!(results[1]["is_error"], json!(true));
    assert!(
        results[1]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Error running tool: ")),
        "{}",
        results[1]
    );
    assert_eq!(results[2]["is_error"], json!(false), "{}", results[2]);
    let second = text_output(&results[2]);
    assert!(!second.is_empty() && second != first, "{first} / {second}");
    assert!(!is_alive(first.parse()?), "the crashed server was not reaped");
    Ok(())
}

#[tokio::test]
async fn list_changed_adds_the_new_tool_for_the_next_step() -> Result<()> {
    let scripts = [
        &call("tc-1", "add_tool", json!({}))[..],
        &call("tc-2", "extra", json!({})),
        "text: done",
    ];
    let home = home_with(&scripts, json!({"test": stdio_server(json!({}))?}), None)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (_, messages) = wire.prompt(json!("go")).await?;
    let results = results(&messages);
    assert_eq!(text_output(&results[0]), "added");
    assert_eq!(
        (results[1]["is_error"].clone(), text_output(&results[1])),
        (json!(false), "extra tool".to_owned()),
        "{}",
        results[1]
    );
    Ok(())
}

#[tokio::test]
async fn a_server_that_never_answers_fails_and_the_turn_still_runs() -> Result<()> {
    let mut hang = stdio_server(json!({"MCP_TEST_HANG": "1"}))?;
    hang["timeout"] = json!(2000);
    let home = home_with(&["text: hello"], json!({"stuck": hang}), None)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"]["status"], "finished");
    let events = summary(&messages);
    assert_eq!(
        events[1..5].to_vec(),
        vec![
            status_event(json!({"loading": true, "connected": 0, "total": 1, "tools": 0,
                "servers": [{"name": "stuck", "status": "connecting", "tools": []}]})),
            json!({"method": "event", "type": "MCPLoadingBegin", "payload": {}}),
            status_event(json!({"loading": false, "connected": 0, "total": 1, "tools": 0,
                "servers": [{"name": "stuck", "status": "failed", "tools": []}]})),
            json!({"method": "event", "type": "MCPLoadingEnd", "payload": {}}),
        ]
    );
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "hello"})]
    );
    Ok(())
}

#[tokio::test]
async fn a_server_flooding_stderr_still_works() -> Result<()> {
    let scripts = [&call("tc-1", "echo", json!({"text": "loud"}))[..], "text: done"];
    let home = home_with(
        &scripts,
        json!({"noisy": stdio_server(json!({"MCP_TEST_STDERR_FLOOD": "4000000"}))?}),
        None,
    )?
    .arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (_, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(text_output(&results(&messages)[0]), "echo:loud");
    Ok(())
}

#[tokio::test]
async fn streamable_http_servers_work() -> Result<()> {
    let mut server = tokio::process::Command::new(test_server()?)
        .arg("http")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = server.stdout.take().context("stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(READ_TIMEOUT, lines.next_line())
        .await??
        .context("no URL from the HTTP test server")?;
    let scripts = [&call("tc-1", "echo", json!({"text": "web"}))[..], "text: done"];
    let home = home_with(
        &scripts,
        json!({"web": {"url": url, "transport": "http", "headers": {"X-Test": "1"}}}),
        None,
    )?
    .arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (_, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(text_output(&results(&messages)[0]), "echo:web");
    Ok(())
}

#[tokio::test]
async fn an_oauth_server_without_tokens_is_unauthorized() -> Result<()> {
    let home = home_with(
        &["text: hi"],
        json!({"remote": {"url": "http://127.0.0.1:9/mcp", "auth": "oauth"}}),
        None,
    )?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"]["status"], "finished");
    // Loading may or may not still be running when the prompt arrives; when it reports, it says so.
    if let Some(last) = payloads(&messages, "StatusUpdate")
        .into_iter()
        .find(|s| !s["mcp_status"].is_null() && s["mcp_status"]["loading"] == json!(false))
    {
        assert_eq!(last["mcp_status"]["servers"][0]["status"], "unauthorized");
    }
    Ok(())
}

/// Pids the test server recorded in `dir` (itself and its grandchild).
fn recorded_pids(dir: &Path) -> Result<Vec<u32>> {
    let mut pids = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        pids.push(entry?.file_name().to_string_lossy().parse()?);
    }
    Ok(pids)
}

/// Starts a session with a server that also starts a grandchild, runs one call so both exist, and
/// returns the wire and the pid dir.
async fn session_with_children(scripts: &[&str]) -> Result<(WireProcess, TestHome, tempfile::TempDir)> {
    let pid_dir = tempfile::tempdir()?;
    let server = stdio_server(json!({
        "MCP_TEST_PID_DIR": pid_dir.path().to_string_lossy(),
        "MCP_TEST_GRANDCHILD": "1",
    }))?;
    let home = home_with(scripts, json!({"kids": server}), None)?.arg("--yolo");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    Ok((wire, home, pid_dir))
}

#[tokio::test]
async fn no_child_outlives_the_session_after_eof() -> Result<()> {
    let scripts = [&call("tc-1", "echo", json!({"text": "x"}))[..], "text: done"];
    let (mut wire, _home, pid_dir) = session_with_children(&scripts).await?;
    wire.prompt(json!("go")).await?;
    let pids = recorded_pids(pid_dir.path())?;
    assert_eq!(pids.len(), 2);
    assert!(pids.iter().all(|p| is_alive(*p)));
    wire.wait_exit().await?;
    let alive: Vec<u32> = pids.into_iter().filter(|p| is_alive(*p)).collect();
    assert_eq!(alive, Vec::<u32>::new());
    Ok(())
}

#[tokio::test]
async fn no_child_outlives_a_cancelled_turn_and_eof() -> Result<()> {
    let scripts = [&call("tc-1", "slow", json!({"ms": 60000}))[..], "text: done"];
    let (mut wire, _home, pid_dir) = session_with_children(&scripts).await?;
    let prompt = wire.start_prompt(json!("go")).await?;
    wire.wait_event("ToolCall").await?;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    wire.read_response(&prompt).await?;
    let pids = recorded_pids(pid_dir.path())?;
    assert_eq!(pids.len(), 2);
    wire.wait_exit().await?;
    let alive: Vec<u32> = pids.into_iter().filter(|p| is_alive(*p)).collect();
    assert_eq!(alive, Vec::<u32>::new());
    Ok(())
}

#[tokio::test]
async fn no_child_outlives_a_terminated_agent() -> Result<()> {
    let scripts = [&call("tc-1", "echo", json!({"text": "x"}))[..], "text: done"];
    let (mut wire, _home, pid_dir) = session_with_children(&scripts).await?;
    wire.prompt(json!("go")).await?;
    let pids = recorded_pids(pid_dir.path())?;
    let agent = wire.child.id().context("agent pid")?;
    let killed = std::process::Command::new("kill")
        .args(["-TERM", &agent.to_string()])
        .status()?;
    anyhow::ensure!(killed.success(), "kill failed");
    tokio::time::timeout(READ_TIMEOUT, wire.child.wait()).await??;
    let alive: Vec<u32> = pids.into_iter().filter(|p| is_alive(*p)).collect();
    assert_eq!(alive, Vec::<u32>::new());
    Ok(())
}

#[tokio::test]
async fn no_child_outlives_a_sigkilled_agent() -> Result<()> {
    let scripts = [&call("tc-1", "echo", json!({"text": "x"}))[..], "text: done"];
    let (mut wire, _home, pid_dir) = session_with_children(&scripts).await?;
    wire.prompt(json!("go")).await?;
    let pids = recorded_pids(pid_dir.path())?;
    assert_eq!(pids.len(), 2, "the server and its grandchild");
    // SIGKILL: the agent cleans up nothing; its guardian must.
    wire.child.start_kill()?;
    tokio::time::timeout(READ_TIMEOUT, wire.child.wait()).await??;
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    loop {
        let alive: Vec<u32> = pids.iter().copied().filter(|p| is_alive(*p)).collect();
        if alive.is_empty() {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "still alive after SIGKILL: {alive:?}"
        );
        // The guardian acts when it sees the pipe close, a moment after our wait returns.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn unreadable_mcp_config_is_a_usage_error() -> Result<()> {
    let home = TestHome::new()?;
    let output = home.run_cli(&["--wire", "--mcp-config", "{"]).await?;
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("Invalid value for --mcp-config: Invalid JSON: "),
        "{stderr}"
    );
    Ok(())
}

#[tokio::test]
async fn mcp_subcommands_edit_the_share_config() -> Result<()> {
    let home = TestHome::new()?;
    let file = home.share().join("mcp.json");
    let server = test_server()?;
    let server = server.to_string_lossy();
    let out = home
        .run_cli(&["mcp", "add", "--transport", "stdio", "t", "--", &server])
        .await?;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("Added MCP server 't' to {}.\n", file.display())
    );
    let out = home.run_cli(&["mcp", "list"]).await?;
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("MCP config file: {}\n  t (stdio): {server}\n", file.display())
    );
    let out = home.run_cli(&["mcp", "test", "t"]).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.starts_with("Testing connection to 't'...\n✓ Connected to 't'\n  Available tools: 8\n  Tools:\n    - echo: Echo the text back.\n"),
        "{stdout}"
    );
    let out = home.run_cli(&["mcp", "remove", "missing"]).await?;
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (Some(1), "MCP server 'missing' not found.\n".to_owned())
    );
    home.run_cli(&["mcp", "remove", "t"]).await?;
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
    assert_eq!(saved, json!({"mcpServers": {}}));
    Ok(())
}
