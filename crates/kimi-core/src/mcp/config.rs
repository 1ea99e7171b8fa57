//! MCP server configuration: fastmcp's `MCPConfig` JSON, `{"mcpServers": {name: server}}`.
//!
//! Sources, in the reference's order: every `--mcp-config-file` (or `<share>/mcp.json` when none is
//! given and it exists), then every `--mcp-config` text. Servers of later sources replace earlier ones
//! of the same name in place (a Python dict assignment keeps the first position).
//!
//! A server is either stdio (`command`, `args`, `env`, `cwd`) or remote (`url`, `transport`, `headers`,
//! `auth`). Both take fastmcp's optional `timeout` in milliseconds, which we use as the connect timeout.
//! Unknown keys are kept by `mcp add`/`remove` and ignored here, as fastmcp does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;

/// One configured server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// The key in `mcpServers`.
    pub name: String,
    /// How to reach it.
    pub transport: Transport,
    /// fastmcp's per-server `timeout`: bounds connecting (initialize + tools/list).
    pub timeout: Option<Duration>,
}

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin/stdout.
    Stdio {
        /// Program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to the small inherited environment (see `client.rs`).
        env: BTreeMap<String, String>,
        /// Working directory; the agent's own when `None`.
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP.
    Http {
        /// Endpoint.
        url: String,
        /// Extra request headers.
        headers: BTreeMap<String, String>,
        /// Authorization.
        auth: RemoteAuth,
    },
    /// Legacy HTTP+SSE, which rmcp no longer speaks: such a server is reported `failed`.
    Sse {
        /// Endpoint.
        url: String,
    },
}

/// fastmcp's `auth` of a remote server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RemoteAuth {
    /// None.
    None,
    /// `"oauth"`: tokens from `<share>/mcp-oauth/`.
    OAuth,
    /// Any other string: a bearer token.
    Bearer(String),
}

/// A source that could not be read or is not JSON; the binary reports it as a usage error of `flag`.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// An `--mcp-config-file` (or the default file) that is unreadable or not JSON.
    #[error("Invalid JSON: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        message: String,
    },
    /// An `--mcp-config` text that is not JSON.
    #[error("Invalid JSON: {message}")]
    Inline {
        /// What went wrong.
        message: String,
    },
}

impl SourceError {
    /// The flag to blame, as the reference's usage error names it.
    pub fn flag(&self) -> &'static str {
        match self {
            Self::File { .. } => "--mcp-config-file",
            Self::Inline { .. } => "--mcp-config",
        }
    }
}

/// A source whose JSON is not an MCP configuration (reference `MCPConfigError`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("Invalid MCP config: {0}")]
pub struct ConfigError(pub String);

/// Reads the sources in the reference's order: `files` (or `<share>/mcp.json` when `files` is empty and
/// it exists), then `inline` texts.
pub fn read_sources(
    files: &[PathBuf],
    inline: &[String],
    share_dir: &Path,
) -> Result<Vec<Value>, SourceError> {
    let mut paths = files.to_vec();
    if paths.is_empty() {
        let default = crate::paths::mcp_config_file(share_dir);
        if default.is_file() {
            paths.push(default);
        }
    }
    let mut values = Vec::with_capacity(paths.len() + inline.len());
    for path in paths {
        if path.starts_with(share_dir) {
            // Server commands' `env` and headers hold tokens: a share-dir file left readable by others
            // is tightened when the agent opens it, as every file of the share dir.
            crate::private_files::tighten(&path);
        }
        let text = std::fs::read_to_string(&path).map_err(|e| SourceError::File {
            path: path.clone(),
            message: e.to_string(),
        })?;
        let value = serde_json::from_str(&text).map_err(|e| SourceError::File {
            path: path.clone(),
            message: e.to_string(),
        })?;
        values.push(value);
    }
    for text in inline {
        let value = serde_json::from_str(text).map_err(|e| SourceError::Inline {
            message: e.to_string(),
        })?;
        values.push(value);
    }
    Ok(values)
}

/// Validates every source and merges their servers.
pub fn parse_sources(sources: &[Value]) -> Result<Vec<ServerConfig>, ConfigError> {
    let mut servers: Vec<ServerConfig> = Vec::new();
    for source in sources {
        for server in parse_one(source)? {
            match servers.iter_mut().find(|s| s.name == server.name) {
                Some(slot) => *slot = server,
                None => servers.push(server),
            }
        }
    }
    Ok(servers)
}

/// The servers of one `MCPConfig` document, in document order.
pub fn parse_one(source: &Value) -> Result<Vec<ServerConfig>, ConfigError> {
    let Value::Object(root) = source else {
        return Err(ConfigError(format!("expected an object, got {}", kind(source))));
    };
    // fastmcp: server-like values at the root without `mcpServers` are wrapped.
    let servers = match root.get("mcpServers") {
        Some(Value::Object(servers)) => servers,
        Some(other) => {
            return Err(ConfigError(format!(
                "mcpServers: expected an object, got {}",
                kind(other)
            )));
        }
        None if root
            .values()
            .any(|v| v.get("command").is_some() || v.get("url").is_some()) =>
        {
            root
        }
        None => return Ok(Vec::new()),
    };
    servers
        .iter()
        .map(|(name, raw)| {
            parse_server(name, raw).map_err(|e| ConfigError(format!("mcpServers.{name}: {e}")))
        })
        .collect()
}

#[derive(Deserialize)]
struct RawStdio {
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, Value>,
    #[serde(default)]
    cwd: Option<String>,
    #[serde(default)]
    timeout: Option<u64>,
}

#[derive(Deserialize)]
struct RawRemote {
    url: String,
    #[serde(default)]
    transport: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    timeout: Option<u64>,
}

fn parse_server(name: &str, raw: &Value) -> Result<ServerConfig, String> {
    if !raw.is_object() {
        return Err(format!("expected an object, got {}", kind(raw)));
    }
    if raw.get("command").is_some() {
        let stdio: RawStdio = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
        let env = stdio
            .env
            .into_iter()
            .map(|(k, v)| {
                let v = match v {
                    Value::String(s) => s,
                    other => other.to_string(),
                };
                (k, v)
            })
            .collect();
        return Ok(ServerConfig {
            name: name.to_owned(),
            transport: Transport::Stdio {
                command: stdio.command,
                args: stdio.args,
                env,
                cwd: stdio.cwd.map(PathBuf::from),
            },
            timeout: stdio.timeout.map(Duration::from_millis),
        });
    }
    if raw.get("url").is_some() {
        let remote: RawRemote = serde_json::from_value(raw.clone()).map_err(|e| e.to_string())?;
        if !remote.url.starts_with("http") {
            return Err(format!("Invalid URL: {}", remote.url));
        }
        let transport = match remote.transport.as_deref() {
            None if is_sse_url(&remote.url) => Transport::Sse { url: remote.url },
            None | Some("http" | "streamable-http") => Transport::Http {
                url: remote.url,
                headers: remote.headers,
                auth: match remote.auth.as_deref() {
                    None => RemoteAuth::None,
                    Some("oauth") => RemoteAuth::OAuth,
                    Some(token) => RemoteAuth::Bearer(token.to_owned()),
                },
            },
            Some("sse") => Transport::Sse { url: remote.url },
            Some(other) => return Err(format!("unknown transport {other:?}")),
        };
        return Ok(ServerConfig {
            name: name.to_owned(),
            transport,
            timeout: remote.timeout.map(Duration::from_millis),
        });
    }
    Err("a server needs `command` (stdio) or `url` (remote)".to_owned())
}

/// fastmcp's inference: a path with an `/sse` segment is the legacy SSE transport.
fn is_sse_url(url: &str) -> bool {
    let path = url
        .split_once("://")
        .map_or(url, |(_, rest)| rest.find('/').map_or("", |i| &rest[i..]));
    let path = path.split(['?', '#']).next().unwrap_or("");
    path.split('/').any(|segment| segment == "sse")
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn stdio_and_remote_servers_parse() {
        let servers = parse_one(&json!({"mcpServers": {
            "a": {"command": "python", "args": ["s.py"], "env": {"K": "v", "N": 1}, "cwd": "/x", "timeout": 500},
            "b": {"url": "https://h/mcp", "headers": {"X": "1"}, "auth": "oauth"},
            "c": {"url": "https://h/sse"},
            "d": {"url": "https://h/mcp", "transport": "streamable-http", "auth": "tok"},
        }}))
        .unwrap();
        assert_eq!(
            servers,
            vec![
                ServerConfig {
                    name: "a".into(),
                    transport: Transport::Stdio {
                        command: "python".into(),
                        args: vec!["s.py".into()],
                        env: [("K".to_owned(), "v".to_owned()), ("N".to_owned(), "1".to_owned())].into(),
                        cwd: Some(PathBuf::from("/x")),
                    },
                    timeout: Some(Duration::from_millis(500)),
                },
                ServerConfig {
                    name: "b".into(),
                    transport: Transport::Http {
                        url: "https://h/mcp".into(),
                        headers: [("X".to_owned(), "1".to_owned())].into(),
                        auth: RemoteAuth::OAuth,
                    },
                    timeout: None,
                },
                ServerConfig {
                    name: "c".into(),
                    transport: Transport::Sse {
                        url: "https://h/sse".into()
                    },
                    timeout: None,
                },
                ServerConfig {
                    name: "d".into(),
                    transport: Transport::Http {
                        url: "https://h/mcp".into(),
                        headers: BTreeMap::new(),
                        auth: RemoteAuth::Bearer("tok".into()),
                    },
                    timeout: None,
                },
            ]
        );
    }

    #[test]
    fn later_sources_replace_servers_in_place() {
        let servers = parse_sources(&[
            json!({"mcpServers": {"a": {"command": "one"}, "b": {"command": "b"}}}),
            json!({"a": {"command": "two"}}),
            json!({}),
        ])
        .unwrap();
        let names: Vec<_> = servers
            .iter()
            .map(|s| match &s.transport {
                Transport::Stdio { command, .. } => format!("{}={command}", s.name),
                _ => String::new(),
            })
            .collect();
        assert_eq!(names, ["a=two", "b=b"]);
    }

    #[test]
    fn invalid_configs_are_refused() {
        for bad in [
            json!([]),
            json!({"mcpServers": []}),
            json!({"mcpServers": {"a": {}}}),
            json!({"mcpServers": {"a": {"command": 1}}}),
            json!({"mcpServers": {"a": {"url": "ftp://x"}}}),
            json!({"mcpServers": {"a": {"url": "http://x", "transport": "ws"}}}),
        ] {
            let err = parse_sources(std::slice::from_ref(&bad)).unwrap_err();
            assert!(
                err.to_string().starts_with("Invalid MCP config: "),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn the_default_file_is_read_only_without_explicit_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("mcp.json"),
            r#"{"mcpServers": {"d": {"command": "x"}}}"#,
        )
        .unwrap();
        let other = dir.path().join("other.json");
        std::fs::write(&other, "{}").unwrap();
        assert_eq!(read_sources(&[], &[], dir.path()).unwrap().len(), 1);
        assert_eq!(
            read_sources(std::slice::from_ref(&other), &["{}".into()], dir.path()).unwrap(),
            vec![json!({}), json!({})]
        );
        let err = read_sources(&[], &["{".into()], dir.path()).unwrap_err();
        assert_eq!(err.flag(), "--mcp-config");
        std::fs::write(&other, "nope").unwrap();
        let err = read_sources(&[other], &[], dir.path()).unwrap_err();
        assert_eq!(err.flag(), "--mcp-config-file");
        assert!(err.to_string().starts_with("Invalid JSON: "), "{err}");
    }

    #[test]
    fn a_share_dir_file_readable_by_others_is_tightened_when_read() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = tempfile::tempdir().unwrap();
        let (share, elsewhere) = (dir.path().join("share"), dir.path().join("project.json"));
        std::fs::create_dir(&share).unwrap();
        let default = share.join("mcp.json");
        for path in [&default, &elsewhere] {
            std::fs::write(path, "{}").unwrap();
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        read_sources(&[], &[], &share).unwrap();
        read_sources(std::slice::from_ref(&elsewhere), &[], &share).unwrap();
        // The user's own files elsewhere keep their mode.
        assert_eq!((mode(&default), mode(&elsewhere)), (0o600, 0o644));
    }

    #[test]
    fn sse_is_inferred_from_the_path() {
        assert!(is_sse_url("https://h/sse"));
        assert!(is_sse_url("https://h/sse/?x=1"));
        assert!(is_sse_url("http://h:1/a/sse?x"));
        assert!(!is_sse_url("https://h/mcp"));
        assert!(!is_sse_url("https://sse.example/mcp"));
        assert!(!is_sse_url("https://h/sses"));
    }
}
