//! `<session>/notifications/<id>/{event,delivery}.json`, the reference's layout and formats.

use std::path::{Path, PathBuf};

use serde::Serialize;

use super::model::{Delivery, NotificationEvent};
use crate::session::{SessionError, write_atomic};

const EVENT_FILE: &str = "event.json";
const DELIVERY_FILE: &str = "delivery.json";

/// The notifications directory of one session.
#[derive(Debug, Clone)]
pub struct NotificationStore {
    root: PathBuf,
}

impl NotificationStore {
    /// The store under `root` (`<session>/notifications`); nothing is created until the first write.
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// Writes a new notification's two files.
    pub fn create(&self, event: &NotificationEvent, delivery: &Delivery) -> Result<(), SessionError> {
        let dir = self.dir(&event.id)?;
        write_json(&dir.join(EVENT_FILE), event)?;
        write_json(&dir.join(DELIVERY_FILE), delivery)
    }

    /// Rewrites a notification's delivery state.
    pub fn write_delivery(&self, id: &str, delivery: &Delivery) -> Result<(), SessionError> {
        write_json(&self.dir(id)?.join(DELIVERY_FILE), delivery)
    }

    /// Every readable notification, in no particular order. Unreadable ones are logged and skipped; an
    /// unreadable delivery file means "pending nowhere" for that notification, as in the reference.
    pub fn load_all(&self) -> Vec<(NotificationEvent, Delivery)> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut loaded = Vec::new();
        for entry in entries.flatten() {
            let dir = entry.path();
            let event_path = dir.join(EVENT_FILE);
            let Ok(text) = std::fs::read_to_string(&event_path) else {
                continue;
            };
            let event: NotificationEvent = match serde_json::from_str(&text) {
                Ok(event) => event,
                Err(e) => {
                    tracing::warn!(path = %event_path.display(), error = %e, "unreadable notification skipped");
                    continue;
                }
            };
            let delivery = match std::fs::read_to_string(dir.join(DELIVERY_FILE)) {
                Ok(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                    tracing::warn!(dir = %dir.display(), error = %e, "unreadable notification delivery; using defaults");
                    Delivery::default()
                }),
                Err(_) => Delivery::default(),
            };
            loaded.push((event, delivery));
        }
        loaded
    }

    fn dir(&self, id: &str) -> Result<PathBuf, SessionError> {
        if !is_valid_id(id) {
            return Err(SessionError::Io {
                path: self.root.join(id),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("Invalid notification_id: '{id}'"),
                ),
            });
        }
        Ok(self.root.join(id))
    }
}

/// The reference's rule for notification ids: 2 to 20 lower-case letters and digits.
fn is_valid_id(id: &str) -> bool {
    (2..=20).contains(&id.len()) && id.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
}

/// Indented by two spaces and not ASCII-escaped, as the reference's `atomic_json_write`.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), SessionError> {
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| SessionError::Io {
        path: path.to_owned(),
        source: std::io::Error::other(e),
    })?;
    write_atomic(path, &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notifications::model::{ALL_SINKS, Category, Severity};
    use pretty_assertions::assert_eq;

    fn event(id: &str) -> NotificationEvent {
        NotificationEvent {
            version: 1,
            id: id.into(),
            category: Category::Task,
            kind: "task.completed".into(),
            source_kind: "background_task".into(),
            source_id: "bash-x".into(),
            title: "Tâche".into(),
            body: "b".into(),
            severity: Severity::Success,
            created_at: 1.5,
            payload: Default::default(),
            targets: ALL_SINKS.to_vec(),
            dedupe_key: None,
        }
    }

    #[test]
    fn round_trips_and_skips_what_it_cannot_read() {
        let dir = tempfile::tempdir().unwrap();
        let store = NotificationStore::new(dir.path().join("notifications"));
        assert!(store.load_all().is_empty());
        let delivery = Delivery::pending_for(&ALL_SINKS);
        store.create(&event("n12345678"), &delivery).unwrap();
        let text = std::fs::read_to_string(dir.path().join("notifications/n12345678/event.json")).unwrap();
        assert!(
            text.starts_with("{\n  \"version\": 1,\n  \"id\": \"n12345678\""),
            "{text}"
        );
        assert!(text.contains("\"Tâche\""), "not ASCII-escaped: {text}");
        std::fs::create_dir_all(dir.path().join("notifications/nbroken")).unwrap();
        std::fs::write(dir.path().join("notifications/nbroken/event.json"), "{").unwrap();
        assert_eq!(store.load_all(), vec![(event("n12345678"), delivery)]);
        assert!(store.create(&event("../x"), &Delivery::default()).is_err());
    }
}
