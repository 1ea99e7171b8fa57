//! The model's copy of a notification: one user message of a `<notification ...>` block (reference
//! `notifications/llm.py`), and recognising such messages already in the history.

use std::collections::BTreeSet;

use kimi_llm::{Message, Role};
use kimi_wire::message::ContentPart;

use super::model::NotificationEvent;

/// The text of the user message that tells the model about `event`; `details` are extra lines from the
/// notification's source (a background task's `<task-notification>` block), placed before the closing
/// tag.
pub fn notification_text(event: &NotificationEvent, details: &[String]) -> String {
    let mut lines = vec![
        format!(
            r#"<notification id="{}" category="{}" type="{}" source_kind="{}" source_id="{}">"#,
            event.id,
            event.category.as_str(),
            event.kind,
            event.source_kind,
            event.source_id
        ),
        format!("Title: {}", event.title),
        format!("Severity: {}", event.severity.as_str()),
        event.body.clone(),
    ];
    lines.extend(details.iter().cloned());
    lines.push("</notification>".to_owned());
    lines.join("\n")
}

/// The ids of every notification the model has already been told about, read from the user messages of
/// `history` (so a resumed session does not tell it twice).
pub fn ids_in_history(history: &[Message]) -> BTreeSet<String> {
    const OPEN: &str = "<notification id=\"";
    let mut ids = BTreeSet::new();
    for message in history.iter().filter(|m| m.role == Role::User) {
        for part in &message.content {
            let ContentPart::Text(text) = part else {
                continue;
            };
            let mut rest = text.text.as_str();
            while let Some(start) = rest.find(OPEN) {
                rest = &rest[start + OPEN.len()..];
                if let Some(end) = rest.find('"')
                    && end > 0
                {
                    ids.insert(rest[..end].to_owned());
                    rest = &rest[end..];
                }
            }
        }
    }
    ids
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::notifications::model::{ALL_SINKS, Category, Severity};
    use pretty_assertions::assert_eq;

    #[test]
    fn text_has_the_reference_shape() {
        let event = NotificationEvent {
            version: 1,
            id: "nabc".into(),
            category: Category::Task,
            kind: "task.failed".into(),
            source_kind: "background_task".into(),
            source_id: "bash-1".into(),
            title: "Background task failed: build".into(),
            body: "Task ID: bash-1\nStatus: failed".into(),
            severity: Severity::Error,
            created_at: 0.0,
            payload: Default::default(),
            targets: ALL_SINKS.to_vec(),
            dedupe_key: None,
        };
        assert_eq!(
            notification_text(
                &event,
                &["<task-notification>".into(), "</task-notification>".into()]
            ),
            "<notification id=\"nabc\" category=\"task\" type=\"task.failed\" source_kind=\"background_task\" source_id=\"bash-1\">\n\
             Title: Background task failed: build\nSeverity: error\nTask ID: bash-1\nStatus: failed\n\
             <task-notification>\n</task-notification>\n</notification>"
        );
    }

    #[test]
    fn finds_ids_in_user_messages_only() {
        let history = vec![
            Message::user_text("<notification id=\"n1\" category=\"task\">x</notification>"),
            Message::user_text("a <notification id=\"n2\"> and <notification id=\"n3\">"),
            Message::assistant(vec![ContentPart::text("<notification id=\"n4\">")], Vec::new()),
            Message::user_text("<notification id=\"\">"),
        ];
        assert_eq!(
            ids_in_history(&history),
            ["n1", "n2", "n3"].into_iter().map(String::from).collect()
        );
    }
}
