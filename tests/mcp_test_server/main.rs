//! A real MCP server for kimi-agent's black-box tests (tests/suite/mcp.rs), written with rmcp's server
//! side. Test support only: a binary of the test package, so `cargo test` builds it for the suite and
//! the shipped binary never contains it.
//!
//! `mcp_test_server` serves on stdin/stdout; `mcp_test_server http` serves streamable HTTP on a free
//! local port, prints its URL on stdout and runs until stdin closes. `mcp_test_server oauth` does the
//! same behind OAuth, playing the authorization server too (see `mcp_test_server/oauth.rs`).
//!
//! Behaviour switches (environment):
//! - `MCP_TEST_HANG=1`: never answer anything (a server stuck before `initialize`).
//! - `MCP_TEST_STDERR_FLOOD=N`: write N bytes of log lines to stderr before serving (blocks unless the
//!   client drains the pipe).
//! - `MCP_TEST_GATE=FIFO`: open this named pipe before serving; the test opens its other end when it
//!   wants the server to answer (so "still connecting" is a state the test controls, not a race).
//! - `MCP_TEST_STARTED=FIFO`: `slow` writes a byte into this named pipe once the call has reached the
//!   server, so a test can wait for "the call is in flight" before it cancels.
//! - `MCP_TEST_PID_DIR=DIR`: write `DIR/<pid>` at start; with `MCP_TEST_GRANDCHILD=1` also start a
//!   `sleep` grandchild in the same process group and record it as `DIR/<pid>` too.
//!
//! Tools: `echo {text}`, `fail {text}` (an `isError` result), `slow {ms}` (sleeps; counts a
//! cancellation), `cancelled {}` (waits up to 10 s for a counted cancellation), `crash {}` (exits
//! mid-call), `add_tool {}` (adds `extra` and sends `tools/list_changed`), `image {}`, `pid {}`, and
//! `extra {}` once added.

mod oauth;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ServerHandler, ServiceExt};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::sync::Notify;

#[derive(Debug, Default)]
struct State {
    extra: AtomicBool,
    cancelled: AtomicUsize,
    cancel_seen: Notify,
}

#[derive(Debug, Clone, Default)]
struct TestServer {
    state: Arc<State>,
}

fn schema(properties: Value) -> Arc<serde_json::Map<String, Value>> {
    let required: Vec<&String> = properties
        .as_object()
        .map(|p| p.keys().collect())
        .unwrap_or_default();
    match json!({"type": "object", "properties": properties, "required": required}) {
        Value::Object(map) => Arc::new(map),
        _ => Arc::new(serde_json::Map::new()),
    }
}

impl TestServer {
    fn tools(&self) -> Vec<Tool> {
        let mut tools = vec![
            Tool::new(
                "echo",
                "Echo the text back.",
                schema(json!({"text": {"type": "string"}})),
            ),
            Tool::new(
                "fail",
                "Return an error result.",
                schema(json!({"text": {"type": "string"}})),
            ),
            Tool::new(
                "slow",
                "Sleep for ms milliseconds.",
                schema(json!({"ms": {"type": "integer"}})),
            ),
            Tool::new("cancelled", "How many calls were cancelled.", schema(json!({}))),
            Tool::new("crash", "Exit the server process.", schema(json!({}))),
            Tool::new("add_tool", "Add the `extra` tool.", schema(json!({}))),
            Tool::new("image", "Return text and an image.", schema(json!({}))),
            Tool::new_with_raw("pid", None, schema(json!({}))),
        ];
        if self.state.extra.load(Ordering::SeqCst) {
            tools.push(Tool::new("extra", "Added at run time.", schema(json!({}))));
        }
        tools
    }
}

fn text(result: &str) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(result)])
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("mcp-test-server", "0.0.0"))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let arg = |key: &str| args.get(key).cloned().unwrap_or(Value::Null);
        let result = match request.name.as_ref() {
            "echo" => text(&format!("echo:{}", arg("text").as_str().unwrap_or(""))),
            "fail" => CallToolResult::error(vec![ContentBlock::text(format!(
                "failed:{}",
                arg("text").as_str().unwrap_or("")
            ))]),
            "slow" => {
                let ms = arg("ms").as_u64().unwrap_or(0);
                if let Some(started) = std::env::var_os("MCP_TEST_STARTED") {
                    // The test holds the reading end open, so opening does not block.
                    let _ = std::fs::OpenOptions::new()
                        .write(true)
                        .open(started)
                        .and_then(|mut fifo| std::io::Write::write_all(&mut fifo, b"s"));
                }
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(ms)) => text("slept"),
                    () = context.ct.cancelled() => {
                        self.state.cancelled.fetch_add(1, Ordering::SeqCst);
                        self.state.cancel_seen.notify_waiters();
                        text("cancelled")
                    }
                }
            }
            "cancelled" => {
                let seen = self.state.cancel_seen.notified();
                if self.state.cancelled.load(Ordering::SeqCst) == 0 {
                    let _ = tokio::time::timeout(Duration::from_secs(10), seen).await;
                }
                text(&format!(
                    "cancelled:{}",
                    self.state.cancelled.load(Ordering::SeqCst)
                ))
            }
            "crash" => std::process::exit(3),
            "add_tool" => {
                self.state.extra.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text("added")
            }
            "extra" if self.state.extra.load(Ordering::SeqCst) => text("extra tool"),
            "image" => CallToolResult::success(vec![
                ContentBlock::text("an image"),
                ContentBlock::image("iVBORw0KGgo=", "image/png"),
            ]),
            "pid" => text(&std::process::id().to_string()),
            other => return Err(ErrorData::invalid_params(format!("unknown tool {other}"), None)),
        };
        Ok(CallToolResponse::Complete(result))
    }
}

fn record_pids() -> std::io::Result<()> {
    let Some(dir) = std::env::var_os("MCP_TEST_PID_DIR") else {
        return Ok(());
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::write(dir.join(std::process::id().to_string()), "server")?;
    if std::env::var_os("MCP_TEST_GRANDCHILD").is_some() {
        let child = std::process::Command::new("sleep")
            .arg("1000")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        std::fs::write(dir.join(child.id().to_string()), "grandchild")?;
    }
    Ok(())
}

async fn flood_stderr() -> std::io::Result<()> {
    let Some(bytes) = std::env::var("MCP_TEST_STDERR_FLOOD")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
    else {
        return Ok(());
    };
    let mut stderr = tokio::io::stderr();
    let line = format!("{}\n", "noise ".repeat(20));
    let mut written = 0;
    while written < bytes {
        stderr.write_all(line.as_bytes()).await?;
        written += line.len();
    }
    stderr.flush().await
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    record_pids()?;
    if std::env::var_os("MCP_TEST_HANG").is_some() {
        // Read and ignore everything: `initialize` is never answered.
        let mut sink = tokio::io::sink();
        tokio::io::copy(&mut tokio::io::stdin(), &mut sink).await?;
        return Ok(());
    }
    if let Some(gate) = std::env::var_os("MCP_TEST_GATE") {
        // Blocks until the test opens the writing end.
        tokio::task::spawn_blocking(move || std::fs::File::open(gate)).await??;
    }
    flood_stderr().await?;
    match std::env::args().nth(1).as_deref() {
        Some("http") => return serve_http(false).await,
        Some("oauth") => return serve_http(true).await,
        _ => {}
    }
    let service = TestServer::default().serve(rmcp::transport::stdio()).await?;
    service.waiting().await?;
    Ok(())
}

async fn serve_http(with_oauth: bool) -> Result<(), Box<dyn std::error::Error>> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let url = format!("{base}/mcp");
    let auth = with_oauth.then(|| Arc::new(oauth::AuthServer::new(base)));
    let shared = TestServer::default();
    let service = StreamableHttpService::new(
        move || Ok(shared.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let mut stdout = tokio::io::stdout();
    stdout.write_all(format!("{url}\n").as_bytes()).await?;
    stdout.flush().await?;
    let serve = async {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (mcp, auth) = (service.clone(), auth.clone());
            let service = hyper::service::service_fn(move |request| {
                let (mcp, auth) = (mcp.clone(), auth.clone());
                async move {
                    let request = match auth {
                        Some(auth) => match auth.route(request).await {
                            Ok(reply) => return Ok::<_, std::convert::Infallible>(reply),
                            Err(request) => request,
                        },
                        None => request,
                    };
                    Ok(mcp.handle(request).await)
                }
            });
            tokio::spawn(async move {
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(io, service)
                    .await;
            });
        }
    };
    let stdin_closed = async {
        let mut sink = tokio::io::sink();
        let _ = tokio::io::copy(&mut tokio::io::stdin(), &mut sink).await;
    };
    tokio::select! {
        () = serve => {}
        () = stdin_closed => {}
    }
    Ok(())
}
