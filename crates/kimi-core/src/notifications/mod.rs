//! Notifications: things that happened outside a turn (a background task finished) and that the model
//! and the client should hear about.
//!
//! Producers [`NotificationQueue::publish`] events; the agent loop drains them at the start of each step
//! (reference `KimiSoul._step`): up to [`LLM_BATCH`] become user messages for the model, up to
//! [`WIRE_BATCH`] become `Notification` events for the client. Each sink keeps its own delivery state,
//! so the model and the client each see every notification once. Everything is kept in memory and
//! written through to `<session>/notifications/` in the reference's format, so a session resumed by
//! either implementation neither loses nor repeats notifications.
//!
//! A producer can register [`NotificationDetails`] for its `source_kind`, adding lines to the model's
//! copy at delivery time (a background task adds its status and output tail).

mod llm;
pub mod model;
mod store;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, RwLock};

use crate::sync::lock;

pub use llm::{ids_in_history, notification_text};
pub use model::{
    ALL_SINKS, Category, Delivery, DeliveryStatus, NotificationEvent, Severity, Sink, SinkState, unix_now,
};
pub use store::NotificationStore;
pub(crate) use store::write_json;

/// Notifications the model receives per step at most (reference `deliver_pending("llm", limit=4)`).
pub const LLM_BATCH: usize = 4;

/// Notifications the client receives per delivery at most (reference `limit=8`).
pub const WIRE_BATCH: usize = 8;

/// Extra lines for the model's copy of notifications from one kind of source.
pub trait NotificationDetails: Send + Sync + std::fmt::Debug {
    /// Lines placed inside the `<notification>` block, after the body; empty for none.
    fn llm_lines(&self, event: &NotificationEvent) -> Vec<String>;
}

/// What [`NotificationQueue::publish`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Published {
    /// A new notification, with this id.
    New(String),
    /// An earlier one had the same dedupe key; its id.
    Duplicate(String),
}

#[derive(Debug)]
struct Entry {
    event: NotificationEvent,
    delivery: Delivery,
}

/// The session's notifications and their delivery state.
#[derive(Debug)]
pub struct NotificationQueue {
    /// `None` keeps everything in memory (tests, sessions without a directory).
    store: Option<NotificationStore>,
    /// Oldest first. A std mutex: sections are short, and the small file writes inside keep each
    /// notification's files in the order of its state changes.
    entries: Mutex<Vec<Entry>>,
    details: RwLock<HashMap<String, Arc<dyn NotificationDetails>>>,
}

impl NotificationQueue {
    /// The queue of the session in `session_dir`, with the notifications already stored there.
    pub fn open(session_dir: &Path) -> Self {
        let store = NotificationStore::new(session_dir.join("notifications"));
        let mut entries: Vec<Entry> = store
            .load_all()
            .into_iter()
            .map(|(event, delivery)| Entry { event, delivery })
            .collect();
        entries.sort_by(|a, b| a.event.created_at.total_cmp(&b.event.created_at));
        Self {
            store: Some(store),
            entries: Mutex::new(entries),
            details: RwLock::new(HashMap::new()),
        }
    }

    /// A queue that writes nothing to disk.
    pub fn in_memory() -> Self {
        Self {
            store: None,
            entries: Mutex::new(Vec::new()),
            details: RwLock::new(HashMap::new()),
        }
    }

    /// A fresh notification id (reference: `n` and eight hex digits of a UUID4).
    pub fn new_id() -> String {
        let hex = uuid::Uuid::new_v4().simple().to_string();
        format!("n{}", &hex[..8])
    }

    /// Registers the details added to the model's copy of notifications whose `source_kind` is
    /// `source_kind`.
    pub fn set_details(&self, source_kind: &str, details: Arc<dyn NotificationDetails>) {
        crate::sync::write(&self.details).insert(source_kind.to_owned(), details);
    }

    /// Adds `event`, pending for each of its targets, unless one with the same dedupe key exists.
    pub fn publish(&self, event: NotificationEvent) -> Published {
        let mut entries = lock(&self.entries);
        if let Some(key) = &event.dedupe_key
            && let Some(existing) = entries
                .iter()
                .find(|e| e.event.dedupe_key.as_deref() == Some(key.as_str()))
        {
            return Published::Duplicate(existing.event.id.clone());
        }
        let delivery = Delivery::pending_for(&event.targets);
        if let Some(store) = &self.store
            && let Err(e) = store.create(&event, &delivery)
        {
            tracing::error!(id = %event.id, error = %e, "notification not written; kept in memory");
        }
        let id = event.id.clone();
        entries.push(Entry { event, delivery });
        Published::New(id)
    }

    /// Whether anything is waiting for `sink`.
    pub fn has_pending(&self, sink: Sink) -> bool {
        lock(&self.entries).iter().any(|e| e.delivery.is_pending(sink))
    }

    /// Up to `limit` notifications not yet delivered to `sink`, oldest first. They stay pending until
    /// [`NotificationQueue::ack`]ed, so a crash before delivery loses nothing.
    pub fn pending(&self, sink: Sink, limit: usize) -> Vec<NotificationEvent> {
        lock(&self.entries)
            .iter()
            .filter(|e| e.delivery.is_pending(sink))
            .take(limit)
            .map(|e| e.event.clone())
            .collect()
    }

    /// Marks notification `id` delivered to `sink`; unknown ids are ignored.
    pub fn ack(&self, sink: Sink, id: &str) {
        let mut entries = lock(&self.entries);
        let Some(entry) = entries.iter_mut().find(|e| e.event.id == id) else {
            return;
        };
        let Some(state) = entry.delivery.sinks.get_mut(&sink) else {
            return;
        };
        if state.status == DeliveryStatus::Acked {
            return;
        }
        *state = SinkState {
            status: DeliveryStatus::Acked,
            claimed_at: None,
            acked_at: Some(unix_now()),
        };
        if let Some(store) = &self.store
            && let Err(e) = store.write_delivery(id, &entry.delivery)
        {
            tracing::error!(id, error = %e, "notification delivery state not written");
        }
    }

    /// Marks every one of `ids` delivered to `sink`.
    pub fn ack_all<'a>(&self, sink: Sink, ids: impl IntoIterator<Item = &'a String>) {
        for id in ids {
            self.ack(sink, id);
        }
    }

    /// The model's copy of `event`: its block with the details its source registered.
    pub fn llm_text(&self, event: &NotificationEvent) -> String {
        let details = crate::sync::read(&self.details).get(&event.source_kind).cloned();
        let lines = details.map(|d| d.llm_lines(event)).unwrap_or_default();
        notification_text(event, &lines)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn event(id: &str, key: Option<&str>, created_at: f64) -> NotificationEvent {
        NotificationEvent {
            version: 1,
            id: id.into(),
            category: Category::Task,
            kind: "task.completed".into(),
            source_kind: "background_task".into(),
            source_id: "bash-1".into(),
            title: "t".into(),
            body: "b".into(),
            severity: Severity::Success,
            created_at,
            payload: Default::default(),
            targets: model::ALL_SINKS.to_vec(),
            dedupe_key: key.map(str::to_owned),
        }
    }

    fn ids(events: &[NotificationEvent]) -> Vec<&str> {
        events.iter().map(|e| e.id.as_str()).collect()
    }

    #[test]
    fn each_sink_gets_each_notification_once_oldest_first() {
        let queue = NotificationQueue::in_memory();
        for i in 0..6 {
            assert_eq!(
                queue.publish(event(&format!("n{i}"), None, f64::from(i))),
                Published::New(format!("n{i}"))
            );
        }
        let llm = queue.pending(Sink::Llm, LLM_BATCH);
        assert_eq!(ids(&llm), ["n0", "n1", "n2", "n3"]);
        // Not acked yet: still pending.
        assert_eq!(ids(&queue.pending(Sink::Llm, 1)), ["n0"]);
        queue.ack_all(Sink::Llm, llm.iter().map(|e| &e.id));
        assert_eq!(ids(&queue.pending(Sink::Llm, LLM_BATCH)), ["n4", "n5"]);
        assert_eq!(queue.pending(Sink::Wire, WIRE_BATCH).len(), 6);
        queue.ack(Sink::Llm, "n4");
        queue.ack(Sink::Llm, "n5");
        queue.ack(Sink::Llm, "unknown");
        assert!(!queue.has_pending(Sink::Llm));
        assert!(queue.has_pending(Sink::Wire));
    }

    #[test]
    fn a_dedupe_key_publishes_once() {
        let queue = NotificationQueue::in_memory();
        assert_eq!(
            queue.publish(event("na", Some("k"), 1.0)),
            Published::New("na".into())
        );
        assert_eq!(
            queue.publish(event("nb", Some("k"), 2.0)),
            Published::Duplicate("na".into())
        );
        assert_eq!(queue.pending(Sink::Wire, 10).len(), 1);
    }

    #[test]
    fn state_survives_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let queue = NotificationQueue::open(dir.path());
        queue.publish(event("nlate", Some("k2"), 5.0));
        queue.publish(event("nearly", Some("k1"), 1.0));
        queue.ack(Sink::Llm, "nearly");
        let reopened = NotificationQueue::open(dir.path());
        assert_eq!(ids(&reopened.pending(Sink::Llm, 10)), ["nlate"]);
        assert_eq!(ids(&reopened.pending(Sink::Wire, 10)), ["nearly", "nlate"]);
        assert_eq!(
            reopened.publish(event("nother", Some("k1"), 9.0)),
            Published::Duplicate("nearly".into())
        );
    }

    #[derive(Debug)]
    struct Extra;
    impl NotificationDetails for Extra {
        fn llm_lines(&self, event: &NotificationEvent) -> Vec<String> {
            vec![format!("extra for {}", event.source_id)]
        }
    }

    #[test]
    fn details_come_from_the_source_kind() {
        let queue = NotificationQueue::in_memory();
        let plain = event("n1", None, 0.0);
        assert!(!queue.llm_text(&plain).contains("extra"));
        queue.set_details("background_task", Arc::new(Extra));
        assert!(
            queue
                .llm_text(&plain)
                .ends_with("b\nextra for bash-1\n</notification>")
        );
        let other = NotificationEvent {
            source_kind: "cron".into(),
            ..plain
        };
        assert!(!queue.llm_text(&other).contains("extra"));
    }

    #[test]
    fn ids_look_like_the_reference() {
        let id = NotificationQueue::new_id();
        assert_eq!(id.len(), 9);
        assert!(id.starts_with('n'));
        assert!(
            id[1..]
                .bytes()
                .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
        );
    }
}
