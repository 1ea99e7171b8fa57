//! One live connection to one MCP server, over rmcp: connect (spawn or HTTP), initialize, list tools,
//! call a tool, and shut down.
//!
//! A stdio server runs in its own process group (process-wrap `ProcessGroup::leader`) with a small
//! environment (the reference's: `HOME LOGNAME PATH SHELL TERM USER` plus the configured `env`). Its stderr
//! is always piped and drained line by line into the log, tagged with the server's name: an unread pipe
//! would stall a chatty server. Shutting down closes its stdin, sends SIGTERM to the group, waits
//! [`TERM_GRACE`], then SIGKILLs the group and reaps it. Dropping a connection without shutting it down
//! still SIGKILLs the group.

use std::collections::HashMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use process_wrap::tokio::{ChildWrapper, CommandWrap, ProcessGroup};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation, Tool,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::streamable_http_client::{StreamableHttpClient, StreamableHttpClientTransportConfig};
use rmcp::transport::{AuthClient, AuthError, AuthorizationManager, StreamableHttpClientTransport};
use rmcp::{ClientCacheConfig, ClientHandler, MAX_CLIENT_CACHE_TTL, ServiceError, ServiceExt};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use super::config::{RemoteAuth, Transport};
use super::oauth;
use crate::procgroup::GroupGuard;

/// Variables a stdio server inherits from us (reference: the `mcp` SDK's `DEFAULT_INHERITED_ENV_VARS`).
const INHERITED_ENV: [&str; 6] = ["HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"];
/// How long a stdio server may take to exit after its stdin closed and it got SIGTERM.
pub const TERM_GRACE: Duration = Duration::from_millis(500);
/// How long reaping a killed group may take before we give up on it.
const KILL_WAIT: Duration = Duration::from_secs(2);
/// Longest stderr line kept in the log; the rest of the line is dropped.
const MAX_STDERR_LINE: usize = 8 * 1024;
const SIGTERM: i32 = 15;

/// Why talking to a server failed. Each variant's text is what users and the model see.
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The server's transport is not supported (legacy SSE).
    #[error("the legacy SSE transport is not supported; use streamable HTTP (\"transport\": \"http\")")]
    UnsupportedTransport,
    /// An OAuth server without a usable token: none stored, or expired and not refreshable.
    #[error("not authorized: {0}")]
    Unauthorized(String),
    /// The child could not be started.
    #[error("failed to start `{command}`: {reason}")]
    Spawn {
        /// Program.
        command: String,
        /// OS error.
        reason: String,
    },
    /// Initialize and the tool list did not finish in time.
    #[error("timed out after {} ms while connecting", .0.as_millis())]
    ConnectTimeout(Duration),
    /// The handshake failed.
    #[error("initialize failed: {0}")]
    Initialize(String),
    /// A tool call exceeded `mcp.client.tool_call_timeout_ms` (typed, not guessed from a message).
    #[error(
        "Timeout while calling MCP tool `{tool}`. You may explain to the user that the timeout config is set too low."
    )]
    CallTimeout {
        /// Tool name.
        tool: String,
    },
    /// The connection went away (the server exited or the HTTP session broke).
    #[error("connection to the MCP server closed")]
    Closed,
    /// Any other protocol or transport error.
    #[error("{0}")]
    Service(String),
}

impl From<ServiceError> for McpError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::TransportClosed => Self::Closed,
            other => Self::Service(other.to_string()),
        }
    }
}

/// Our side of the MCP session: answers the server and reports `tools/list_changed`.
#[derive(Debug, Clone)]
pub struct Handler {
    server: Arc<str>,
    tools_changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::info!(server = %self.server, "MCP server tool list changed");
        self.tools_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("kimi-agent", env!("CARGO_PKG_VERSION")),
        )
    }
}

/// A connected server.
#[derive(Debug)]
pub struct Connection {
    server: Arc<str>,
    service: RunningService<RoleClient, Handler>,
    child: Option<ChildGroup>,
    stderr: Option<JoinHandle<()>>,
}

impl Connection {
    /// Connects to `transport` and completes the MCP handshake within `timeout`. `tools_changed` is
    /// notified when the server announces a new tool list. An OAuth server's tokens are read from (and
    /// refreshed into) `share_dir`.
    pub async fn connect(
        server: &str,
        transport: &Transport,
        share_dir: &Path,
        timeout: Duration,
        tools_changed: Arc<Notify>,
    ) -> Result<Self, McpError> {
        let handler = Handler {
            server: server.into(),
            tools_changed,
        };
        match transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args).env_clear();
                for key in INHERITED_ENV {
                    if let Some(value) = std::env::var_os(key) {
                        cmd.env(key, value);
                    }
                }
                cmd.envs(env);
                if let Some(cwd) = cwd {
                    cmd.current_dir(cwd);
                }
                cmd.stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped());
                let mut wrap = CommandWrap::from(cmd);
                wrap.wrap(ProcessGroup::leader());
                crate::guardian::start();
                let mut child = wrap.spawn().map_err(|e| McpError::Spawn {
                    command: command.clone(),
                    reason: e.to_string(),
                })?;
                let stdin = child.stdin().take();
                let stdout = child.stdout().take();
                let stderr = child.stderr().take();
                let guard = child.id().map(GroupGuard::watch);
                let mut group = ChildGroup {
                    child: Some(child),
                    guard,
                };
                let stderr = stderr.map(|s| tokio::spawn(drain_stderr(server.into(), s)));
                let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
                    group.kill().await;
                    return Err(McpError::Initialize("the child's pipes are missing".into()));
                };
                match tokio::time::timeout(timeout, handler.serve((stdout, stdin))).await {
                    Ok(Ok(service)) => Ok(Self::ready(server, service, Some(group), stderr).await),
                    Ok(Err(e)) => {
                        group.kill().await;
                        Err(McpError::Initialize(e.to_string()))
                    }
                    Err(_) => {
                        group.kill().await;
                        Err(McpError::ConnectTimeout(timeout))
                    }
                }
            }
            Transport::Http { url, headers, auth } => {
                let mut custom_headers = HashMap::new();
                for (name, value) in headers {
                    let (Ok(name), Ok(value)) = (
                        reqwest::header::HeaderName::from_bytes(name.as_bytes()),
                        reqwest::header::HeaderValue::from_str(value),
                    ) else {
                        return Err(McpError::Initialize(format!("invalid header {name:?}")));
                    };
                    custom_headers.insert(name, value);
                }
                kimi_llm::install_tls_provider();
                let client = reqwest::Client::builder()
                    .connect_timeout(timeout)
                    .build()
                    .map_err(|e| McpError::Initialize(format!("cannot create the HTTP client: {e}")))?;
                let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
                config.custom_headers = custom_headers;
                let serve = match auth {
                    RemoteAuth::None => serve_http(
                        handler,
                        StreamableHttpClientTransport::with_client(client, config),
                    )
                    .boxed(),
                    RemoteAuth::Bearer(token) => {
                        config.auth_header = Some(token.clone());
                        serve_http(
                            handler,
                            StreamableHttpClientTransport::with_client(client, config),
                        )
                        .boxed()
                    }
                    RemoteAuth::OAuth => {
                        let client = oauth_client(share_dir, url, client).await?;
                        serve_http(
                            handler,
                            StreamableHttpClientTransport::with_client(client, config),
                        )
                        .boxed()
                    }
                };
                match tokio::time::timeout(timeout, serve).await {
                    Ok(Ok(service)) => Ok(Self::ready(server, service, None, None).await),
                    Ok(Err(e)) => Err(e),
                    Err(_) => Err(McpError::ConnectTimeout(timeout)),
                }
            }
            Transport::Sse { .. } => Err(McpError::UnsupportedTransport),
        }
    }

    /// A connection whose tool list stays cached until the server says it changed: rmcp drops the
    /// cached list when `notifications/tools/list_changed` arrives, in order with the responses, so
    /// re-listing after each call costs a round trip only when the list really changed.
    async fn ready(
        server: &str,
        service: RunningService<RoleClient, Handler>,
        child: Option<ChildGroup>,
        stderr: Option<JoinHandle<()>>,
    ) -> Self {
        service
            .peer()
            .set_response_cache_config(ClientCacheConfig::default().with_default_ttl(MAX_CLIENT_CACHE_TTL))
            .await;
        Self {
            server: server.into(),
            service,
            child,
            stderr,
        }
    }

    /// Whether the session is over (the server exited, the transport broke, or we closed it).
    pub fn is_closed(&self) -> bool {
        self.service.is_closed() || self.service.peer().is_transport_closed()
    }

    /// Every tool the server offers (all pages).
    pub async fn list_tools(&self) -> Result<Vec<Tool>, McpError> {
        Ok(self.service.peer().list_all_tools().await?)
    }

    /// Calls `tool` with `arguments`, giving up after `timeout`. Giving up (or dropping this future, as a
    /// cancelled turn does) sends `notifications/cancelled` for the request (rmcp's abandoned-request
    /// guard).
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: serde_json::Map<String, Value>,
        timeout: Duration,
    ) -> Result<CallToolResult, McpError> {
        let params = CallToolRequestParams::new(tool.to_owned()).with_arguments(arguments);
        match tokio::time::timeout(timeout, self.service.peer().call_tool(params)).await {
            Ok(result) => Ok(result?),
            Err(_) => Err(McpError::CallTimeout {
                tool: tool.to_owned(),
            }),
        }
    }

    /// Ends the session and, for a stdio server, its whole process group.
    pub async fn shutdown(mut self) {
        // Cancelling the service drops the transport, which closes the child's stdin.
        if tokio::time::timeout(KILL_WAIT, self.service.close())
            .await
            .is_err()
        {
            tracing::warn!(server = %self.server, "MCP session did not close in time");
        }
        if let Some(mut group) = self.child.take() {
            group.terminate().await;
        }
        if let Some(task) = self.stderr.take() {
            // The pipe closes with the group; the drain ends by itself. Do not wait on a grandchild that
            // left the group and still holds it.
            task.abort();
        }
    }
}

/// Completes the MCP handshake over streamable HTTP.
async fn serve_http<C>(
    handler: Handler,
    transport: StreamableHttpClientTransport<C>,
) -> Result<RunningService<RoleClient, Handler>, McpError>
where
    C: StreamableHttpClient + Send + Sync + 'static,
    C::Error: std::error::Error + Send + Sync + 'static,
{
    match handler.serve(transport).await {
        Ok(service) => Ok(service),
        Err(e) if e.is_authorization_required() => Err(McpError::Unauthorized(
            "the server rejected the stored OAuth token".into(),
        )),
        Err(e) => Err(McpError::Initialize(e.to_string())),
    }
}

/// An HTTP client that sends the stored OAuth token of `url`, refreshing it (and storing the new one)
/// when it has expired or the server rejects it. A token that is missing, or expired without a working
/// refresh, makes the server unauthorized before anything is sent to it.
async fn oauth_client(
    share_dir: &Path,
    url: &str,
    http: reqwest::Client,
) -> Result<AuthClient<reqwest::Client>, McpError> {
    let unusable = |e: AuthError| match e {
        AuthError::AuthorizationRequired | AuthError::TokenExpired => McpError::Unauthorized(
            "no usable OAuth token is stored (it may have expired without a way to refresh it)".into(),
        ),
        AuthError::TokenRefreshRejected(reason) | AuthError::TokenRefreshFailed(reason) => {
            McpError::Unauthorized(format!("refreshing the OAuth token failed: {reason}"))
        }
        AuthError::CredentialStoreError(reason) => McpError::Unauthorized(reason),
        // Discovery and transport failures say nothing about the tokens: the server is unreachable.
        other => McpError::Initialize(format!("OAuth setup failed: {other}")),
    };
    if !oauth::has_tokens(share_dir, url) {
        return Err(McpError::Unauthorized("no OAuth token is stored".into()));
    }
    let mut manager = AuthorizationManager::new(url).await.map_err(unusable)?;
    manager.set_credential_store(oauth::FileCredentialStore::new(share_dir, url));
    manager.initialize_from_store().await.map_err(unusable)?;
    // Refresh now rather than in the middle of the handshake, so a failure says what went wrong.
    manager.get_access_token().await.map_err(unusable)?;
    Ok(AuthClient::new(http, manager))
}

impl Drop for Connection {
    fn drop(&mut self) {
        if let Some(task) = &self.stderr {
            task.abort();
        }
    }
}

/// A stdio server's process group. Dropping it SIGKILLs the group.
#[derive(Debug)]
struct ChildGroup {
    child: Option<Box<dyn ChildWrapper>>,
    /// The group's guard (the leader's pid; registered with the guardian) until it is killed.
    guard: Option<GroupGuard>,
}

impl ChildGroup {
    /// SIGTERM, a short grace, then SIGKILL; the group is reaped either way.
    async fn terminate(&mut self) {
        let Some(child) = self.child.as_mut() else {
            return;
        };
        if matches!(child.try_wait(), Ok(None)) {
            let _ = child.signal(SIGTERM);
            if tokio::time::timeout(TERM_GRACE, child.wait()).await.is_ok() {
                // The leader is gone; members that ignored the TERM still get the KILL below.
            }
        }
        self.kill().await;
    }

    /// SIGKILL to the group and reap it.
    async fn kill(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let _ = child.start_kill();
        // Dropped armed: SIGKILL to the group (members the leader left behind too), and released.
        drop(self.guard.take());
        if tokio::time::timeout(KILL_WAIT, child.wait()).await.is_err() {
            tracing::warn!(pid = ?child.id(), "MCP server process group not reaped in time");
        }
    }
}

impl Drop for ChildGroup {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            // Synchronous and non-blocking: killpg(SIGKILL). Tokio reaps the leader.
            let _ = child.start_kill();
        }
        // The guard field drops after this: SIGKILL to the whole group, and released.
    }
}

/// Logs a child's stderr line by line until it closes. Lines are capped so a child that never writes a
/// newline cannot make us buffer without bound.
async fn drain_stderr(server: Arc<str>, stderr: impl AsyncRead + Unpin) {
    let mut reader = BufReader::new(stderr);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let chunk = match reader.fill_buf().await {
            Ok([]) => break,
            Ok(chunk) => chunk,
            Err(e) => {
                tracing::debug!(%server, error = %e, "MCP server stderr closed");
                break;
            }
        };
        let (taken, newline) = match chunk.iter().position(|b| *b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let room = MAX_STDERR_LINE.saturating_sub(line.len());
        let keep = if newline { taken - 1 } else { taken };
        line.extend_from_slice(&chunk[..keep.min(room)]);
        reader.consume(taken);
        if newline {
            log_line(&server, &line);
            line.clear();
        }
    }
    if !line.is_empty() {
        log_line(&server, &line);
    }
}

fn log_line(server: &str, line: &[u8]) {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    tracing::info!(server, "[mcp stderr] {text}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn stderr_is_drained_even_without_newlines() {
        let (mut writer, reader) = tokio::io::duplex(64);
        let task = tokio::spawn(drain_stderr("t".into(), reader));
        let big = vec![b'x'; 1 << 20];
        tokio::io::AsyncWriteExt::write_all(&mut writer, &big)
            .await
            .unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut writer, b"\nend\n")
            .await
            .unwrap();
        drop(writer);
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_missing_program_is_a_spawn_error() {
        let transport = Transport::Stdio {
            command: "/definitely/not/a/program".into(),
            args: vec![],
            env: Default::default(),
            cwd: None,
        };
        let err = Connection::connect(
            "x",
            &transport,
            Path::new("/nonexistent"),
            Duration::from_secs(5),
            Arc::new(Notify::new()),
        )
        .await
        .unwrap_err();
        assert!(matches!(err, McpError::Spawn { .. }), "{err}");
    }
}
