//! Test support for crates that talk to a client through a [`ClientHandle`]: a real [`Server`] on an
//! in-memory pipe, the test playing the client. Built for tests only (`test-support`); its helpers
//! panic when the server does not answer as a test expects, which is how a test fails.

#![allow(clippy::expect_used, clippy::missing_panics_doc)]

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, ReadHalf, WriteHalf};
use tokio_util::sync::CancellationToken;

use crate::message::{Event, StepBegin, UserInput};
use crate::params::{
    InitializeParams, InitializeResult, PromptResult, ReplayResult, SetPlanModeResult, SteerResult,
};
use crate::{ClientHandle, RpcError, Server, ServerConfig, WireAgent};

/// How long a test waits for the server to say something.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The client end of a running server; dropping it closes the connection.
pub struct FakeClient {
    /// What the agent side uses to reach this client.
    pub handle: ClientHandle,
    lines: Lines<BufReader<ReadHalf<DuplexStream>>>,
    writer: WriteHalf<DuplexStream>,
}

impl FakeClient {
    /// Starts a server (with an agent that is never called) and connects to it.
    pub fn start() -> Self {
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
    pub async fn next_message(&mut self) -> Value {
        let line = tokio::time::timeout(READ_TIMEOUT, self.lines.next_line())
            .await
            .expect("the server said nothing in time")
            .expect("reading the server failed")
            .expect("the server closed the connection");
        serde_json::from_str(&line).expect("the server wrote invalid JSON")
    }

    /// The next message, which must be an event; returns its `{type, payload}`.
    pub async fn next_event(&mut self) -> Value {
        let message = self.next_message().await;
        assert_eq!(message["method"], "event", "{message}");
        message["params"].clone()
    }

    /// The next message, which must be a request of type `kind`; returns `(json-rpc id, payload)`.
    pub async fn next_request(&mut self, kind: &str) -> (Value, Value) {
        let message = self.next_message().await;
        assert_eq!(message["method"], "request", "{message}");
        assert_eq!(message["params"]["type"], kind, "{message}");
        (message["id"].clone(), message["params"]["payload"].clone())
    }

    /// Asserts nothing was sent before this point, by sending a marker event and reading it back first.
    pub async fn assert_quiet(&mut self) {
        self.handle
            .send_event(&Event::StepBegin(StepBegin { n: 99 }))
            .await
            .expect("connection open");
        let event = self.next_event().await;
        assert_eq!(
            event,
            json!({"type": "StepBegin", "payload": {"n": 99}}),
            "unexpected message before the marker"
        );
    }

    /// Answers request `id` with `result`.
    pub async fn respond(&mut self, id: &Value, result: Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await;
    }

    /// Answers request `id` with a JSON-RPC error.
    pub async fn respond_error(&mut self, id: &Value, code: i64, message: &str) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
            .await;
    }

    /// Writes `message` as one line.
    pub async fn send(&mut self, message: Value) {
        let mut line = message.to_string();
        line.push('\n');
        self.writer
            .write_all(line.as_bytes())
            .await
            .expect("writing to the server failed");
    }
}

/// Never called: tests with a fake client use only events and server-to-client requests.
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
