//! [`ClientHandle`]: how the agent talks back to the client (events, and requests whose answers it
//! awaits), and why that can fail.

use std::sync::{Arc, RwLock};

use tokio::sync::mpsc;

use super::pending::{DuplicateId, NoAnswer, PendingRequests, Reply, RequestScope};
use super::turn::TurnSlot;
use crate::event_filter::EventFilter;
use crate::message::{ClientRequest, Event, Request};
use crate::{jsonrpc, methods};

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
    out: mpsc::Sender<String>,
    pending: Arc<PendingRequests>,
    turn: Arc<TurnSlot>,
    /// The event types this client parses, decided at `initialize`. A std lock: read once per event,
    /// never held across an await.
    events: Arc<RwLock<EventFilter>>,
}

impl ClientHandle {
    pub(crate) fn new(out: mpsc::Sender<String>, pending: Arc<PendingRequests>, turn: Arc<TurnSlot>) -> Self {
        Self {
            out,
            pending,
            turn,
            events: Arc::default(),
        }
    }

    /// Streams one event (`method: "event"`), unless the client cannot parse its type (see
    /// [`EventFilter`]; the caller records it all the same); returns whether it was sent. Waits only when
    /// the client is slow to read (bounded queue). A `TurnEnd` ends a turn the agent started itself
    /// ([`crate::TurnStarter`]) for the client, sent or not.
    pub async fn send_event(&self, event: &Event) -> Result<bool, ConnectionClosed> {
        let sent = if self.event_filter().allows(event) {
            let line = jsonrpc::notification_line(methods::EVENT, event).map_err(|e| {
                tracing::error!(error = %e, "event failed to serialize");
                ConnectionClosed
            })?;
            self.send_line(line).await?;
            true
        } else {
            false
        };
        if matches!(event, Event::TurnEnd(_)) {
            self.turn.turn_end_sent(&self.pending);
        }
        Ok(sent)
    }

    /// Sends a recorded `event` notification `line` of type `kind` as it is (replay's fast path), unless
    /// the client cannot parse it. Returns whether it was sent.
    pub async fn send_event_line(&self, kind: &str, line: String) -> Result<bool, ConnectionClosed> {
        if !self.event_filter().allows_event_line(kind, &line) {
            return Ok(false);
        }
        self.send_line(line).await.map(|()| true)
    }

    /// Sets which event types this client is sent (the server does it at `initialize`).
    pub(crate) fn set_event_filter(&self, filter: EventFilter) {
        *self.events.write().unwrap_or_else(|e| e.into_inner()) = filter;
    }

    fn event_filter(&self) -> EventFilter {
        self.events.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Asks the client `request` and waits for its answer, typed; or says why there is none.
    /// Dropping the future (a cancelled turn, a timeout) unregisters the request.
    pub async fn ask<R: ClientRequest>(
        &self,
        request: &R,
        scope: RequestScope,
    ) -> Result<R::Answer, NoAnswer> {
        self.send(request, scope).await?.answer().await
    }

    /// Sends `request`, whose answer is awaited through the returned [`Reply`] (for an asker that does
    /// something between the two: records the request, races the answer against a cancel). The id is
    /// the payload's own id, as in the reference.
    pub async fn send<R: ClientRequest>(
        &self,
        request: &R,
        scope: RequestScope,
    ) -> Result<Reply<R::Answer>, SendRequestError> {
        let request: Request = request.clone().into();
        let waiter = self.pending.register(request.id(), scope)?;
        let line = jsonrpc::request_line(methods::REQUEST, request.id(), &request).map_err(|e| {
            tracing::error!(error = %e, "request failed to serialize");
            ConnectionClosed
        })?;
        self.send_line(line).await?;
        Ok(Reply::new(waiter))
    }

    /// Sends a recorded request during `replay`: not registered, so the client's answer is ignored.
    pub async fn replay_request(&self, request: &Request) -> Result<(), ConnectionClosed> {
        let line =
            jsonrpc::request_line(methods::REQUEST, request.id(), request).map_err(|_| ConnectionClosed)?;
        self.send_line(line).await
    }

    /// Sends a pre-serialized JSON-RPC line (used by replay's fast path and by the server itself).
    pub async fn send_line(&self, line: String) -> Result<(), ConnectionClosed> {
        self.out.send(line).await.map_err(|_| ConnectionClosed)
    }

    /// Completes a pending request from inside the server, as if the client had answered (used when
    /// `approve_for_session` releases other requests for the same action).
    pub fn resolve_pending(&self, id: &str, answer: super::pending::Answer) -> bool {
        self.pending.resolve(id, answer)
    }

    /// Has the connection gone away?
    pub fn is_closed(&self) -> bool {
        self.out.is_closed()
    }
}
