//! MCP: tools from external servers, in the same pipeline as the built-ins (reference `soul/toolset.py`
//! `load_mcp_tools`, `MCPTool`; shared/seeds/000 section 5.1).
//!
//! Layout:
//! - [`config`]: `mcp.json` / `--mcp-config-file` / `--mcp-config` into [`ServerConfig`]s.
//! - [`discover`]: servers configured for other agents (`~/.claude.json`, `~/.codex/config.toml`),
//!   with `mcp_discover = true`.
//! - [`client`]: one rmcp connection (stdio child in its own process group, or streamable HTTP).
//! - [`state`]: the per-server [`ServerState`] and the wire's `mcp_status` snapshot.
//! - `tool`: [`McpTool`], a server's tool as a [`crate::toolset::Tool`] (approval `mcp:<tool>`).
//! - [`convert`]: MCP results into tool return values within the 100 000-character budget.
//! - [`oauth`]: stored tokens of OAuth servers; [`authorize`]: the flow that obtains them.
//!
//! [`McpManager::start`] connects every server in the background at startup; the first turn waits for
//! it (bounded) and reports progress with `MCPLoadingBegin`/`MCPLoadingEnd` (see `soul/turn.rs`). A
//! server that fails is reported `failed` and the turn runs without its tools (the reference fails the
//! first turn with -32603 instead; docs/protocol.md). A tool whose name is already taken (a built-in, a
//! client's external tool or another server's tool) is skipped with a warning and left out of its
//! server's status, never silently replacing the other. A connection that died is re-established (and
//! its tools re-listed) on the next call; `notifications/tools/list_changed` re-lists at once.

pub mod authorize;
pub mod client;
pub mod config;
pub mod convert;
pub mod discover;
pub mod oauth;
pub mod state;
mod tool;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use kimi_wire::message::{McpStatus, ToolReturnValue};
use serde_json::Value;
use tokio::sync::{Notify, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub use client::{Connection, McpError};
pub use config::{RemoteAuth, ServerConfig, Transport};
pub use state::{ServerState, ServerView};
pub use tool::McpTool;

use crate::sync::lock;
use crate::toolset::Toolset;

/// How long connecting one server (spawn or HTTP, `initialize`, `tools/list`) may take unless its
/// configuration sets `timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// Added to the longest connect timeout to bound the first turn's wait for loading.
pub const STARTUP_WAIT_SLACK: Duration = Duration::from_secs(5);

/// Session-wide MCP settings.
#[derive(Debug, Clone)]
pub struct McpSettings {
    /// `[mcp.client] tool_call_timeout_ms`.
    pub tool_call_timeout: Duration,
    /// `mcp_tool_names`: the tools' own names, or `mcp__<server>__<tool>`.
    pub tool_names: crate::config::McpToolNames,
    /// The share dir (OAuth tokens live under it).
    pub share_dir: PathBuf,
}

/// Which server owns which registered tool name; the toolset itself does not know.
#[derive(Debug)]
struct Registry {
    toolset: Arc<Toolset>,
    owners: Mutex<HashMap<String, String>>,
    /// Each server's place in the configuration (ours first, then discovered ones): on a name clash the
    /// earlier server wins, whichever connects first.
    ranks: HashMap<String, usize>,
}

impl Registry {
    fn rank(&self, server: &str) -> usize {
        self.ranks.get(server).copied().unwrap_or(usize::MAX)
    }

    /// Whether `name` is registered for `server` (a later, earlier-ranked server may have taken it).
    fn owns(&self, server: &str, name: &str) -> bool {
        lock(&self.owners).get(name).is_some_and(|owner| owner == server)
    }

    /// Makes `tools` the registered tools of `server`: its old tools that are gone are removed, new ones
    /// are added unless their name is taken by a built-in tool or an earlier server (one later in the
    /// configuration loses it). Returns the names now registered for it.
    fn replace_tools(&self, server: &str, tools: Vec<McpTool>) -> Vec<String> {
        let mut owners = lock(&self.owners);
        let keep: Vec<&str> = tools.iter().map(|t| t.spec_name()).collect();
        let stale: Vec<String> = owners
            .iter()
            .filter(|(name, owner)| owner.as_str() == server && !keep.contains(&name.as_str()))
            .map(|(name, _)| name.clone())
            .collect();
        for name in stale {
            owners.remove(&name);
            self.toolset.remove(&name);
        }
        let mut registered = Vec::new();
        for tool in tools {
            let name = tool.spec_name().to_owned();
            match owners.get(&name) {
                Some(owner) if owner != server && self.rank(owner) < self.rank(server) => {
                    tracing::warn!(server, tool = %name, other = %owner, "MCP tool name already used by another MCP server; skipped");
                    continue;
                }
                Some(owner) if owner != server => {
                    tracing::warn!(server = %owner, tool = %name, other = server, "MCP tool name already used by another MCP server; skipped");
                    owners.insert(name.clone(), server.to_owned());
                }
                Some(_) => {}
                None if self.toolset.find(&name).is_some() => {
                    tracing::warn!(server, tool = %name, "MCP tool name clashes with an existing tool; skipped");
                    continue;
                }
                None => {
                    owners.insert(name.clone(), server.to_owned());
                }
            }
            self.toolset.register(Arc::new(tool));
            registered.push(name);
        }
        registered
    }
}

impl McpTool {
    fn spec_name(&self) -> &str {
        &crate::toolset::Tool::spec(self).name
    }
}

/// One configured server: its state, its connection (made on demand), its registered tools.
#[derive(Debug)]
pub struct McpServer {
    config: ServerConfig,
    settings: Arc<McpSettings>,
    registry: Arc<Registry>,
    state: Mutex<ServerState>,
    /// Names of its tools registered in the toolset (clashing names left out).
    tools: Mutex<Vec<String>>,
    /// The tool list as the server last sent it.
    listed: Mutex<Vec<rmcp::model::Tool>>,
    /// Held across connecting so that concurrent calls reconnect once.
    connection: tokio::sync::Mutex<Option<Arc<Connection>>>,
    tools_changed: Arc<Notify>,
    me: Weak<McpServer>,
}

impl McpServer {
    fn new(config: ServerConfig, settings: Arc<McpSettings>, registry: Arc<Registry>) -> Arc<Self> {
        let state = match &config.transport {
            Transport::Http {
                url,
                auth: RemoteAuth::OAuth,
                ..
            } if !oauth::has_tokens(&settings.share_dir, url) => {
                tracing::warn!(
                    server = %config.name,
                    "Skipping OAuth MCP server '{}': not authorized. Run 'kimi-agent mcp auth {}' first.",
                    config.name,
                    config.name
                );
                ServerState::Unauthorized
            }
            _ => ServerState::Pending,
        };
        Arc::new_cyclic(|me| Self {
            config,
            settings,
            registry,
            state: Mutex::new(state),
            tools: Mutex::new(Vec::new()),
            listed: Mutex::new(Vec::new()),
            connection: tokio::sync::Mutex::new(None),
            tools_changed: Arc::new(Notify::new()),
            me: me.clone(),
        })
    }

    /// The current state.
    pub fn state(&self) -> ServerState {
        lock(&self.state).clone()
    }

    fn set_state(&self, state: ServerState) {
        *lock(&self.state) = state;
    }

    fn view(&self) -> ServerView {
        ServerView {
            name: self.config.name.clone(),
            state: self.state(),
            tools: lock(&self.tools)
                .iter()
                .filter(|name| self.registry.owns(&self.config.name, name))
                .cloned()
                .collect(),
        }
    }

    fn connect_timeout(&self) -> Duration {
        self.config.timeout.unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// Startup: connect and register tools, unless unauthorized.
    async fn load(&self) {
        if self.state() == ServerState::Unauthorized {
            return;
        }
        let mut slot = self.connection.lock().await;
        if let Err(e) = self.connect_locked(&mut slot).await {
            tracing::error!(server = %self.config.name, error = %e, "Failed to connect MCP server");
        }
    }

    /// Connects (replacing a dead connection), lists and registers the tools; the caller holds the slot.
    async fn connect_locked(&self, slot: &mut Option<Arc<Connection>>) -> Result<Arc<Connection>, McpError> {
        if let Some(old) = slot.take() {
            match Arc::try_unwrap(old) {
                Ok(old) => old.shutdown().await,
                // Calls still hold it; its drop kills the group when they let go.
                Err(_) => tracing::debug!(server = %self.config.name, "old MCP connection still in use"),
            }
        }
        self.set_state(ServerState::Connecting);
        let timeout = self.connect_timeout();
        let result = tokio::time::timeout(timeout, async {
            let connection = Connection::connect(
                &self.config.name,
                &self.config.transport,
                &self.settings.share_dir,
                timeout,
                Arc::clone(&self.tools_changed),
            )
            .await?;
            match connection.list_tools().await {
                Ok(tools) => Ok((connection, tools)),
                Err(e) => {
                    connection.shutdown().await;
                    Err(e)
                }
            }
        })
        .await
        .unwrap_or(Err(McpError::ConnectTimeout(timeout)));
        match result {
            Ok((connection, tools)) => {
                self.register(&tools);
                let connection = Arc::new(connection);
                *slot = Some(Arc::clone(&connection));
                self.set_state(ServerState::Connected);
                tracing::info!(server = %self.config.name, tools = tools.len(), "Connected MCP server");
                Ok(connection)
            }
            Err(e) => {
                let state = match &e {
                    McpError::Unauthorized(reason) => {
                        tracing::warn!(
                            server = %self.config.name,
                            "OAuth MCP server '{}' is not authorized ({reason}). Run 'kimi-agent mcp auth {}'.",
                            self.config.name,
                            self.config.name
                        );
                        ServerState::Unauthorized
                    }
                    _ => ServerState::Failed { error: e.to_string() },
                };
                self.set_state(state);
                Err(e)
            }
        }
    }

    fn register(&self, tools: &[rmcp::model::Tool]) {
        *lock(&self.listed) = tools.to_vec();
        let wrapped = tools
            .iter()
            .map(|t| McpTool::new(&self.config.name, t, self.me.clone(), self.settings.tool_names))
            .collect();
        let registered = self.registry.replace_tools(&self.config.name, wrapped);
        *lock(&self.tools) = registered;
    }

    /// The live connection, reconnecting first when it died.
    async fn connection(&self) -> Result<Arc<Connection>, McpError> {
        let mut slot = self.connection.lock().await;
        if let Some(connection) = slot.as_ref()
            && !connection.is_closed()
        {
            return Ok(Arc::clone(connection));
        }
        if slot.is_some() {
            tracing::warn!(server = %self.config.name, "MCP server connection lost; reconnecting");
        }
        self.connect_locked(&mut slot).await
    }

    /// Re-lists the tools after `notifications/tools/list_changed`.
    async fn refresh_tools(&self) {
        let connection = match self.connection.lock().await.as_ref() {
            Some(connection) if !connection.is_closed() => Arc::clone(connection),
            _ => return,
        };
        self.sync_tools(&connection).await;
    }

    /// Re-registers the tools if the server's list differs from the last one (the list is cached by
    /// rmcp until the server announces a change, so this is usually free).
    async fn sync_tools(&self, connection: &Connection) {
        match connection.list_tools().await {
            Ok(tools) => {
                if *lock(&self.listed) != tools {
                    tracing::info!(server = %self.config.name, tools = tools.len(), "MCP tool list updated");
                    self.register(&tools);
                }
            }
            Err(e) => tracing::warn!(server = %self.config.name, error = %e, "MCP tool list refresh failed"),
        }
    }

    /// Runs one tool call: reconnect if needed, call within `tool_call_timeout_ms`, convert.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
    ) -> ToolReturnValue {
        let result = match self.connection().await {
            Ok(connection) => {
                let result = connection
                    .call_tool(tool, arguments, self.settings.tool_call_timeout)
                    .await;
                // A list change the server announced during the call is visible to the next step.
                if result.is_ok() {
                    self.sync_tools(&connection).await;
                }
                result
            }
            Err(e) => Err(e),
        };
        match result {
            Ok(result) => {
                if result.is_error == Some(true) {
                    tracing::warn!(server = %self.config.name, tool, "MCP tool returned an error");
                }
                convert::convert_result(result)
            }
            Err(e @ McpError::CallTimeout { .. }) => {
                tracing::warn!(server = %self.config.name, tool, "MCP tool call timed out");
                ToolReturnValue::error("", e.to_string(), "Timeout")
            }
            Err(e) => {
                tracing::error!(server = %self.config.name, tool, error = %e, "MCP tool call failed");
                // Reference: an exception from a tool becomes `ToolRuntimeError`.
                ToolReturnValue::error("", format!("Error running tool: {e}"), "Tool runtime error")
            }
        }
    }

    async fn shutdown(&self) {
        let connection = self.connection.lock().await.take();
        if let Some(connection) = connection {
            match Arc::try_unwrap(connection) {
                Ok(connection) => connection.shutdown().await,
                Err(shared) => {
                    // A call in flight still holds it; dropping the last handle kills the group.
                    tracing::debug!(server = %self.config.name, "MCP connection in use at shutdown");
                    drop(shared);
                }
            }
        }
    }
}

/// Every configured server of a session, and the background work that connects them.
#[derive(Debug)]
pub struct McpManager {
    servers: Vec<Arc<McpServer>>,
    loading: watch::Receiver<bool>,
    tasks: Mutex<JoinSet<()>>,
    cancel: CancellationToken,
}

impl McpManager {
    /// Registers nothing yet: starts connecting every server in the background (on the current Tokio
    /// runtime); their tools are added to `toolset` as each one connects.
    pub fn start(configs: Vec<ServerConfig>, settings: McpSettings, toolset: Arc<Toolset>) -> Arc<Self> {
        let settings = Arc::new(settings);
        let registry = Arc::new(Registry {
            toolset,
            owners: Mutex::new(HashMap::new()),
            ranks: configs
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name.clone(), i))
                .collect(),
        });
        let servers: Vec<Arc<McpServer>> = configs
            .into_iter()
            .map(|c| McpServer::new(c, Arc::clone(&settings), Arc::clone(&registry)))
            .collect();
        let (done, loading) = watch::channel(!servers.is_empty());
        let cancel = CancellationToken::new();
        let mut tasks = JoinSet::new();
        if !servers.is_empty() {
            // Reference: every pending server is marked connecting as loading starts.
            for server in &servers {
                if server.state() == ServerState::Pending {
                    server.set_state(ServerState::Connecting);
                }
            }
            let loaders: Vec<_> = servers.iter().map(Arc::clone).collect();
            let token = cancel.clone();
            tasks.spawn(async move {
                let all = futures::future::join_all(loaders.iter().map(|s| s.load()));
                tokio::select! {
                    _ = all => {}
                    () = token.cancelled() => {}
                }
                let _ = done.send(false);
            });
            for server in &servers {
                let server = Arc::clone(server);
                let token = cancel.clone();
                tasks.spawn(async move {
                    loop {
                        tokio::select! {
                            () = server.tools_changed.notified() => server.refresh_tools().await,
                            () = token.cancelled() => break,
                        }
                    }
                });
            }
        }
        Arc::new(Self {
            servers,
            loading,
            tasks: Mutex::new(tasks),
            cancel,
        })
    }

    /// Whether startup loading is still running.
    pub fn is_loading(&self) -> bool {
        *self.loading.borrow()
    }

    /// The wire's `mcp_status`: `None` without servers.
    pub fn status(&self) -> Option<McpStatus> {
        let views: Vec<ServerView> = self.servers.iter().map(|s| s.view()).collect();
        state::snapshot(self.is_loading(), &views)
    }

    /// How long the first turn may wait for loading: the longest connect timeout plus a margin.
    pub fn startup_wait(&self) -> Duration {
        self.servers
            .iter()
            .map(|s| s.connect_timeout())
            .max()
            .unwrap_or_default()
            + STARTUP_WAIT_SLACK
    }

    /// Waits until startup loading has finished.
    pub async fn wait_loaded(&self) {
        let mut loading = self.loading.clone();
        let _ = loading.wait_for(|loading| !*loading).await;
    }

    /// Stops the background work and ends every connection (stdio servers: their process groups).
    pub async fn shutdown(&self) {
        self.cancel.cancel();
        let mut tasks = std::mem::take(&mut *lock(&self.tasks));
        while tasks.join_next().await.is_some() {}
        futures::future::join_all(self.servers.iter().map(|s| s.shutdown())).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn tool(name: &str) -> rmcp::model::Tool {
        rmcp::model::Tool::new(name.to_owned(), "d", Arc::new(serde_json::Map::new()))
    }

    fn wrapped(server: &str, names: &[&str]) -> Vec<McpTool> {
        names
            .iter()
            .map(|n| {
                McpTool::new(
                    server,
                    &tool(n),
                    Weak::new(),
                    crate::config::McpToolNames::default(),
                )
            })
            .collect()
    }

    #[test]
    fn on_a_clash_the_earlier_server_wins_whichever_registers_first() {
        let registry = Registry {
            toolset: Arc::new(Toolset::new()),
            owners: Mutex::new(HashMap::new()),
            ranks: [("ours".to_owned(), 0), ("theirs".to_owned(), 1)].into(),
        };
        // The later server connects first and takes both names ...
        assert_eq!(
            registry.replace_tools("theirs", wrapped("theirs", &["a", "b"])),
            ["a", "b"]
        );
        // ... the earlier one takes `a` back when it connects; `b` stays theirs.
        assert_eq!(registry.replace_tools("ours", wrapped("ours", &["a"])), ["a"]);
        assert!(registry.owns("ours", "a") && registry.owns("theirs", "b"));
        // A refresh of the later server does not take it again, nor remove ours.
        assert_eq!(
            registry.replace_tools("theirs", wrapped("theirs", &["a", "b"])),
            ["b"]
        );
        assert!(registry.owns("ours", "a"));
        assert_eq!(registry.toolset.names(), ["a", "b"]);
    }
}
