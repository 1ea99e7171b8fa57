//! `kimi-agent mcp add|list|remove|test|auth|reset-auth`: edit and try `<share>/mcp.json` (reference
//! `cli/mcp.py`, with its messages). Differences are listed in docs/protocol.md.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use kimi_core::mcp_discover as discover;
use kimi_core::{
    Connection, MCP_CONNECT_TIMEOUT as DEFAULT_CONNECT_TIMEOUT, mcp_authorize as authorize,
    mcp_oauth as oauth,
};
use kimi_core::{ServerConfig, Transport, mcp_config as config};
use serde_json::{Map, Value, json};

use crate::cli::{McpAddArgs, McpCommand, McpTransport};

/// A subcommand failure: its message goes to stderr and the exit status is 1.
struct Failure(String);

type Outcome = Result<(), Failure>;

/// Runs an `mcp` subcommand against `<share_dir>/mcp.json`.
pub fn run(command: &McpCommand, share_dir: &Path) -> ExitCode {
    let file = kimi_core::paths::mcp_config_file(share_dir);
    let result = match command {
        McpCommand::Add(args) => add(&file, args),
        McpCommand::List => list(&file, share_dir),
        McpCommand::Remove { name } => remove(&file, name),
        McpCommand::Test { name } => test(&file, share_dir, name),
        McpCommand::Auth { name } => auth(&file, share_dir, name),
        McpCommand::ResetAuth { name } => reset_auth(&file, share_dir, name),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(message)) => {
            eprint_line(&message);
            ExitCode::FAILURE
        }
    }
}

#[expect(
    clippy::print_stdout,
    reason = "the mcp subcommands' output is for the terminal"
)]
fn say(line: &str) {
    println!("{line}");
}

#[expect(
    clippy::print_stderr,
    reason = "the mcp subcommands' errors are for the terminal"
)]
fn eprint_line(line: &str) {
    eprintln!("{line}");
}

/// The whole file as JSON, `{"mcpServers": {}}` when it does not exist; checked as an MCP config.
fn load(file: &Path) -> Result<Map<String, Value>, Failure> {
    let text = match std::fs::read_to_string(file) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut empty = Map::new();
            empty.insert("mcpServers".into(), json!({}));
            return Ok(empty);
        }
        Err(e) => {
            return Err(Failure(format!(
                "Cannot read MCP config file '{}': {e}",
                file.display()
            )));
        }
    };
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        Failure(format!(
            "Invalid JSON in MCP config file '{}': {e}",
            file.display()
        ))
    })?;
    if let Err(e) = config::parse_one(&value) {
        return Err(Failure(format!(
            "Invalid MCP config in '{}': {}",
            file.display(),
            e.0
        )));
    }
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(Failure(format!("Invalid MCP config in '{}'", file.display()))),
    }
}

fn save(file: &Path, config: &Map<String, Value>) -> Outcome {
    // Private: server entries may carry tokens in `env` or `headers`.
    let write = || -> std::io::Result<()> {
        let text = serde_json::to_string_pretty(config).map_err(std::io::Error::other)?;
        kimi_core::private_files::write_atomic(file, text.as_bytes())
    };
    write().map_err(|e| Failure(format!("Cannot write MCP config file '{}': {e}", file.display())))
}

/// Applies `edit` to the `mcpServers` object, creating it (in place) when missing or not an object.
fn edit_servers(config: &mut Map<String, Value>, edit: impl FnOnce(&mut Map<String, Value>)) {
    let slot = config
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    if !slot.is_object() {
        *slot = Value::Object(Map::new());
    }
    if let Value::Object(servers) = slot {
        edit(servers);
    }
}

/// The server called `name`; with `require_remote`, it must have a `url`.
fn server(file: &Path, name: &str, require_remote: bool) -> Result<Map<String, Value>, Failure> {
    let config = load(file)?;
    let Some(Value::Object(server)) = config.get("mcpServers").and_then(|s| s.get(name)).cloned() else {
        return Err(Failure(format!("MCP server '{name}' not found.")));
    };
    if require_remote && !server.contains_key("url") {
        return Err(Failure(format!("MCP server '{name}' is not a remote server.")));
    }
    Ok(server)
}

fn key_values(
    items: &[String],
    option: &str,
    separator: char,
    strip: bool,
) -> Result<Map<String, Value>, Failure> {
    let mut parsed = Map::new();
    for item in items {
        let Some((key, value)) = item.split_once(separator) else {
            return Err(Failure(format!(
                "Invalid {option} format: {item} (expected KEY{separator}VALUE)."
            )));
        };
        let (key, value) = if strip {
            (key.trim(), value.trim())
        } else {
            (key, value)
        };
        if key.is_empty() {
            return Err(Failure(format!("Invalid {option} format: {item} (empty key).")));
        }
        parsed.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    Ok(parsed)
}

fn add(file: &Path, args: &McpAddArgs) -> Outcome {
    let mut config = load(file)?;
    let mut server = Map::new();
    match args.transport {
        McpTransport::Stdio => {
            let Some((command, rest)) = args.target.split_first() else {
                return Err(Failure(
                    "For stdio transport, provide the command to start the MCP server after `--`.".into(),
                ));
            };
            if !args.headers.is_empty() {
                return Err(Failure("--header is only valid for http transport.".into()));
            }
            if args.auth.is_some() {
                return Err(Failure("--auth is only valid for http transport.".into()));
            }
            server.insert("command".into(), json!(command));
            server.insert("args".into(), json!(rest));
            if !args.env.is_empty() {
                server.insert(
                    "env".into(),
                    Value::Object(key_values(&args.env, "env", '=', false)?),
                );
            }
        }
        McpTransport::Http => {
            if !args.env.is_empty() {
                return Err(Failure("--env is only supported for stdio transport.".into()));
            }
            let url = match args.target.as_slice() {
                [] => return Err(Failure("URL is required for http transport.".into())),
                [url] => url,
                _ => {
                    return Err(Failure(
                        "Multiple targets provided. Supply a single URL for http transport.".into(),
                    ));
                }
            };
            server.insert("url".into(), json!(url));
            server.insert("transport".into(), json!("http"));
            if !args.headers.is_empty() {
                server.insert(
                    "headers".into(),
                    Value::Object(key_values(&args.headers, "header", ':', true)?),
                );
            }
            if let Some(auth) = &args.auth {
                server.insert("auth".into(), json!(auth));
            }
        }
    }
    edit_servers(&mut config, |servers| {
        servers.insert(args.name.clone(), Value::Object(server));
    });
    save(file, &config)?;
    say(&format!(
        "Added MCP server '{}' to {}.",
        args.name,
        file.display()
    ));
    Ok(())
}

fn remove(file: &Path, name: &str) -> Outcome {
    server(file, name, false)?;
    let mut config = load(file)?;
    edit_servers(&mut config, |servers| {
        servers.shift_remove(name);
    });
    save(file, &config)?;
    say(&format!("Removed MCP server '{name}' from {}.", file.display()));
    Ok(())
}

fn list(file: &Path, share_dir: &Path) -> Outcome {
    let config = load(file)?;
    say(&format!("MCP config file: {}", file.display()));
    let servers = config
        .get("mcpServers")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let discovered = discovery(share_dir);
    if servers.is_empty() && discovered.is_none() {
        say("No MCP servers configured.");
        return Ok(());
    }
    if servers.is_empty() {
        say("No MCP servers configured.");
    }
    for (name, server) in &servers {
        let line = if let Some(command) = server.get("command") {
            let args: Vec<String> = server
                .get("args")
                .and_then(Value::as_array)
                .map(|a| a.iter().map(text).collect())
                .unwrap_or_default();
            format!("{name} (stdio): {} {}", text(command), args.join(" "))
                .trim_end()
                .to_owned()
        } else if let Some(url) = server.get("url") {
            let url = text(url);
            let transport = match server.get("transport").and_then(Value::as_str) {
                None | Some("" | "streamable-http") => "http",
                Some(other) => other,
            };
            let mut line = format!("{name} ({transport}): {url}");
            if server.get("auth").and_then(Value::as_str) == Some("oauth")
                && !oauth::has_tokens(share_dir, &url)
            {
                line.push_str(&format!(
                    " [authorization required - run: kimi-agent mcp auth {name}]"
                ));
            }
            line
        } else {
            format!("{name}: {server}")
        };
        say(&format!("  {line}"));
    }
    if let Some(found) = discovered {
        list_discovered(&found, &servers);
    }
    Ok(())
}

/// What `mcp_discover = true` in `<share>/config.toml` finds in the working directory, or `None` when
/// discovery is off (or the configuration cannot be read, as the agent would not start then).
fn discovery(share_dir: &Path) -> Option<discover::Discovery> {
    let config = kimi_core::load_config_in(&kimi_core::ConfigSource::Default, share_dir).ok()?;
    if !config.mcp_discover {
        return None;
    }
    let home = kimi_core::paths::home_dir()?;
    let work_dir = std::env::current_dir().ok()?;
    Some(discover::discover(&home, &work_dir))
}

/// The discovered servers, each with the file it came from; those whose name `ours` (or an earlier
/// file) already has are marked as not loaded. Skipped files and entries are warned about on stderr.
fn list_discovered(found: &discover::Discovery, ours: &Map<String, Value>) {
    say("Discovered (mcp_discover = true):");
    if found.servers.is_empty() {
        say("  none");
    }
    let mut seen: Vec<&str> = ours.keys().map(String::as_str).collect();
    for server in &found.servers {
        let name = server.server.name.as_str();
        let mut line = match &server.server.transport {
            Transport::Stdio { command, args, .. } => format!("{name} (stdio): {command} {}", args.join(" "))
                .trim_end()
                .to_owned(),
            _ => name.to_owned(),
        };
        line.push_str(&format!("  [from {}", server.origin.display()));
        if seen.contains(&name) {
            line.push_str("; not loaded: a server of this name comes first");
        }
        line.push(']');
        seen.push(name);
        say(&format!("  {line}"));
    }
    for warning in &found.warnings {
        eprint_line(&format!("Warning: {warning}"));
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The server called `name`, parsed as the agent would load it.
fn parsed_server(name: &str, raw: Map<String, Value>) -> Result<ServerConfig, Failure> {
    let mut document = Map::new();
    document.insert("mcpServers".into(), json!({ name: raw }));
    let parsed = config::parse_one(&Value::Object(document)).map_err(|e| Failure(e.to_string()))?;
    parsed
        .into_iter()
        .next()
        .ok_or_else(|| Failure(format!("MCP server '{name}' not found.")))
}

fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure(format!("cannot start the async runtime: {e}")))
}

/// Connects to `server`, lists its tools (name and description) and disconnects, within its connect
/// timeout.
async fn list_tools(server: &ServerConfig, share_dir: &Path) -> Result<Vec<(String, String)>, String> {
    let timeout = server.timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    let tools = async {
        let connection = Connection::connect(
            &server.name,
            &server.transport,
            share_dir,
            timeout,
            Arc::new(tokio::sync::Notify::new()),
        )
        .await?;
        let tools = connection.list_tools().await;
        connection.shutdown().await;
        tools
    };
    match tokio::time::timeout(timeout, tools).await {
        Ok(Ok(tools)) => Ok(tools
            .into_iter()
            .map(|t| {
                (
                    t.name.into_owned(),
                    t.description.unwrap_or_default().into_owned(),
                )
            })
            .collect()),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err(format!("timed out after {} ms", timeout.as_millis())),
    }
}

fn test(file: &Path, share_dir: &Path, name: &str) -> Outcome {
    let server = parsed_server(name, server(file, name, false)?)?;
    say(&format!("Testing connection to '{name}'..."));
    runtime()?.block_on(async {
        let tools = list_tools(&server, share_dir)
            .await
            .map_err(|e| Failure(format!("✗ Connection failed: {e}")))?;
        say(&format!("✓ Connected to '{name}'"));
        say(&format!("  Available tools: {}", tools.len()));
        if !tools.is_empty() {
            say("  Tools:");
            for (tool, description) in &tools {
                let description = if description.chars().count() > 50 {
                    format!("{}...", description.chars().take(47).collect::<String>())
                } else {
                    description.to_owned()
                };
                say(&format!("    - {tool}: {description}"));
            }
        }
        Ok(())
    })
}

/// The OAuth authorization-code flow (reference: fastmcp's `OAuth` behind `kimi mcp auth`), then a
/// connection that proves the tokens work, as the reference's listing of the tools does.
fn auth(file: &Path, share_dir: &Path, name: &str) -> Outcome {
    let raw = server(file, name, true)?;
    if raw.get("auth").and_then(Value::as_str) != Some("oauth") {
        return Err(Failure(format!(
            "MCP server '{name}' does not use OAuth. Add with --auth oauth."
        )));
    }
    let url = raw.get("url").map(text).unwrap_or_default();
    let server = parsed_server(name, raw)?;
    let failed = |e: &dyn std::fmt::Display| Failure(format!("Authorization failed: {e}"));
    say(&format!("Authorizing with '{name}'..."));
    runtime()?.block_on(async {
        let pending = authorize::begin(share_dir, &url).await.map_err(|e| failed(&e))?;
        if super::browser::open(pending.url(), super::browser::When::AtTerminal) {
            say("A browser window will open for authorization. If it does not, open this URL:");
        } else {
            say("Open this URL in a browser to authorize:");
        }
        say(&format!("  {}", pending.url()));
        say(&format!(
            "Waiting for the authorization callback on {} ...",
            pending.redirect_uri()
        ));
        pending
            .finish(authorize::CALLBACK_TIMEOUT)
            .await
            .map_err(|e| failed(&e))?;
        let tools = list_tools(&server, share_dir).await.map_err(|e| failed(&e))?;
        say(&format!("Successfully authorized with '{name}'."));
        say(&format!("Available tools: {}", tools.len()));
        Ok(())
    })
}

fn reset_auth(file: &Path, share_dir: &Path, name: &str) -> Outcome {
    let server = server(file, name, true)?;
    let url = server.get("url").map(text).unwrap_or_default();
    oauth::clear_tokens(share_dir, &url).map_err(|e| Failure(format!("Failed to clear tokens: {e}")))?;
    say(&format!("OAuth tokens cleared for '{name}'."));
    Ok(())
}
