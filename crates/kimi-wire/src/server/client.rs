//! [`ClientHandle`]: how the agent talks back to the client (events, and requests whose answers it
//! awaits), and why that can fail.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

use serde::Serialize;
use serde::de::DeserializeOwned;

pub use super::outbox::ConnectionClosed;
use super::outbox::{Journal, JournalLink, Outbox};
use super::pending::{Abandoned, Answer, DuplicateId, PendingAnswer, PendingRequests, RequestScope};
use super::turn::TurnSlot;
use crate::error_code::RpcError;
use crate::event_filter::EventFilter;
use crate::message::{ClientRequest, Event, Request};
use crate::named::from_value_named;
use crate::{jsonrpc, methods};

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

/// Why a request got no answer of its type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NoAnswer {
    /// It could not be sent.
    #[error(transparent)]
    NotSent(#[from] SendRequestError),
    /// The client answered with an error.
    #[error("the client answered with error {}: {}", .0.code, .0.message)]
    Error(RpcError),
    /// The client's `result` is not an answer of the request's kind.
    #[error("malformed answer: {0}")]
    Malformed(String),
    /// No answer will come (see [`Abandoned`]).
    #[error("abandoned: {0:?}")]
    Abandoned(Abandoned),
}

impl Answer {
    /// The answer as an `A`, or why it is none.
    pub fn read<A: DeserializeOwned + Serialize>(self) -> Result<A, NoAnswer> {
        match self {
            Self::Result(value) => from_value_named(&value).map_err(|e| NoAnswer::Malformed(e.to_string())),
            Self::Error(error) => Err(NoAnswer::Error(error)),
            Self::Abandoned(why) => Err(NoAnswer::Abandoned(why)),
        }
    }
}

/// The asker's side of one pending request whose answer is an `A` (see
/// [`crate::message::ClientRequest`]).
#[derive(Debug)]
pub struct Reply<A> {
    waiter: PendingAnswer,
    answer: PhantomData<fn() -> A>,
}

impl<A: DeserializeOwned + Serialize> Reply<A> {
    pub(crate) fn new(waiter: PendingAnswer) -> Self {
        Self {
            waiter,
            answer: PhantomData,
        }
    }

    /// The JSON-RPC id the request was sent with.
    pub fn id(&self) -> &str {
        self.waiter.id()
    }

    /// Waits for the answer and reads it as an `A`. Dropping the future unregisters the request.
    pub async fn answer(self) -> Result<A, NoAnswer> {
        self.waiter.wait().await.read()
    }
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
        let allowed = self.event_filter().allows(event);
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
        if !self.event_filter().allows_event_line(kind, &line) {
            return Ok(false);
        }
        self.send_line(line).await.map(|()| true)
    }

    /// Sets which event types this client is sent (the server does it at `initialize`).
    pub(crate) fn set_event_filter(&self, filter: EventFilter) {
        *self.events.write().unwrap_or_else(|e| e.into_inner()) = filter;
    }

    /// Read once per event; the lock is not held beyond the check.
    fn event_filter(&self) -> std::sync::RwLockReadGuard<'_, EventFilter> {
        self.events.read().unwrap_or_else(|e| e.into_inner())
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
    pub fn resolve_pending(&self, id: &str, answer: Answer) -> bool {
        self.pending.resolve(id, answer)
    }

    /// Has the connection gone away?
    pub fn is_closed(&self) -> bool {
        self.out.is_closed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn a_reply_is_read_as_its_answer_type_or_says_why_not() {
        #[derive(Debug, PartialEq, serde::Deserialize, serde::Serialize)]
        struct Pong {
            n: u32,
        }
        let reg = Arc::new(PendingRequests::default());
        let cases = [
            (Answer::Result(json!({"n": 1})), Ok(Pong { n: 1 })),
            (Answer::Result(json!({"n": "one"})), Err("malformed")),
            (Answer::Result(json!([1])), Err("malformed")),
            (Answer::Error(RpcError::new(-32000, "no")), Err("error")),
            (Answer::Abandoned(Abandoned::TurnEnded), Err("abandoned")),
        ];
        for (answer, expected) in cases {
            let reply = Reply::<Pong>::new(reg.register("a", RequestScope::Turn).unwrap());
            assert!(reg.resolve("a", answer.clone()));
            let got = reply.answer().await.map_err(|e| match e {
                NoAnswer::Malformed(_) => "malformed",
                NoAnswer::Error(_) => "error",
                NoAnswer::Abandoned(_) => "abandoned",
                NoAnswer::NotSent(_) => "not sent",
            });
            assert_eq!(got, expected, "{answer:?}");
        }
    }
}
