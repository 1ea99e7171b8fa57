//! The stdio server: reads capped lines, classifies them, dispatches each request to its own task, routes
//! client answers to their askers, and owns the turn state. The agent reaches the client through a
//! [`ClientHandle`] (`client.rs`).
//!
//! Shutdown reads top to bottom in [`Server::run`]: input ends (EOF, a read error, stdout gone or the
//! caller's shutdown signal) → no turn may start any more and the running one is cancelled → every
//! pending request is abandoned → in-flight handlers and the running turn get a grace period → the agent
//! is told to shut down → the writer drains what is queued and stops.

mod client;
mod outbox;
pub mod pending;
mod turn;
pub mod writer;

use std::collections::HashMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt as _;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncRead, BufReader};
use tokio::task::{self, JoinSet};
use tokio_util::sync::CancellationToken;

use crate::agent::WireAgent;
use crate::error_code::RpcError;
use crate::error_data::ErrorData;
use crate::event_filter::EventFilter;
use crate::framing::{DEFAULT_MAX_LINE_BYTES, Inbound, LineReader};
use crate::jsonrpc::{self, ClientOutcome, Incoming};
use crate::methods;
use crate::named::from_value_named;
use crate::params::{
    CancelResult, InitializeParams, PromptParams, SetPlanModeParams, SteerParams, SteerResult,
};
use crate::side_question;
pub use client::{ClientHandle, ConnectionClosed, NoAnswer, Reply, SendRequestError};
pub(crate) use outbox::Outbox;
pub use outbox::{IdleSignal, Journal, JournalLink};
use pending::{Abandoned, Answer, PendingRequests, RequestScope};
use turn::TurnSlot;
pub use turn::{AgentTurn, ShuttingDown, TurnStarter};

/// How long in-flight handlers may take to wind down after the connection closes, by default.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The answer to a request whose handler panicked (reference style: `<ExcType>: <message>`).
const HANDLER_PANICKED: &str = "InternalError: the request failed unexpectedly";
/// The answer to a request whose handler was stopped because it outlived the shutdown grace.
const HANDLER_ABORTED: &str = "InternalError: the server shut down before answering";

/// Server settings.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Lines longer than this are skipped and answered with -32700.
    pub max_line_bytes: usize,
    /// How long in-flight handlers may take to wind down once the input has ended.
    pub shutdown_grace: Duration,
    /// When given, the stdout writer is woken by this signal (the runtime going idle) rather than by
    /// each line: see [`IdleSignal`].
    pub idle: Option<IdleSignal>,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            shutdown_grace: SHUTDOWN_GRACE,
            idle: None,
        }
    }
}

/// A server not yet running. Create it first so the agent can be built with its [`ClientHandle`].
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    client: ClientHandle,
    pending: Arc<PendingRequests>,
    turn: Arc<TurnSlot>,
    outbox: Arc<Outbox>,
}

impl Server {
    /// A server and the handle the agent uses to reach the client.
    pub fn new(config: ServerConfig) -> (Self, ClientHandle) {
        let outbox = Outbox::new();
        if let Some(idle) = &config.idle {
            idle.attach(&outbox);
        }
        let pending = Arc::new(PendingRequests::default());
        let turn = Arc::new(TurnSlot::default());
        let client = ClientHandle::new(Arc::clone(&outbox), Arc::clone(&pending), Arc::clone(&turn));
        (
            Self {
                config,
                client: client.clone(),
                pending,
                turn,
                outbox,
            },
            client,
        )
    }

    /// A handle through which the agent starts turns of its own (see [`TurnStarter`]).
    pub fn turn_starter(&self) -> TurnStarter {
        TurnStarter::new(Arc::clone(&self.turn), Arc::clone(&self.pending))
    }

    /// Serves until the input ends or `shutdown` completes. Returns when everything queued is written.
    /// `output` is the process's stdout ([`writer::Output::stdout`]) or any async stream.
    pub async fn run<R, A, S>(self, input: R, output: impl Into<writer::Output>, agent: Arc<A>, shutdown: S)
    where
        R: AsyncRead + Unpin,
        A: WireAgent,
        S: Future<Output = ()>,
    {
        let Server {
            config,
            client,
            pending,
            turn,
            outbox,
        } = self;
        let lost = CancellationToken::new();
        let writer = writer::spawn(Arc::clone(&outbox), output.into(), lost.clone());

        let mut dispatcher = Dispatcher {
            client,
            pending: Arc::clone(&pending),
            agent: Arc::clone(&agent),
            turn: Arc::clone(&turn),
            tasks: JoinSet::new(),
            in_flight: HashMap::new(),
        };
        let mut reader = LineReader::new(BufReader::with_capacity(64 * 1024, input), config.max_line_bytes);
        tokio::pin!(shutdown);
        loop {
            let inbound = tokio::select! {
                biased;
                () = &mut shutdown => break,
                () = lost.cancelled() => break,
                inbound = reader.next() => inbound,
            };
            match inbound {
                Ok(Inbound::Eof) => break,
                Err(e) => {
                    tracing::warn!(error = %e, "stdin read failed; closing");
                    break;
                }
                Ok(Inbound::Blank) => dispatcher.reply_error(None, RpcError::invalid_json()).await,
                Ok(Inbound::Oversized { len }) => {
                    tracing::warn!(len, limit = config.max_line_bytes, "oversized line skipped");
                    let error = RpcError::line_too_long(len, config.max_line_bytes);
                    dispatcher.reply_error(None, error).await;
                }
                Ok(Inbound::Line(line)) => dispatcher.handle_line(&line).await,
            }
            // Reap finished handlers so the set does not grow over a long session.
            while let Some(done) = dispatcher.tasks.try_join_next_with_id() {
                dispatcher.reaped(done).await;
            }
        }

        tracing::info!("wire input closed; shutting down");
        // Cancel first, then release the pending requests: a turn woken by its abandoned approval
        // must already see the cancellation, or it would go on as if the user had said no (and
        // report `finished` instead of `cancelled`).
        if let Some(token) = turn.close() {
            token.cancel();
        }
        pending.abandon_all(Abandoned::ConnectionClosed);
        // A turn the agent started is not one of our tasks: wait for it to free the slot as well.
        let grace = tokio::time::timeout(config.shutdown_grace, async {
            while let Some(done) = dispatcher.tasks.join_next_with_id().await {
                dispatcher.reaped(done).await;
            }
            turn.ended().await;
        });
        if grace.await.is_err() {
            tracing::warn!("handlers did not finish in time; aborting them");
            dispatcher.tasks.abort_all();
            // An aborted handler never answers: its request is answered here, so no client waits forever
            // on a server that is gone.
            while let Some(done) = dispatcher.tasks.join_next_with_id().await {
                dispatcher.reaped(done).await;
            }
        }
        agent.shutdown().await;
        outbox.close();
        drop(dispatcher);
        let _ = writer.await;
    }
}

struct Dispatcher<A> {
    client: ClientHandle,
    pending: Arc<PendingRequests>,
    agent: Arc<A>,
    turn: Arc<TurnSlot>,
    tasks: JoinSet<()>,
    /// The request each running handler answers, so one that dies (a panic, or an abort at shutdown)
    /// still gets an answer: a client must never wait on a request the server dropped.
    in_flight: HashMap<task::Id, InFlight>,
}

/// A request whose handler task runs.
struct InFlight {
    id: String,
    /// Whether the handler holds the turn slot (a `prompt` or `replay`).
    holds_turn: bool,
}

impl<A: WireAgent> Dispatcher<A> {
    async fn handle_line(&mut self, line: &str) {
        match jsonrpc::classify(line) {
            Err(malformed) => self.reply_error(None, malformed.to_error()).await,
            Ok(None) => {}
            Ok(Some(Incoming::Response { id, outcome })) => {
                let answer = match outcome {
                    ClientOutcome::Result(value) => Answer::Result(value),
                    ClientOutcome::Error(error) => Answer::Error(error),
                };
                if !self.pending.resolve(&id, answer) {
                    tracing::warn!(id, "answer to an unknown or finished request ignored");
                }
            }
            // Reference: every inbound method model requires an id, so notifications are dropped.
            Ok(Some(Incoming::Notification { method, .. })) => {
                tracing::debug!(method, "notification ignored");
            }
            Ok(Some(Incoming::Request { id, method, params })) => self.dispatch(id, &method, params).await,
        }
    }

    async fn dispatch(&mut self, id: String, method: &str, params: Option<Value>) {
        match method {
            methods::INITIALIZE => {
                let Some(params) = self.params::<InitializeParams>(&id, method, params).await else {
                    return;
                };
                if self.turn.current().is_some() {
                    return self.reply_error(Some(&id), RpcError::turn_in_progress()).await;
                }
                // Before the agent sees the params: events it sends from now on are judged by them.
                self.client.set_event_filter(EventFilter::for_client(&params));
                self.client
                    .set_error_data(params.capabilities.as_ref().is_some_and(|c| c.error_data));
                // Answered before the next line is read: a `prompt` right behind it must see the
                // external tools and capabilities it registers.
                let result = self.agent.initialize(params).await;
                match result {
                    Ok(result) => {
                        self.reply(&id, &result).await;
                        self.turn.mark_client_ready();
                    }
                    Err(error) => self.reply_error(Some(&id), error).await,
                }
            }
            methods::PROMPT => {
                let Some(params) = self.params::<PromptParams>(&id, method, params).await else {
                    return;
                };
                // A side question is answered beside whatever runs and is no turn of its own.
                if let Some(question) = side_question::parse(&params.user_input) {
                    let agent = Arc::clone(&self.agent);
                    return self.spawn_reply(id, async move { agent.side_question(question).await });
                }
                let Some(token) = self.turn.begin() else {
                    return self.reply_error(Some(&id), RpcError::turn_in_progress()).await;
                };
                let (agent, pending) = (Arc::clone(&self.agent), Arc::clone(&self.pending));
                self.spawn_turn_reply(id, async move {
                    let result = agent.prompt(params.user_input, token).await;
                    pending.abandon_scope(RequestScope::Turn, Abandoned::TurnEnded);
                    result
                });
            }
            methods::STEER => {
                let Some(params) = self.params::<SteerParams>(&id, method, params).await else {
                    return;
                };
                let agent = Arc::clone(&self.agent);
                if self.turn.current().is_none() {
                    // A process that may not write the session says so first: its turn could never run.
                    return self.spawn_reply(id, async move {
                        agent.writable().await?;
                        Err::<SteerResult, _>(RpcError::no_turn_in_progress())
                    });
                }
                self.spawn_reply(id, async move { agent.steer(params.user_input).await });
            }
            methods::CANCEL => match self.turn.current() {
                Some(token) => {
                    token.cancel();
                    self.reply(&id, &CancelResult {}).await;
                }
                None => self.reply_error(Some(&id), RpcError::no_turn_in_progress()).await,
            },
            methods::SET_PLAN_MODE => {
                let Some(params) = self.params::<SetPlanModeParams>(&id, method, params).await else {
                    return;
                };
                let agent = Arc::clone(&self.agent);
                self.spawn_reply(id, async move { agent.set_plan_mode(params.enabled).await });
            }
            methods::REPLAY => {
                let Some(token) = self.turn.begin() else {
                    return self.reply_error(Some(&id), RpcError::turn_in_progress()).await;
                };
                let agent = Arc::clone(&self.agent);
                self.spawn_turn_reply(id, async move { agent.replay(token).await });
            }
            other => {
                self.reply_error(Some(&id), RpcError::method_not_found(other))
                    .await
            }
        }
    }

    /// Parses params strictly (by field name, never positionally); on failure answers -32602 and returns
    /// `None`.
    async fn params<P: DeserializeOwned + Serialize>(
        &self,
        id: &str,
        method: &str,
        params: Option<Value>,
    ) -> Option<P> {
        match from_value_named(&params.unwrap_or(Value::Null)) {
            Ok(params) => Some(params),
            Err(e) => {
                tracing::debug!(method, error = %e, "invalid params");
                let error = RpcError::invalid_params(method, e.path(), e.reason());
                self.reply_error(Some(id), error).await;
                None
            }
        }
    }

    fn spawn_reply<R, F>(&mut self, id: String, work: F)
    where
        R: Serialize + Send + 'static,
        F: Future<Output = Result<R, RpcError>> + Send + 'static,
    {
        self.spawn_reply_after(id, work, None);
    }

    /// Like [`Self::spawn_reply`] for work that holds the turn slot, which it frees when the work is done.
    fn spawn_turn_reply<R, F>(&mut self, id: String, work: F)
    where
        R: Serialize + Send + 'static,
        F: Future<Output = Result<R, RpcError>> + Send + 'static,
    {
        let turn = Arc::clone(&self.turn);
        self.spawn_reply_after(id, work, Some(turn));
    }

    fn spawn_reply_after<R, F>(&mut self, id: String, work: F, turn: Option<Arc<TurnSlot>>)
    where
        R: Serialize + Send + 'static,
        F: Future<Output = Result<R, RpcError>> + Send + 'static,
    {
        let client = self.client.clone();
        let in_flight = InFlight {
            id: id.clone(),
            holds_turn: turn.is_some(),
        };
        let handle = self.tasks.spawn(async move {
            // A handler that panics still answers: a client must never wait on a request we dropped.
            let result = AssertUnwindSafe(work).catch_unwind().await.unwrap_or_else(|_| {
                tracing::error!(id, "request handler panicked");
                Err(RpcError::internal(HANDLER_PANICKED))
            });
            // Free the slot before the answer is queued: a client may send the next prompt the moment it
            // reads this one's result. A turn the agent starts itself waits until the answer is queued, so
            // the client never sees it begin before the answer to its own request.
            if let Some(turn) = &turn {
                turn.end_before_reply();
            }
            let line = match result {
                Ok(result) => jsonrpc::result_line(&id, &result)
                    .unwrap_or_else(|e| client.error_line(Some(&id), &RpcError::internal(e.to_string()))),
                Err(error) => client.error_line(Some(&id), &error),
            };
            let _ = client.send_line(line).await;
            if let Some(turn) = &turn {
                turn.replied();
            }
        });
        self.in_flight.insert(handle.id(), in_flight);
    }

    /// A handler task ended. One that did not run to its end (it panicked or was aborted) has not
    /// answered: answer for it, and free the turn slot it held.
    async fn reaped(&mut self, done: Result<(task::Id, ()), task::JoinError>) {
        let (task, failure) = match done {
            Ok((task, ())) => (task, None),
            Err(error) => (error.id(), Some(error)),
        };
        let Some(request) = self.in_flight.remove(&task) else {
            return;
        };
        let Some(failure) = failure else { return };
        let error = if failure.is_panic() {
            tracing::error!(id = request.id, "request handler panicked");
            RpcError::internal(HANDLER_PANICKED)
        } else {
            RpcError::internal(HANDLER_ABORTED).with_detail(ErrorData::ServerShuttingDown)
        };
        if request.holds_turn {
            self.turn.end_before_reply();
        }
        self.reply_error(Some(&request.id), error).await;
        if request.holds_turn {
            self.turn.replied();
        }
    }

    async fn reply<R: Serialize>(&self, id: &str, result: &R) {
        let line = jsonrpc::result_line(id, result).unwrap_or_else(|e| {
            self.client
                .error_line(Some(id), &RpcError::internal(e.to_string()))
        });
        let _ = self.client.send_line(line).await;
    }

    async fn reply_error(&self, id: Option<&str>, error: RpcError) {
        let _ = self.client.send_line(self.client.error_line(id, &error)).await;
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use serde_json::{Value, json};
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

    use super::*;
    use crate::message::UserInput;
    use crate::params::{InitializeResult, PromptResult, ReplayResult, SetPlanModeResult, SteerResult};

    /// `prompt "panic"` panics, `prompt "hang"` never ends (not even when cancelled), others finish.
    struct Faulty;

    #[async_trait]
    impl WireAgent for Faulty {
        async fn initialize(&self, _: InitializeParams) -> Result<InitializeResult, RpcError> {
            Err(RpcError::internal("not used"))
        }
        async fn prompt(&self, input: UserInput, _: CancellationToken) -> Result<PromptResult, RpcError> {
            match input.text_summary().as_str() {
                "panic" => panic!("a bug in a handler"),
                "hang" => std::future::pending().await,
                _ => Ok(PromptResult::finished()),
            }
        }
        async fn steer(&self, _: UserInput) -> Result<SteerResult, RpcError> {
            Ok(SteerResult::default())
        }
        async fn set_plan_mode(&self, _: bool) -> Result<SetPlanModeResult, RpcError> {
            Err(RpcError::internal("not used"))
        }
        async fn replay(&self, _: CancellationToken) -> Result<ReplayResult, RpcError> {
            Err(RpcError::internal("not used"))
        }
        async fn shutdown(&self) {}
    }

    type Lines = tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>;

    async fn start() -> (
        tokio::task::JoinHandle<()>,
        tokio::io::WriteHalf<tokio::io::DuplexStream>,
        Lines,
    ) {
        let (server, _) = Server::new(ServerConfig {
            shutdown_grace: Duration::from_millis(50),
            ..ServerConfig::default()
        });
        let (ours, theirs) = tokio::io::duplex(1 << 16);
        let (server_in, server_out) = tokio::io::split(theirs);
        let running =
            tokio::spawn(server.run(server_in, server_out, Arc::new(Faulty), std::future::pending()));
        let (read, write) = tokio::io::split(ours);
        (running, write, BufReader::new(read).lines())
    }

    async fn send(write: &mut tokio::io::WriteHalf<tokio::io::DuplexStream>, id: &str, input: &str) {
        let line = json!({"jsonrpc": "2.0", "id": id, "method": "prompt", "params": {"user_input": input}});
        write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
    }

    async fn next(lines: &mut Lines) -> Value {
        let line = lines.next_line().await.unwrap().unwrap();
        serde_json::from_str(&line).unwrap()
    }

    #[tokio::test]
    async fn a_handler_that_panics_still_answers_and_frees_the_turn() {
        let (_running, mut write, mut lines) = start().await;
        send(&mut write, "1", "panic").await;
        assert_eq!(
            next(&mut lines).await["error"],
            json!({"code": -32603, "message": HANDLER_PANICKED, "data": null})
        );
        send(&mut write, "2", "hi").await;
        assert_eq!(next(&mut lines).await["result"], json!({"status": "finished"}));
        // A client that asks for errors as data is told the kind.
        ask_for_error_data(&mut write, &mut lines).await;
        send(&mut write, "3", "panic").await;
        assert_eq!(
            next(&mut lines).await["error"],
            json!({"code": -32603, "message": HANDLER_PANICKED, "data": {"kind": "internal_error"}})
        );
    }

    /// `initialize` with `capabilities.error_data` (Faulty refuses it, but the server has taken note).
    async fn ask_for_error_data(
        write: &mut tokio::io::WriteHalf<tokio::io::DuplexStream>,
        lines: &mut Lines,
    ) {
        let line = json!({"jsonrpc": "2.0", "id": "init", "method": "initialize",
                          "params": {"protocol_version": "1.10", "capabilities": {"error_data": true}}});
        write.write_all(format!("{line}\n").as_bytes()).await.unwrap();
        assert_eq!(next(lines).await["id"], "init");
    }

    #[tokio::test]
    async fn a_handler_cut_short_by_shutdown_names_its_kind() {
        let (running, mut write, mut lines) = start().await;
        ask_for_error_data(&mut write, &mut lines).await;
        send(&mut write, "1", "hang").await;
        write.shutdown().await.unwrap();
        assert_eq!(
            next(&mut lines).await["error"],
            json!({"code": -32603, "message": HANDLER_ABORTED, "data": {"kind": "server_shutting_down"}})
        );
        running.await.unwrap();
    }

    #[tokio::test]
    async fn a_handler_that_outlives_the_shutdown_grace_is_answered_for() {
        let (running, mut write, mut lines) = start().await;
        send(&mut write, "1", "hang").await;
        write.shutdown().await.unwrap();
        // The (shortened) grace runs out; the request is answered before the server returns.
        assert_eq!(
            next(&mut lines).await,
            json!({"jsonrpc": "2.0", "id": "1", "error": {"code": -32603, "message": HANDLER_ABORTED, "data": null}})
        );
        running.await.unwrap();
    }
}
