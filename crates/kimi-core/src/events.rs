//! Where the agent's events go: to the client, and (merged) to the session's `wire.jsonl`.

use std::sync::Arc;

use kimi_wire::message::{Event, Request, WireMessage};
use kimi_wire::{ClientHandle, PendingAnswer, RequestScope, SendRequestError};

use crate::recorder::WireRecorder;

/// Emits events and turn requests; clonable and cheap.
#[derive(Debug, Clone)]
pub struct EventSink {
    client: ClientHandle,
    recorder: Option<Arc<WireRecorder>>,
}

impl EventSink {
    /// A sink to `client`, recording to `recorder` when given.
    pub fn new(client: ClientHandle, recorder: Option<Arc<WireRecorder>>) -> Self {
        Self { client, recorder }
    }

    /// The client handle (for traffic that is not recorded, such as approvals).
    pub fn client(&self) -> &ClientHandle {
        &self.client
    }

    /// The recorder, if this sink records.
    pub fn recorder(&self) -> Option<&Arc<WireRecorder>> {
        self.recorder.as_ref()
    }

    /// Records `event` and streams it to the client. Recording comes first and waits for the message it
    /// displaces to be written, so whatever the client has seen is in wire.jsonl except at most the
    /// record still being merged, even if the process is killed the next instant. A client that went
    /// away is not an error here: the turn notices through its cancellation.
    pub async fn emit(&self, event: Event) {
        if self.recorder.is_some() {
            self.record(WireMessage::Event(event.clone())).await;
        }
        let _ = self.client.send_event(&event).await;
    }

    /// Sends a turn request (external tool call, question) and records it.
    pub async fn request(
        &self,
        request: Request,
        scope: RequestScope,
    ) -> Result<PendingAnswer, SendRequestError> {
        let waiter = self.client.send_request(&request, scope).await;
        self.record(WireMessage::Request(request)).await;
        waiter
    }

    async fn record(&self, message: WireMessage) {
        if let Some(recorder) = &self.recorder
            && let Err(e) = recorder.record(message).await
        {
            tracing::error!(error = %e, "wire.jsonl record failed");
        }
    }
}
