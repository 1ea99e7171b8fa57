//! The seam between the protocol and the agent: [`WireAgent`], which the core implements, and
//! [`ClientHandle`], through which the core talks back to the client.
//!
//! The server owns the turn state (is a `prompt` or `replay` running?) and answers the -32000 state
//! errors itself, so an agent never sees a second concurrent prompt, and never a `steer` or `cancel`
//! without a running turn. A turn the agent starts itself goes through the same slot
//! ([`crate::TurnStarter`]).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use crate::error_code::RpcError;
use crate::event_filter::EventFilter;
use crate::jsonrpc;
use crate::message::{Event, Request, UserInput};
use crate::params::{
    InitializeParams, InitializeResult, PromptResult, ReplayResult, SetPlanModeResult, SteerResult,
};
use crate::server::pending::{DuplicateId, PendingAnswer, PendingRequests, RequestScope};
use crate::server::{Journal, JournalLink, Outbox, TurnSlot};

/// What the agent must do for each method. Each call runs in its own task; `prompt` and `replay` are
/// never called while another `prompt` or `replay` runs.
#[async_trait]
pub trait WireAgent: Send + Sync + 'static {
    /// `initialize`: register external tools and hook subscriptions, report what the server offers.
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult, RpcError>;
    /// `prompt`: run one turn; `cancel` fires when the client sends `cancel` or goes away.
    async fn prompt(&self, input: UserInput, cancel: CancellationToken) -> Result<PromptResult, RpcError>;
    /// `steer`: queue input for the running turn (only called while a turn runs).
    async fn steer(&self, input: UserInput) -> Result<SteerResult, RpcError>;
    /// `set_plan_mode`: allowed at any time.
    async fn set_plan_mode(&self, enabled: bool) -> Result<SetPlanModeResult, RpcError>;
    /// `replay`: re-send the recorded session through the client handle.
    async fn replay(&self, cancel: CancellationToken) -> Result<ReplayResult, RpcError>;
    /// A `prompt` that is a side question (`/btw <question>`, see [`crate::side_question`]): answer it
    /// from the conversation as it stands, between `BtwBegin` and `BtwEnd`, without touching the
    /// conversation. Called whether or not a turn runs, and beside it. The default refuses (agents that
    /// have no conversation, test doubles).
    async fn side_question(&self, question: String) -> Result<PromptResult, RpcError> {
        let _ = question;
        Err(RpcError::internal(
            "Side questions are not supported by this agent",
        ))
    }
    /// The connection is closing: flush and release what the agent holds. Called once, after the
    /// running turn (if any) was cancelled.
    async fn shutdown(&self);
}

/// The connection went away; nothing more can be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the wire connection is closed")]
pub struct ConnectionClosed;

/// Why a request could not be sent.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SendRequestError {
    /// See [`ConnectionClosed`].
    #[error(transparent)]
    Closed(#[from] ConnectionClosed),
    /// Another request with the same id is still pending.
    #[error(transparent)]
    Duplicate(#[from] DuplicateId),
}

/// A cheap, clonable handle for sending events and requests to the client.
#[derive(Debug, Clone)]
pub struct ClientHandle {
    out: Arc<Outbox>,
    pending: Arc<PendingRequests>,
    turn: Arc<TurnSlot>,
    /// The event types this client parses, decided at `initialize`. A std lock: read once per event,
    /// never held across an await.
    events: Arc<RwLock<EventFilter>>,
    /// Whether the client asked for errors as data (`capabilities.error_data`), decided at `initialize`.
    error_data: Arc<AtomicBool>,
}

impl ClientHandle {
    pub(crate) fn new(out: Arc<Outbox>, pending: Arc<PendingRequests>, turn: Arc<TurnSlot>) -> Self {
        Self {
            out,
            pending,
            turn,
            events: Arc::default(),
            error_data: Arc::default(),
        }
    }

    /// Streams one event (`method: "event"`), unless the client cannot parse its type (see
    /// [`EventFilter`]; the caller records it all the same); returns whether it was sent. Waits only when
    /// the client is slow to read (bounded queue). A `TurnEnd` ends a turn the agent started itself
    /// ([`crate::TurnStarter`]) for the client, sent or not.
    pub async fn send_event(&self, event: &Event) -> Result<bool, ConnectionClosed> {
        let line = jsonrpc::EventLine::new(event).map_err(|e| {
            tracing::error!(error = %e, "event failed to serialize");
            ConnectionClosed
        })?;
        self.send_event_as(event, line).await
    }

    /// [`ClientHandle::send_event`] for an event already serialized as `line` (by a caller that also
    /// records its message: each event is serialized once).
    pub async fn send_event_as(
        &self,
        event: &Event,
        line: jsonrpc::EventLine,
    ) -> Result<bool, ConnectionClosed> {
        let allowed = self
            .events
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .allows(event);
        if allowed {
            self.send_line(line.into_line()).await?;
        }
        if matches!(event, Event::TurnEnd(_)) {
            self.turn.turn_end_sent(&self.pending);
        }
        Ok(allowed)
    }

    /// Sends a recorded `event` notification `line` of type `kind` as it is (replay's fast path), unless
    /// the client cannot parse it. Returns whether it was sent.
    pub async fn send_event_line(&self, kind: &str, line: String) -> Result<bool, ConnectionClosed> {
        let allowed = self
            .events
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .allows_event_line(kind, &line);
        if !allowed {
            return Ok(false);
        }
        self.send_line(line).await.map(|()| true)
    }

    /// Sets which event types this client is sent (the server does it at `initialize`).
    pub(crate) fn set_event_filter(&self, filter: EventFilter) {
        *self.events.write().unwrap_or_else(|e| e.into_inner()) = filter;
    }

    /// Sets whether this client is sent errors as data (the server does it at `initialize`).
    pub(crate) fn set_error_data(&self, on: bool) {
        self.error_data.store(on, Ordering::Relaxed);
    }

    /// The JSON-RPC error line answering `id` with `error`, as this client is sent errors (with
    /// [`crate::ErrorData`] as `data` when it asked for that).
    pub fn error_line(&self, id: Option<&str>, error: &RpcError) -> String {
        jsonrpc::error_line(id, &error.for_client(self.error_data.load(Ordering::Relaxed)))
    }

    /// Sends a request whose answer is awaited through the returned [`PendingAnswer`]. The id is the
    /// payload's own id, as in the reference.
    pub async fn send_request(
        &self,
        request: &Request,
        scope: RequestScope,
    ) -> Result<PendingAnswer, SendRequestError> {
        let waiter = self.pending.register(request.id(), scope)?;
        let line = jsonrpc::request_line("request", request.id(), request).map_err(|e| {
            tracing::error!(error = %e, "request failed to serialize");
            ConnectionClosed
        })?;
        self.send_line(line).await?;
        Ok(waiter)
    }

    /// Sends a recorded request during `replay`: not registered, so the client's answer is ignored.
    pub async fn replay_request(&self, request: &Request) -> Result<(), ConnectionClosed> {
        let line = jsonrpc::request_line("request", request.id(), request).map_err(|_| ConnectionClosed)?;
        self.send_line(line).await
    }

    /// Sends a pre-serialized JSON-RPC line (used by replay's fast path and by the server itself).
    pub async fn send_line(&self, line: String) -> Result<(), ConnectionClosed> {
        self.out.send(line).await
    }

    /// Has the stdout writer commit `journal` (a session file) before each batch of lines, so that
    /// every record handed to it before a line is in its file before the client reads that line. Held
    /// weakly: dropping the journal detaches it. The returned link tells the writer when the journal
    /// holds records and no line is coming.
    pub fn attach_journal(&self, journal: std::sync::Weak<dyn Journal>) -> JournalLink {
        self.out.attach(journal);
        JournalLink::new(&self.out)
    }

    /// Completes a pending request from inside the server, as if the client had answered (used when
    /// `approve_for_session` releases other requests for the same action).
    pub fn resolve_pending(&self, id: &str, answer: crate::server::pending::Answer) -> bool {
        self.pending.resolve(id, answer)
    }

    /// Has the connection gone away?
    pub fn is_closed(&self) -> bool {
        self.out.is_closed()
    }
}
