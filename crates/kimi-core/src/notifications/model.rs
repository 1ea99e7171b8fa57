//! The notification records, field for field as the reference writes them (`notifications/models.py`),
//! so either implementation reads the other's `notifications/<id>/event.json` and `delivery.json`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A broad grouping of notifications.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    /// Background tasks.
    Task,
    /// Agents.
    Agent,
    /// Everything else.
    System,
}

impl Category {
    /// The name as written in files and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Task => "task",
            Self::Agent => "agent",
            Self::System => "system",
        }
    }
}

/// How important a notification is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Neutral.
    #[default]
    Info,
    /// Something finished well.
    Success,
    /// Something ended early.
    Warning,
    /// Something failed.
    Error,
}

impl Severity {
    /// The name as written in files and messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Info => "info",
            Self::Success => "success",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }
}

/// Where a notification is delivered. The declaration order is the reference's (`llm`, `wire`,
/// `shell`), which is also the order of the keys in `delivery.json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Sink {
    /// The model, as a user message at its next step.
    Llm,
    /// The wire client, as a `Notification` event.
    Wire,
    /// The reference's interactive shell; we never deliver there, but keep its state.
    Shell,
}

/// Every sink, the default targets of an event.
pub const ALL_SINKS: [Sink; 3] = [Sink::Llm, Sink::Wire, Sink::Shell];

/// One notification (`event.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotificationEvent {
    /// Record format version (1).
    #[serde(default = "one")]
    pub version: u32,
    /// `n` and eight hex digits.
    pub id: String,
    /// The grouping.
    pub category: Category,
    /// The specific kind, such as `task.completed`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What raised it, such as `background_task`.
    pub source_kind: String,
    /// The id of what raised it.
    pub source_id: String,
    /// One line.
    pub title: String,
    /// The details.
    pub body: String,
    /// How important it is.
    #[serde(default)]
    pub severity: Severity,
    /// Seconds since the Unix epoch.
    #[serde(default)]
    pub created_at: f64,
    /// Structured details for clients.
    #[serde(default)]
    pub payload: Map<String, Value>,
    /// The sinks it goes to.
    #[serde(default = "all_sinks")]
    pub targets: Vec<Sink>,
    /// Publishing a second event with the same key returns the first one instead.
    #[serde(default)]
    pub dedupe_key: Option<String>,
}

fn one() -> u32 {
    1
}

fn all_sinks() -> Vec<Sink> {
    ALL_SINKS.to_vec()
}

/// Where one sink's delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeliveryStatus {
    /// Not delivered yet.
    #[default]
    Pending,
    /// Taken by a deliverer that may have crashed (the reference's two-phase delivery); we treat it as
    /// pending, as the reference does once the claim goes stale.
    Claimed,
    /// Delivered.
    Acked,
}

/// One sink's delivery state.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct SinkState {
    /// Where it stands.
    #[serde(default)]
    pub status: DeliveryStatus,
    /// When it was claimed.
    #[serde(default)]
    pub claimed_at: Option<f64>,
    /// When it was delivered.
    #[serde(default)]
    pub acked_at: Option<f64>,
}

/// Every sink's delivery state (`delivery.json`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Delivery {
    /// Per sink.
    #[serde(default)]
    pub sinks: BTreeMap<Sink, SinkState>,
}

impl Delivery {
    /// Pending for every target of `event`.
    pub fn pending_for(targets: &[Sink]) -> Self {
        Self {
            sinks: targets.iter().map(|sink| (*sink, SinkState::default())).collect(),
        }
    }

    /// Whether `sink` still has to receive it.
    pub fn is_pending(&self, sink: Sink) -> bool {
        self.sinks
            .get(&sink)
            .is_some_and(|state| state.status != DeliveryStatus::Acked)
    }
}

/// Seconds since the Unix epoch, as Python's `time.time()`.
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn reads_a_reference_event_and_writes_the_same_keys() {
        let text = json!({
            "version": 1, "id": "n1a2b3c4d", "category": "task", "type": "task.completed",
            "source_kind": "background_task", "source_id": "bash-abcd1234", "title": "T", "body": "B",
            "severity": "success", "created_at": 1_712_345_678.5, "payload": {"task_id": "bash-abcd1234"},
            "targets": ["llm", "wire", "shell"], "dedupe_key": "background_task:bash-abcd1234:completed"
        });
        let event: NotificationEvent = serde_json::from_value(text.clone()).unwrap();
        assert_eq!(event.severity, Severity::Success);
        assert_eq!(serde_json::to_value(&event).unwrap(), text);
        let keys: Vec<String> = serde_json::to_value(&event)
            .unwrap()
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        assert_eq!(
            keys,
            [
                "version",
                "id",
                "category",
                "type",
                "source_kind",
                "source_id",
                "title",
                "body",
                "severity",
                "created_at",
                "payload",
                "targets",
                "dedupe_key"
            ]
        );
    }

    #[test]
    fn delivery_keys_follow_the_reference_order() {
        let delivery = Delivery::pending_for(&[Sink::Shell, Sink::Wire, Sink::Llm]);
        assert_eq!(
            serde_json::to_string(&delivery).unwrap(),
            r#"{"sinks":{"llm":{"status":"pending","claimed_at":null,"acked_at":null},"wire":{"status":"pending","claimed_at":null,"acked_at":null},"shell":{"status":"pending","claimed_at":null,"acked_at":null}}}"#
        );
        let mut claimed = delivery;
        claimed.sinks.insert(
            Sink::Llm,
            SinkState {
                status: DeliveryStatus::Claimed,
                claimed_at: Some(1.0),
                acked_at: None,
            },
        );
        assert!(claimed.is_pending(Sink::Llm));
        claimed.sinks.insert(
            Sink::Llm,
            SinkState {
                status: DeliveryStatus::Acked,
                claimed_at: None,
                acked_at: Some(2.0),
            },
        );
        assert!(!claimed.is_pending(Sink::Llm));
        assert!(!Delivery::default().is_pending(Sink::Wire));
    }
}
