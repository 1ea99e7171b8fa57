//! MCP servers configured for other agents (seeds/003), loaded beside ours when the configuration says
//! `mcp_discover = true`:
//!
//! - `~/.claude.json`: the stdio servers of its top-level `mcpServers` (Claude Code's user scope) and of
//!   `projects["<work dir>"].mcpServers` (its local scope for this project);
//! - `~/.codex/config.toml`: every `[mcp_servers.<name>]` with a `command`, unless `enabled = false`
//!   (`startup_timeout_sec` / `startup_timeout_ms` become the connect timeout).
//!
//! Only stdio servers (`command`, `args`, `env`, `cwd`): remote ones there usually need the other
//! agent's own credentials. A file that cannot be read or parsed, or an entry that does not make a
//! server, is skipped with a warning; a missing file is not a warning. [`merge`] puts ours first: a
//! discovered server whose name we already have is left out, as is a Codex server with the name of a
//! Claude one.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::config::{self, ServerConfig};

/// A discovered server and the file it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The server.
    pub server: ServerConfig,
    /// `~/.claude.json` or `~/.codex/config.toml`.
    pub origin: PathBuf,
}

/// What discovery found, and what it had to skip.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Discovery {
    /// The servers, Claude's first, each file's in its order.
    pub servers: Vec<Found>,
    /// One line per skipped file or entry.
    pub warnings: Vec<String>,
}

/// Claude Code's configuration, under `home`.
pub fn claude_file(home: &Path) -> PathBuf {
    home.join(".claude.json")
}

/// Codex's configuration, under `home`.
pub fn codex_file(home: &Path) -> PathBuf {
    home.join(".codex").join("config.toml")
}

/// The stdio servers of both files under `home`; `work_dir` picks Claude's project entry.
pub fn discover(home: &Path, work_dir: &Path) -> Discovery {
    let mut found = Discovery::default();
    let claude = claude_file(home);
    if let Some(text) = read(&claude, &mut found.warnings) {
        match serde_json::from_str::<Value>(&text) {
            Ok(root) => claude_servers(&root, work_dir, &claude, &mut found),
            Err(e) => found
                .warnings
                .push(format!("{}: not valid JSON ({e}); skipped", claude.display())),
        }
    }
    let codex = codex_file(home);
    if let Some(text) = read(&codex, &mut found.warnings) {
        match toml::from_str::<toml::Table>(&text) {
            Ok(root) => codex_servers(&root, &codex, &mut found),
            Err(e) => found.warnings.push(format!(
                "{}: not valid TOML ({}); skipped",
                codex.display(),
                e.message()
            )),
        }
    }
    found
}

/// `ours`, then the discovered servers whose names are still free.
pub fn merge(ours: Vec<ServerConfig>, discovered: &Discovery) -> Vec<ServerConfig> {
    let mut servers = ours;
    for found in &discovered.servers {
        if !servers.iter().any(|s| s.name == found.server.name) {
            servers.push(found.server.clone());
        }
    }
    servers
}

fn read(path: &Path, warnings: &mut Vec<String>) -> Option<String> {
    match std::fs::read_to_string(path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => {
            warnings.push(format!("{}: cannot be read ({e}); skipped", path.display()));
            None
        }
    }
}

fn claude_servers(root: &Value, work_dir: &Path, origin: &Path, found: &mut Discovery) {
    let project = root
        .get("projects")
        .and_then(|p| p.get(work_dir.to_string_lossy().as_ref()))
        .and_then(|p| p.get("mcpServers"));
    for servers in [root.get("mcpServers"), project].into_iter().flatten() {
        let Some(servers) = servers.as_object() else {
            found.warnings.push(format!(
                "{}: `mcpServers` is not an object; skipped",
                origin.display()
            ));
            continue;
        };
        for (name, entry) in servers {
            // `type` is `stdio` (or absent) for local servers; `http` and `sse` ones are remote.
            let remote = entry
                .get("type")
                .and_then(Value::as_str)
                .is_some_and(|t| t != "stdio");
            if remote || entry.get("command").is_none() {
                tracing::debug!(server = %name, file = %origin.display(), "remote MCP server not discovered");
                continue;
            }
            add(name, entry.clone(), origin, found);
        }
    }
}

fn codex_servers(root: &toml::Table, origin: &Path, found: &mut Discovery) {
    let Some(servers) = root.get("mcp_servers") else {
        return;
    };
    let Some(servers) = servers.as_table() else {
        found.warnings.push(format!(
            "{}: `mcp_servers` is not a table; skipped",
            origin.display()
        ));
        return;
    };
    for (name, entry) in servers {
        let Some(entry) = entry.as_table() else {
            found.warnings.push(format!(
                "{}: mcp_servers.{name} is not a table; skipped",
                origin.display()
            ));
            continue;
        };
        if entry.get("enabled").and_then(toml::Value::as_bool) == Some(false)
            || !entry.contains_key("command")
        {
            continue;
        }
        let mut server = Map::new();
        for key in ["command", "args", "env", "cwd"] {
            if let Some(value) = entry.get(key) {
                server.insert(key.to_owned(), toml_to_json(value));
            }
        }
        let timeout_ms = entry
            .get("startup_timeout_ms")
            .and_then(toml::Value::as_integer)
            .or_else(|| {
                entry
                    .get("startup_timeout_sec")
                    .and_then(|v| v.as_integer().or_else(|| v.as_float().map(|f| f as i64)))
                    .map(|s| s.saturating_mul(1000))
            });
        if let Some(ms) = timeout_ms {
            server.insert("timeout".to_owned(), Value::from(ms));
        }
        add(name, Value::Object(server), origin, found);
    }
}

/// Parses `entry` as our own configuration would and keeps it, or warns.
fn add(name: &str, entry: Value, origin: &Path, found: &mut Discovery) {
    let mut servers = Map::new();
    servers.insert(name.to_owned(), entry);
    let mut document = Map::new();
    document.insert("mcpServers".to_owned(), Value::Object(servers));
    match config::parse_one(&Value::Object(document)) {
        Ok(parsed) => found.servers.extend(parsed.into_iter().map(|server| Found {
            server,
            origin: origin.to_owned(),
        })),
        Err(e) => found
            .warnings
            .push(format!("{}: {}; skipped", origin.display(), e.0)),
    }
}

fn toml_to_json(value: &toml::Value) -> Value {
    match value {
        toml::Value::String(s) => Value::from(s.as_str()),
        toml::Value::Integer(i) => Value::from(*i),
        toml::Value::Float(f) => Value::from(*f),
        toml::Value::Boolean(b) => Value::from(*b),
        toml::Value::Datetime(d) => Value::from(d.to_string()),
        toml::Value::Array(items) => Value::Array(items.iter().map(toml_to_json).collect()),
        toml::Value::Table(table) => {
            Value::Object(table.iter().map(|(k, v)| (k.clone(), toml_to_json(v))).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::config::Transport;
    use pretty_assertions::assert_eq;

    fn names(found: &Discovery) -> Vec<(&str, String)> {
        found
            .servers
            .iter()
            .map(|f| {
                let file = f.origin.file_name().unwrap().to_string_lossy().into_owned();
                (f.server.name.as_str(), file)
            })
            .collect()
    }

    #[test]
    fn stdio_servers_from_both_files() {
        let home = tempfile::tempdir().unwrap();
        let work = Path::new("/w/project");
        std::fs::write(
            claude_file(home.path()),
            r#"{"mcpServers": {
                 "fs": {"type": "stdio", "command": "npx", "args": ["fs-server"], "env": {"K": "v"}},
                 "web": {"type": "http", "url": "https://h/mcp"}
               },
               "projects": {
                 "/w/project": {"mcpServers": {"local": {"command": "local-server"}}},
                 "/w/other": {"mcpServers": {"elsewhere": {"command": "x"}}}
               }}"#,
        )
        .unwrap();
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        std::fs::write(
            codex_file(home.path()),
            "model = \"o3\"\n[mcp_servers.docs]\ncommand = \"docs-server\"\nargs = [\"--stdio\"]\n\
             env = { TOKEN = \"t\" }\nstartup_timeout_sec = 20\n\
             [mcp_servers.off]\ncommand = \"x\"\nenabled = false\n\
             [mcp_servers.remote]\nurl = \"https://h/mcp\"\n",
        )
        .unwrap();
        let found = discover(home.path(), work);
        assert_eq!(found.warnings, Vec::<String>::new());
        assert_eq!(
            names(&found),
            [
                ("fs", ".claude.json".to_owned()),
                ("local", ".claude.json".to_owned()),
                ("docs", "config.toml".to_owned())
            ]
        );
        let docs = &found.servers[2].server;
        assert_eq!(docs.timeout, Some(std::time::Duration::from_secs(20)));
        let Transport::Stdio {
            command, args, env, ..
        } = &docs.transport
        else {
            panic!("stdio expected")
        };
        assert_eq!(
            (command.as_str(), args.as_slice()),
            ("docs-server", &["--stdio".to_owned()][..])
        );
        assert_eq!(env["TOKEN"], "t");
    }

    #[test]
    fn broken_files_and_entries_are_skipped_with_warnings() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(claude_file(home.path()), "{ not json").unwrap();
        std::fs::create_dir_all(home.path().join(".codex")).unwrap();
        std::fs::write(
            codex_file(home.path()),
            "[mcp_servers.bad]\ncommand = 3\n[mcp_servers.good]\ncommand = \"ok\"\n",
        )
        .unwrap();
        let found = discover(home.path(), Path::new("/w"));
        assert_eq!(names(&found), [("good", "config.toml".to_owned())]);
        assert_eq!(found.warnings.len(), 2, "{:?}", found.warnings);
        assert!(found.warnings[0].contains(".claude.json: not valid JSON"));
        assert!(
            found.warnings[1].contains("mcpServers.bad"),
            "{}",
            found.warnings[1]
        );
        // No files at all: nothing found, nothing to warn about.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(discover(empty.path(), Path::new("/w")), Discovery::default());
    }

    #[test]
    fn ours_win_on_a_name_clash() {
        let server = |name: &str, command: &str| ServerConfig {
            name: name.to_owned(),
            transport: Transport::Stdio {
                command: command.to_owned(),
                args: Vec::new(),
                env: Default::default(),
                cwd: None,
            },
            timeout: None,
        };
        let discovered = Discovery {
            servers: vec![
                Found {
                    server: server("fs", "theirs"),
                    origin: PathBuf::from("/h/.claude.json"),
                },
                Found {
                    server: server("docs", "claude-docs"),
                    origin: PathBuf::from("/h/.claude.json"),
                },
                Found {
                    server: server("docs", "codex-docs"),
                    origin: PathBuf::from("/h/.codex/config.toml"),
                },
            ],
            warnings: Vec::new(),
        };
        let merged = merge(vec![server("fs", "ours")], &discovered);
        assert_eq!(merged, [server("fs", "ours"), server("docs", "claude-docs")]);
    }
}
