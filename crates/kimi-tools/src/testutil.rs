//! Test support: a real wire server on an in-memory pipe, with the test playing the client.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use kimi_wire::message::UserInput;
use kimi_wire::params::{
    InitializeParams, InitializeResult, PromptResult, ReplayResult, SetPlanModeResult, SteerResult,
};
use kimi_wire::{ClientHandle, RpcError, Server, ServerConfig, WireAgent};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};
use tokio_util::sync::CancellationToken;

/// How long a test waits for the server to say something.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The client end of a running server; dropping it closes the connection.
pub(crate) struct FakeClient {
    /// What the agent side uses to reach this client.
    pub handle: ClientHandle,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
}

impl FakeClient {
    pub(crate) fn start() -> Self {
        let (server, handle) = Server::new(ServerConfig::default());
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (server_in, server_out) = tokio::io::split(theirs);
        tokio::spawn(server.run(server_in, server_out, Arc::new(NoAgent), std::future::pending()));
        let (read, writer) = tokio::io::split(ours);
        Self {
            handle,
            lines: BufReader::new(read).lines(),
            writer,
        }
    }

    /// The next JSON-RPC message the server wrote.
    pub(crate) async fn next_message(&mut self) -> Value {
        let line = tokio::time::timeout(READ_TIMEOUT, self.lines.next_line())
            .await
            .expect("the server said nothing in time")
            .expect("reading the server failed")
            .expect("the server closed the connection");
        serde_json::from_str(&line).expect("the server wrote invalid JSON")
    }

    /// Answers request `id` with `result`.
    pub(crate) async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// Answers request `id` with a JSON-RPC error.
    pub(crate) async fn respond_error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
            .await;
    }

    async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .await
            .expect("writing to the server failed");
    }
}

/// An agent that is never called: these tests only use server-to-client requests.
struct NoAgent;

#[async_trait]
impl WireAgent for NoAgent {
    async fn initialize(&self, _params: InitializeParams) -> Result<InitializeResult, RpcError> {
        Err(RpcError::internal("not used in tests"))
    }
    async fn prompt(&self, _input: UserInput, _cancel: CancellationToken) -> Result<PromptResult, RpcError> {
        Err(RpcError::internal("not used in tests"))
    }
    async fn steer(&self, _input: UserInput) -> Result<SteerResult, RpcError> {
        Err(RpcError::internal("not used in tests"))
    }
    async fn set_plan_mode(&self, _enabled: bool) -> Result<SetPlanModeResult, RpcError> {
        Err(RpcError::internal("not used in tests"))
    }
    async fn replay(&self, _cancel: CancellationToken) -> Result<ReplayResult, RpcError> {
        Err(RpcError::internal("not used in tests"))
    }
    async fn shutdown(&self) {}
}
