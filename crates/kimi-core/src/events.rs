//! Where the agent's events go: to the client, and (merged) to the session's `wire.jsonl`.

use std::sync::Arc;

use kimi_wire::jsonrpc::EventLine;
use kimi_wire::message::{ClientRequest, Event, Request, SubagentEvent};
use kimi_wire::{ClientHandle, NoAnswer, Reply, RequestScope, SendRequestError};

use crate::recorder::WireRecorder;

/// Emits events and turn requests; clonable and cheap.
#[derive(Debug, Clone)]
pub struct EventSink {
    client: ClientHandle,
    recorder: Option<Arc<WireRecorder>>,
    delivery: Delivery,
}

/// Where a sink's events go besides its recorder.
#[derive(Clone)]
enum Delivery {
    /// Straight to the client.
    Client,
    /// A foreground subagent's: to the client through the parent, wrapped.
    Parent(Arc<ParentLink>),
    /// A background agent's: nowhere on the wire (the client did not ask for them mid-turn); an
    /// observer keeps the task's transcript instead.
    Observer(EventObserver),
}

/// Sees every event a background agent emits.
pub type EventObserver = Arc<dyn Fn(&Event) + Send + Sync>;

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Client => f.write_str("Client"),
            Self::Parent(link) => f.debug_tuple("Parent").field(link).finish(),
            Self::Observer(_) => f.write_str("Observer"),
        }
    }
}

/// Who a subagent is, as its forwarded events say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentIdentity {
    /// The parent's `Agent` tool call running it.
    pub parent_tool_call_id: String,
    /// The instance id (`a` and eight hex digits).
    pub agent_id: String,
    /// Its type (`coder`, `explore`, `plan`, ...).
    pub subagent_type: String,
    /// The background task running it, if it runs in the background: its approvals then belong to
    /// that task and outlive the parent's turn.
    pub background_task: Option<String>,
}

#[derive(Debug)]
struct ParentLink {
    sink: EventSink,
    identity: SubagentIdentity,
}

impl EventSink {
    /// A sink to `client`, recording to `recorder` when given (opened with the same client, so the
    /// stdout writer commits it).
    pub fn new(client: ClientHandle, recorder: Option<Arc<WireRecorder>>) -> Self {
        Self {
            client,
            recorder,
            delivery: Delivery::Client,
        }
    }

    /// A subagent's sink: it records the subagent's own events, unwrapped, to `recorder` (its
    /// wire.jsonl), and hands each to `parent` as a `SubagentEvent`, which the parent records and
    /// streams. Requests (approvals, questions) go to the client unwrapped, as the reference's do.
    pub fn for_subagent(parent: &EventSink, identity: SubagentIdentity, recorder: Arc<WireRecorder>) -> Self {
        Self {
            client: parent.client.clone(),
            recorder: Some(recorder),
            delivery: Delivery::Parent(Arc::new(ParentLink {
                sink: parent.clone(),
                identity,
            })),
        }
    }

    /// A background agent's sink: it records to `recorder` (the agent's wire.jsonl) and shows each
    /// event to `observer`; nothing reaches the client but its requests (approvals), which go
    /// unwrapped as a foreground subagent's do.
    pub fn for_background(parent: &EventSink, recorder: Arc<WireRecorder>, observer: EventObserver) -> Self {
        Self {
            client: parent.client.clone(),
            recorder: Some(recorder),
            delivery: Delivery::Observer(observer),
        }
    }

    /// The client handle (for traffic that is not recorded, such as approvals).
    pub fn client(&self) -> &ClientHandle {
        &self.client
    }

    /// The recorder, if this sink records.
    pub fn recorder(&self) -> Option<&Arc<WireRecorder>> {
        self.recorder.as_ref()
    }

    /// Records `event` and streams it to the client, serializing it once for both. Recording comes
    /// first: the stdout writer commits wire.jsonl before it writes the line, so whatever the client has
    /// seen is in the file except at most the record still being merged, even if the process is killed
    /// the next instant. A client that went away is not an error here: the turn notices through its
    /// cancellation.
    pub async fn emit(&self, event: Event) {
        match &self.delivery {
            Delivery::Client => {
                let line = match EventLine::new(&event) {
                    Ok(line) => line,
                    Err(e) => {
                        tracing::error!(error = %e, "event failed to serialize");
                        return;
                    }
                };
                self.record(|recorder| recorder.record_event(&event, Some(line.message())));
                let _ = self.client.send_event_as(&event, line).await;
            }
            Delivery::Observer(observer) => {
                self.record(|recorder| recorder.record_event(&event, None));
                observer(&event);
            }
            Delivery::Parent(link) => {
                self.record(|recorder| recorder.record_event(&event, None));
                let wrapped = Event::SubagentEvent(SubagentEvent {
                    parent_tool_call_id: Some(link.identity.parent_tool_call_id.clone()),
                    agent_id: Some(link.identity.agent_id.clone()),
                    subagent_type: Some(link.identity.subagent_type.clone()),
                    event: Box::new(event),
                });
                // Boxed: a subagent's sink calls its parent's, so the future is recursive in type.
                Box::pin(link.sink.emit(wrapped)).await;
            }
        }
    }

    /// Sends a turn request (external tool call, question) and records it; the answer comes through
    /// the returned [`Reply`].
    pub async fn send<R: ClientRequest>(
        &self,
        request: R,
        scope: RequestScope,
    ) -> Result<Reply<R::Answer>, SendRequestError> {
        // A background agent's questions outlive the turn that started it, as its approvals do.
        let scope = match self.delivery {
            Delivery::Observer(_) => RequestScope::Session,
            _ => scope,
        };
        // Recorded before it is queued, as events are: the client never sees a request the file lacks.
        let recorded: Request = request.clone().into();
        self.record(|recorder| recorder.record_request(&recorded));
        self.client.send(&request, scope).await
    }

    /// [`EventSink::send`], then waits for the answer.
    pub async fn ask<R: ClientRequest>(
        &self,
        request: R,
        scope: RequestScope,
    ) -> Result<R::Answer, NoAnswer> {
        self.send(request, scope).await?.answer().await
    }

    fn record(&self, write: impl FnOnce(&WireRecorder) -> Result<(), crate::recorder::WriteError>) {
        if let Some(recorder) = &self.recorder
            && let Err(e) = write(recorder)
        {
            tracing::error!(error = %e, "wire.jsonl record failed");
        }
    }
}
