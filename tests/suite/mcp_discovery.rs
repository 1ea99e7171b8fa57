//! MCP servers configured for other agents (seeds/003), behind `mcp_discover = true`: found in
//! `~/.claude.json` and `~/.codex/config.toml`, ours winning on a name clash, a broken file skipped with
//! a warning, `mcp list` naming where each came from; and `mcp_tool_names = "prefixed"`.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::mcp::test_server;
use crate::common::{
    READ_TIMEOUT, TestHome, WireProcess, approval_answer, md5_hex, payloads, tool_call_line,
};

/// A named pipe every test server of a test opens before it answers: the servers stay connecting
/// until [`run`] has seen the turn begin loading them, so the turn's `mcp_status` is always there.
pub(super) struct Gate {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Gate {
    pub(super) fn new() -> Result<Self> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("gate");
        let made = std::process::Command::new("mkfifo").arg(&path).status()?;
        anyhow::ensure!(made.success(), "mkfifo failed");
        Ok(Self { _dir: dir, path })
    }

    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// The test server as a stdio entry held at this gate.
    fn server(&self) -> Result<Value> {
        Ok(json!({
            "command": test_server()?.to_string_lossy(),
            "args": [],
            "env": {"MCP_TEST_GATE": self.path.to_string_lossy()},
        }))
    }

    /// The codex entry for the test server held at this gate.
    fn codex_entry(&self, name: &str) -> Result<String> {
        Ok(format!(
            "model = \"o3\"\n\n[mcp_servers.{name}]\ncommand = {:?}\nargs = []\nenv = {{ MCP_TEST_GATE = {:?} }}\n",
            test_server()?.to_string_lossy(),
            self.path.to_string_lossy()
        ))
    }

    /// Opens the writing end, letting every server through; they pass as long as it is held.
    pub(super) async fn open(&self) -> Result<std::fs::File> {
        let path = self.path.clone();
        let writer = tokio::task::spawn_blocking(move || std::fs::OpenOptions::new().write(true).open(path));
        Ok(tokio::time::timeout(READ_TIMEOUT, writer).await???)
    }
}

/// A home with `claude` as `~/.claude.json` and `codex` as `~/.codex/config.toml` (when given), `ours`
/// as the MCP config file, and `extra` merged into the config (with the scripted provider).
fn home(
    scripts: &[&str],
    claude: Option<&str>,
    codex: Option<&str>,
    ours: Value,
    extra: Value,
) -> Result<TestHome> {
    let home = TestHome::new()?;
    if let Some(text) = claude {
        std::fs::write(home.home().join(".claude.json"), text)?;
    }
    if let Some(text) = codex {
        std::fs::create_dir_all(home.home().join(".codex"))?;
        std::fs::write(home.home().join(".codex/config.toml"), text)?;
    }
    let path = home.scripted_config(scripts, json!({}))?;
    let mut config: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    for (key, value) in extra.as_object().into_iter().flatten() {
        config[key] = value.clone();
    }
    let home = home.with_config(&config)?;
    let mcp = home.root.path().join("mcp.json");
    std::fs::write(&mcp, serde_json::to_string(&json!({"mcpServers": ours}))?)?;
    Ok(home.arg("--mcp-config-file").arg(&mcp.to_string_lossy()))
}

/// Runs one prompt answering approvals, letting the servers through `gate` once the turn waits for
/// them; returns its messages.
async fn run(home: &TestHome, gate: &Gate) -> Result<Vec<Value>> {
    let mut wire = WireProcess::spawn(home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let id = wire.start_prompt(json!("go")).await?;
    let (begin, mut messages) = wire
        .read_until(|m| m["params"]["type"] == "MCPLoadingBegin")
        .await?;
    messages.push(begin);
    let _open = gate.open().await?;
    loop {
        let (found, skipped) = wire
            .read_until(|m| {
                m.get("id").and_then(Value::as_str) == Some(id.as_str()) && m.get("method").is_none()
                    || m["params"]["type"] == "ApprovalRequest"
            })
            .await?;
        messages.extend(skipped);
        if found["method"] == "request" {
            wire.send(&approval_answer(&found, "approve")).await?;
            messages.push(found);
            continue;
        }
        return Ok(messages);
    }
}

/// The servers of the last `mcp_status`: `(name, status, tool count)`.
fn servers(messages: &[Value]) -> Vec<(String, String, usize)> {
    let status = payloads(messages, "StatusUpdate")
        .into_iter()
        .rfind(|p| !p["mcp_status"].is_null())
        .map(|p| p["mcp_status"]["servers"].clone())
        .unwrap_or_default();
    status
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_owned(),
                s["status"].as_str().unwrap_or_default().to_owned(),
                s["tools"].as_array().map_or(0, Vec::len),
            )
        })
        .collect()
}

#[tokio::test]
async fn servers_of_both_files_load_beside_ours_and_ours_win_a_clash() -> Result<()> {
    let gate = Gate::new()?;
    let claude = json!({"mcpServers": {
        "shared": {"type": "stdio", "command": "/nonexistent/theirs"},
        "from_claude": gate.server()?,
        "remote": {"type": "http", "url": "https://example.invalid/mcp"},
    }})
    .to_string();
    let codex = gate.codex_entry("from_codex")?;
    let call = format!(
        "text: go\n{}",
        tool_call_line("tc-1", "echo", Some(r#"{"text": "hi"}"#))
    );
    let home = home(
        &[&call, "text: done"],
        Some(&claude),
        Some(&codex),
        json!({"shared": gate.server()?}),
        json!({"mcp_discover": true}),
    )?;
    let messages = run(&home, &gate).await?;
    // Ours first (its tools registered), then the discovered ones, connected (their tools share the
    // names of ours, so with plain names they are left out); the remote entry is not discovered.
    assert_eq!(
        servers(&messages),
        [
            ("shared".to_owned(), "connected".to_owned(), 8),
            ("from_claude".to_owned(), "connected".to_owned(), 0),
            ("from_codex".to_owned(), "connected".to_owned(), 0),
        ]
    );
    let result = &payloads(&messages, "ToolResult")[0]["return_value"];
    assert_eq!(result["output"], json!([{"type": "text", "text": "echo:hi"}]));
    Ok(())
}

#[tokio::test]
async fn discovery_is_off_by_default() -> Result<()> {
    let gate = Gate::new()?;
    let claude = json!({"mcpServers": {"from_claude": gate.server()?}}).to_string();
    let home = home(
        &["text: done"],
        Some(&claude),
        None,
        json!({"ours": gate.server()?}),
        json!({}),
    )?;
    let messages = run(&home, &gate).await?;
    assert_eq!(
        servers(&messages),
        [("ours".to_owned(), "connected".to_owned(), 8)]
    );
    Ok(())
}

#[tokio::test]
async fn a_broken_file_is_skipped_with_a_warning_and_the_other_still_loads() -> Result<()> {
    let gate = Gate::new()?;
    let claude = json!({"mcpServers": {"from_claude": gate.server()?}}).to_string();
    let home = home(
        &["text: done"],
        Some(&claude),
        Some("[mcp_servers.broken\ncommand = "),
        json!({}),
        json!({"mcp_discover": true}),
    )?;
    let messages = run(&home, &gate).await?;
    assert_eq!(
        servers(&messages),
        [("from_claude".to_owned(), "connected".to_owned(), 8)]
    );
    let log = std::fs::read_to_string(home.share().join("logs/kimi.log"))?;
    assert!(
        log.contains("mcp_discover:") && log.contains(".codex/config.toml: not valid TOML"),
        "no warning in the log:\n{log}"
    );
    Ok(())
}

#[tokio::test]
async fn mcp_list_shows_where_each_server_came_from() -> Result<()> {
    let home = TestHome::new()?;
    let claude = json!({"mcpServers": {
        "shared": {"command": "their-shared"},
        "from_claude": {"command": "claude-server", "args": ["--stdio"]},
    }})
    .to_string();
    std::fs::write(home.home().join(".claude.json"), claude)?;
    std::fs::create_dir_all(home.home().join(".codex"))?;
    std::fs::write(
        home.home().join(".codex/config.toml"),
        "[mcp_servers.from_codex]\ncommand = \"codex-server\"\n",
    )?;
    std::fs::write(
        home.share().join("mcp.json"),
        json!({"mcpServers": {"shared": {"command": "our-shared"}}}).to_string(),
    )?;
    // Off: the reference's listing, nothing discovered.
    let off = home.run_cli(&["mcp", "list"]).await?;
    let mcp_json = home.share().join("mcp.json");
    assert_eq!(
        String::from_utf8(off.stdout)?,
        format!(
            "MCP config file: {}\n  shared (stdio): our-shared\n",
            mcp_json.display()
        )
    );
    std::fs::write(home.share().join("config.toml"), "mcp_discover = true\n")?;
    let on = home.run_cli(&["mcp", "list"]).await?;
    assert!(on.status.success());
    let claude = home.home().join(".claude.json");
    let codex = home.home().join(".codex/config.toml");
    assert_eq!(
        String::from_utf8(on.stdout)?,
        format!(
            "MCP config file: {}\n  shared (stdio): our-shared\nDiscovered (mcp_discover = true):\n  \
             shared (stdio): their-shared  [from {claude}; not loaded: a server of this name comes first]\n  \
             from_claude (stdio): claude-server --stdio  [from {claude}]\n  \
             from_codex (stdio): codex-server  [from {codex}]\n",
            mcp_json.display(),
            claude = claude.display(),
            codex = codex.display(),
        )
    );
    // A broken file: skipped, with a warning on stderr.
    std::fs::write(&codex, "not = [toml")?;
    let broken = home.run_cli(&["mcp", "list"]).await?;
    assert!(broken.status.success());
    let stderr = String::from_utf8(broken.stderr)?;
    assert!(
        stderr.starts_with(&format!("Warning: {}: not valid TOML", codex.display())),
        "{stderr}"
    );
    assert!(!String::from_utf8(broken.stdout)?.contains("from_codex"));
    Ok(())
}

#[tokio::test]
async fn prefixed_names_keep_servers_apart() -> Result<()> {
    let gate = Gate::new()?;
    let claude = json!({"mcpServers": {"from_claude": gate.server()?}}).to_string();
    let calls = format!(
        "text: go\n{}\n{}\n{}",
        tool_call_line("tc-1", "mcp__test__echo", Some(r#"{"text": "ours"}"#)),
        tool_call_line("tc-2", "mcp__from_claude__echo", Some(r#"{"text": "theirs"}"#)),
        tool_call_line("tc-3", "echo", Some(r#"{"text": "plain"}"#)),
    );
    let home = home(
        &[&calls, "text: done"],
        Some(&claude),
        None,
        json!({"test": gate.server()?}),
        json!({"mcp_discover": true, "mcp_tool_names": "prefixed"}),
    )?;
    let messages = run(&home, &gate).await?;
    assert_eq!(
        servers(&messages),
        [
            ("test".to_owned(), "connected".to_owned(), 8),
            ("from_claude".to_owned(), "connected".to_owned(), 8),
        ]
    );
    let status = payloads(&messages, "StatusUpdate")
        .into_iter()
        .rfind(|p| !p["mcp_status"].is_null())
        .context("no mcp_status")?;
    assert_eq!(
        status["mcp_status"]["servers"][0]["tools"][0],
        json!("mcp__test__echo")
    );
    let result = |id: &str| {
        payloads(&messages, "ToolResult")
            .into_iter()
            .find(|p| p["tool_call_id"] == id)
            .map(|p| p["return_value"].clone())
            .unwrap_or_default()
    };
    assert_eq!(
        result("tc-1")["output"],
        json!([{"type": "text", "text": "echo:ours"}])
    );
    assert_eq!(
        result("tc-2")["output"],
        json!([{"type": "text", "text": "echo:theirs"}])
    );
    assert_eq!(result("tc-3")["message"], json!("Tool `echo` not found"));
    // Approval is asked per prefixed name.
    let actions: Vec<&Value> = messages
        .iter()
        .filter(|m| m["params"]["type"] == "ApprovalRequest")
        .map(|m| &m["params"]["payload"]["action"])
        .collect();
    assert_eq!(
        actions,
        [
            &json!("mcp:mcp__test__echo"),
            &json!("mcp:mcp__from_claude__echo")
        ]
    );
    Ok(())
}

#[tokio::test]
async fn a_prefixed_name_over_64_characters_is_cut_to_one_the_model_api_accepts() -> Result<()> {
    let gate = Gate::new()?;
    // `mcp__<55 characters>__echo` is 66 characters long: past the model APIs' 64.
    let server = "a_server_whose_name_is_long_enough_to_pass_the_limit_00";
    let full = format!("mcp__{server}__echo");
    assert_eq!(full.len(), 66);
    let digest = md5_hex(full.as_bytes());
    let cut = format!("{}_{}", &full[..55], &digest[..8]);
    let home = home(
        &[
            &tool_call_line("tc-1", &cut, Some(r#"{"text": "long"}"#)),
            "text: done",
        ],
        None,
        None,
        json!({server: gate.server()?}),
        json!({"mcp_tool_names": "prefixed"}),
    )?;
    let messages = run(&home, &gate).await?;
    let status = payloads(&messages, "StatusUpdate")
        .into_iter()
        .rfind(|p| !p["mcp_status"].is_null())
        .context("no mcp_status")?;
    let tools = &status["mcp_status"]["servers"][0]["tools"];
    assert!(
        tools
            .as_array()
            .is_some_and(|t| t.iter().all(|n| n.as_str().is_some_and(|n| n.len() <= 64))),
        "{tools}"
    );
    assert_eq!(tools[0], json!(cut));
    let result = &payloads(&messages, "ToolResult")[0]["return_value"];
    assert_eq!(result["output"], json!([{"type": "text", "text": "echo:long"}]));
    Ok(())
}
