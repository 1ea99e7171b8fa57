//! Delivering the session's notifications (background tasks that finished, and later scheduled prompts
//! and background agents): to the model as user messages at the start of each step, and to the client
//! as `Notification` events at the start of each step and before `TurnEnd` (reference `KimiSoul._step`
//! and `run_soul`'s notification pump). Only a soul made with a queue delivers; subagents have none.

use kimi_llm::Message;
use kimi_wire::message::{Event, Notification};

use super::Soul;
use super::TurnError;
use crate::config::HookEvent;
use crate::hooks::input as hook_input;
use crate::notifications::{LLM_BATCH, NotificationEvent, NotificationQueue, Sink, WIRE_BATCH};

impl Soul {
    /// Start of a step: pending notifications go to the client, then (at most [`LLM_BATCH`]) into the
    /// context as user messages, each firing the `Notification` hook.
    pub(super) async fn deliver_notifications(&self) -> Result<(), TurnError> {
        let Some(queue) = self.notifications.as_deref() else {
            return Ok(());
        };
        self.deliver_to_client(queue).await;
        for event in queue.pending(Sink::Llm, LLM_BATCH) {
            let text = queue.llm_text(&event);
            self.context.lock().await.append(Message::user_text(text))?;
            queue.ack(Sink::Llm, &event.id);
            let input = hook_input::notification(
                "llm",
                &event.kind,
                &event.title,
                &event.body,
                event.severity.as_str(),
            );
            self.hooks
                .trigger_detached(HookEvent::Notification, event.kind.clone(), input);
        }
        Ok(())
    }

    /// Sends the client what it has not seen yet (also called just before `TurnEnd`).
    pub(super) async fn deliver_notifications_to_client(&self) {
        if let Some(queue) = self.notifications.as_deref() {
            self.deliver_to_client(queue).await;
        }
    }

    async fn deliver_to_client(&self, queue: &NotificationQueue) {
        loop {
            let batch = queue.pending(Sink::Wire, WIRE_BATCH);
            if batch.is_empty() {
                return;
            }
            for event in batch {
                self.events
                    .emit(Event::Notification(wire_notification(&event)))
                    .await;
                queue.ack(Sink::Wire, &event.id);
            }
        }
    }
}

/// The client's copy of a notification (reference `to_wire_notification`).
fn wire_notification(event: &NotificationEvent) -> Notification {
    Notification {
        id: event.id.clone(),
        category: event.category.as_str().to_owned(),
        r#type: event.kind.clone(),
        source_kind: event.source_kind.clone(),
        source_id: event.source_id.clone(),
        title: event.title.clone(),
        body: event.body.clone(),
        severity: event.severity.as_str().to_owned(),
        created_at: event.created_at,
        payload: event.payload.clone(),
    }
}
