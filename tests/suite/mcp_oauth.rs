//! OAuth for remote MCP servers against `mcp_test_server oauth`, an MCP server that is also its own
//! authorization server: `mcp auth` end to end (the test plays the browser), the stored tokens used by
//! a wire session, an expired token refreshed and stored, and a refused refresh leaving the server
//! `unauthorized` while the turn runs.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use super::mcp::{call, home_with, init, results, test_server, text_output};
use super::mcp_discovery::Gate;
use crate::common::{READ_TIMEOUT, TestHome, WireProcess, md5_hex, payloads};

/// A running `mcp_test_server oauth` and its MCP URL; killed when dropped.
struct OAuthServer {
    _child: tokio::process::Child,
    url: String,
}

async fn start_server(env: &[(&str, &str)]) -> Result<OAuthServer> {
    let mut child = tokio::process::Command::new(test_server()?)
        .arg("oauth")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().context("stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let url = tokio::time::timeout(READ_TIMEOUT, lines.next_line())
        .await??
        .context("no URL from the OAuth test server")?;
    Ok(OAuthServer { _child: child, url })
}

fn token_file(share: &Path, url: &str) -> PathBuf {
    share
        .join("mcp-oauth")
        .join(format!("{}.json", md5_hex(url.trim_end_matches('/').as_bytes())))
}

fn read_tokens(share: &Path, url: &str) -> Result<Value> {
    Ok(serde_json::from_str(&std::fs::read_to_string(token_file(
        share, url,
    ))?)?)
}

fn write_tokens(share: &Path, url: &str, tokens: &Value) -> Result<()> {
    let file = token_file(share, url);
    std::fs::create_dir_all(file.parent().context("token dir")?)?;
    std::fs::write(file, tokens.to_string())?;
    Ok(())
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// A plain HTTP/1.1 GET (no redirects followed): the status code and the `Location` header, if any.
async fn http_get(url: &str) -> Result<(u16, Option<String>)> {
    let rest = url.strip_prefix("http://").context("not an http URL")?;
    let (host, target) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let target = if target.is_empty() { "/" } else { target };
    let mut stream = tokio::net::TcpStream::connect(host).await?;
    stream
        .write_all(format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    tokio::time::timeout(READ_TIMEOUT, stream.read_to_string(&mut response)).await??;
    let mut lines = response.lines();
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .context("no status line")?
        .parse()?;
    let location = lines
        .take_while(|l| !l.is_empty())
        .find_map(|l| {
            l.split_once(':')
                .filter(|(name, _)| name.eq_ignore_ascii_case("location"))
        })
        .map(|(_, value)| value.trim().to_owned());
    Ok((status, location))
}

/// Runs `kimi-agent mcp auth <name>` and plays the browser: opens the printed URL, follows the
/// authorization server's redirect to the loopback listener. Returns the command's stdout and status.
async fn authorize(home: &TestHome, name: &str) -> Result<(String, std::process::ExitStatus)> {
    let args = ["mcp".to_owned(), "auth".to_owned(), name.to_owned()];
    let mut child = home
        .command(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = tokio::io::BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut printed = String::new();
    let auth_url = loop {
        let line = tokio::time::timeout(READ_TIMEOUT, lines.next_line())
            .await??
            .with_context(|| format!("no authorization URL printed:\n{printed}"))?;
        printed.push_str(&line);
        printed.push('\n');
        if let Some(url) = line.strip_prefix("  http") {
            break format!("http{url}");
        }
    };
    let (status, location) = http_get(&auth_url).await?;
    assert_eq!(status, 302, "{auth_url}");
    let callback = location.context("no redirect from /authorize")?;
    assert!(callback.starts_with("http://127.0.0.1:"), "{callback}");
    let (status, _) = http_get(&callback).await?;
    assert_eq!(status, 200);
    while let Some(line) = tokio::time::timeout(READ_TIMEOUT, lines.next_line()).await?? {
        printed.push_str(&line);
        printed.push('\n');
    }
    let status = tokio::time::timeout(READ_TIMEOUT, child.wait()).await??;
    Ok((printed, status))
}

#[tokio::test]
async fn mcp_auth_stores_tokens_that_a_wire_session_uses() -> Result<()> {
    let server = start_server(&[]).await?;
    let scripts = [
        &call("tc-1", "echo", json!({"text": "signed in"}))[..],
        "text: done",
    ];
    let home = TestHome::new()?.scripted(&scripts)?.arg("--yolo");
    let added = home
        .run_cli(&[
            "mcp",
            "add",
            "--transport",
            "http",
            "--auth",
            "oauth",
            "remote",
            &server.url,
        ])
        .await?;
    assert!(added.status.success());
    let listed = home.run_cli(&["mcp", "list"]).await?;
    assert!(
        String::from_utf8_lossy(&listed.stdout)
            .contains("[authorization required - run: kimi-agent mcp auth remote]")
    );

    let (stdout, status) = authorize(&home, "remote").await?;
    assert!(status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines[0], "Authorizing with 'remote'...");
    assert_eq!(lines[1], "Open this URL in a browser to authorize:");
    assert_eq!(
        lines[lines.len() - 2..],
        ["Successfully authorized with 'remote'.", "Available tools: 8"]
    );

    let file = token_file(&home.share(), &server.url);
    let mode = std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file)?.permissions());
    assert_eq!(mode & 0o777, 0o600);
    let tokens = read_tokens(&home.share(), &server.url)?;
    assert!(
        tokens["access_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("access-")),
        "{tokens}"
    );
    assert!(
        tokens["refresh_token"]
            .as_str()
            .is_some_and(|t| t.starts_with("refresh-")),
        "{tokens}"
    );
    assert_eq!(tokens["client_id"], "client-1");
    assert!(
        tokens["expires_at"].as_u64().is_some_and(|at| at > now()),
        "{tokens}"
    );
    let listed = home.run_cli(&["mcp", "list"]).await?;
    assert!(!String::from_utf8_lossy(&listed.stdout).contains("authorization required"));

    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"]["status"], "finished");
    assert_eq!(text_output(&results(&messages)[0]), "echo:signed in");
    Ok(())
}

#[tokio::test]
async fn an_expired_token_is_refreshed_and_stored() -> Result<()> {
    let server = start_server(&[]).await?;
    let scripts = [&call("tc-1", "echo", json!({"text": "fresh"}))[..], "text: done"];
    let home = home_with(
        &scripts,
        json!({"remote": {"url": server.url, "auth": "oauth"}}),
        None,
    )?
    .arg("--yolo");
    // A token the server never issued, expired long ago: only a refresh gets the session in.
    write_tokens(
        &home.share(),
        &server.url,
        &json!({"access_token": "stale", "refresh_token": "refresh-old", "expires_at": 1,
            "client_id": "client-old"}),
    )?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let (_, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(text_output(&results(&messages)[0]), "echo:fresh");
    let tokens = read_tokens(&home.share(), &server.url)?;
    assert_eq!(
        (
            &tokens["access_token"],
            &tokens["refresh_token"],
            &tokens["client_id"]
        ),
        (&json!("access-1"), &json!("refresh-1"), &json!("client-old"))
    );
    assert!(
        tokens["expires_at"].as_u64().is_some_and(|at| at > now()),
        "{tokens}"
    );
    Ok(())
}

#[tokio::test]
async fn a_refused_refresh_leaves_the_server_unauthorized_and_the_turn_runs() -> Result<()> {
    // The refresh is held until the turn waits for the server, so its `mcp_status` is always there.
    let gate = Gate::new()?;
    let gate_path = gate.path().to_string_lossy().into_owned();
    let server = start_server(&[
        ("MCP_TEST_OAUTH_REFRESH", "reject"),
        ("MCP_TEST_TOKEN_GATE", gate_path.as_str()),
    ])
    .await?;
    let home = home_with(
        &["text: hello"],
        json!({"remote": {"url": server.url, "auth": "oauth"}}),
        None,
    )?;
    write_tokens(
        &home.share(),
        &server.url,
        &json!({"access_token": "stale", "refresh_token": "refresh-old", "expires_at": 1,
            "client_id": "client-old"}),
    )?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init()).await?;
    let id = wire.start_prompt(json!("hi")).await?;
    let (_, mut messages) = wire
        .read_until(|m| m["params"]["type"] == "MCPLoadingBegin")
        .await?;
    let _open = gate.open().await?;
    let (response, rest) = wire
        .read_until(|m| m.get("id").and_then(Value::as_str) == Some(id.as_str()) && m.get("method").is_none())
        .await?;
    messages.extend(rest);
    assert_eq!(response["result"]["status"], "finished");
    let loaded = payloads(&messages, "StatusUpdate")
        .into_iter()
        .find(|s| s["mcp_status"]["loading"] == json!(false))
        .context("no StatusUpdate after MCP loading")?;
    assert_eq!(
        loaded["mcp_status"],
        json!({"loading": false, "connected": 0, "total": 1, "tools": 0,
            "servers": [{"name": "remote", "status": "unauthorized", "tools": []}]})
    );
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "hello"})]
    );
    // The refused tokens are kept: `mcp auth` replaces them, `mcp reset-auth` removes them.
    assert_eq!(read_tokens(&home.share(), &server.url)?["access_token"], "stale");
    Ok(())
}

#[tokio::test]
async fn mcp_auth_refuses_a_server_without_oauth() -> Result<()> {
    let home = TestHome::new()?;
    home.run_cli(&[
        "mcp",
        "add",
        "--transport",
        "http",
        "plain",
        "http://127.0.0.1:9/mcp",
    ])
    .await?;
    let out = home.run_cli(&["mcp", "auth", "plain"]).await?;
    assert_eq!(
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned()
        ),
        (
            Some(1),
            "MCP server 'plain' does not use OAuth. Add with --auth oauth.\n".to_owned()
        )
    );
    Ok(())
}
