//! What the model and the client hear when a task ends: the notification published for it (reference
//! `publish_terminal_notifications`) and the `<task-notification>` block added to the model's copy
//! (reference `build_notification_message`).

use chrono::{DateTime, Local};
use serde_json::{Map, Value, json};

use super::format::format_elapsed;
use super::model::TaskView;
use crate::notifications::{ALL_SINKS, Category, NotificationEvent, NotificationQueue, Severity, unix_now};

/// The `source_kind` of task notifications.
pub const SOURCE_KIND: &str = "background_task";

/// The notification for a task in a final status; `None` while it still runs.
pub fn terminal_notification(view: &TaskView) -> Option<NotificationEvent> {
    let runtime = &view.runtime;
    if !runtime.status.is_terminal() {
        return None;
    }
    let status = runtime.status.as_str();
    let reason = runtime.terminal_reason();
    let description = &view.spec.description;
    let (severity, title) = match reason {
        "completed" => (
            Severity::Success,
            format!("Background task completed: {description}"),
        ),
        "timed_out" => (
            Severity::Error,
            format!("Background task timed out: {description}"),
        ),
        "failed" => (Severity::Error, format!("Background task failed: {description}")),
        "killed" => (
            Severity::Warning,
            format!("Background task stopped: {description}"),
        ),
        "lost" => (Severity::Warning, format!("Background task lost: {description}")),
        _ => (Severity::Info, format!("Background task updated: {description}")),
    };
    let duration = match (runtime.started_at, runtime.finished_at) {
        (Some(start), Some(end)) => Some((end - start).max(0.0)),
        _ => None,
    };
    let mut details = Vec::new();
    if let Some(finished) = runtime.finished_at {
        let label = if reason == "completed" {
            "Completed at"
        } else {
            "Finished at"
        };
        details.push(format!("{label}: {}", local_time(finished)));
    }
    if let Some(duration) = duration {
        details.push(format!("Duration: {}", format_elapsed(duration)));
    }
    let status_line = if details.is_empty() {
        format!("Status: {status}")
    } else {
        format!("Status: {status} ({})", details.join(", "))
    };
    let mut body = vec![
        format!("Task ID: {}", view.spec.id),
        status_line,
        format!("Description: {description}"),
    ];
    if reason != status {
        body.push(format!("Terminal reason: {reason}"));
    }
    if let Some(code) = runtime.exit_code {
        body.push(format!("Exit code: {code}"));
    }
    if let Some(failure) = runtime.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        body.push(format!("Failure reason: {failure}"));
    }
    let payload = json!({
        "task_id": view.spec.id,
        "task_kind": view.spec.kind.as_str(),
        "status": status,
        "description": description,
        "exit_code": runtime.exit_code,
        "interrupted": runtime.interrupted,
        "timed_out": runtime.timed_out,
        "terminal_reason": reason,
        "failure_reason": runtime.failure_reason,
        "finished_at": runtime.finished_at,
        "duration_s": duration,
    });
    Some(NotificationEvent {
        version: 1,
        id: NotificationQueue::new_id(),
        category: Category::Task,
        kind: format!("task.{reason}"),
        source_kind: SOURCE_KIND.to_owned(),
        source_id: view.spec.id.clone(),
        title,
        body: body.join("\n"),
        severity,
        created_at: unix_now(),
        payload: match payload {
            Value::Object(map) => map,
            _ => Map::new(),
        },
        targets: ALL_SINKS.to_vec(),
        dedupe_key: Some(format!("{SOURCE_KIND}:{}:{reason}", view.spec.id)),
    })
}

/// The `<task-notification>` lines for the model: the task's current state and its output tail.
pub fn task_notification_lines(view: &TaskView, tail: &str) -> Vec<String> {
    let mut lines = vec![
        "<task-notification>".to_owned(),
        format!("Task ID: {}", view.spec.id),
        format!("Task Type: {}", view.spec.kind.as_str()),
        format!("Description: {}", view.spec.description),
        format!("Status: {}", view.runtime.status),
    ];
    if let Some(code) = view.runtime.exit_code {
        lines.push(format!("Exit code: {code}"));
    }
    if let Some(failure) = view.runtime.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        lines.push(format!("Failure reason: {failure}"));
    }
    if !tail.is_empty() {
        lines.push("Output tail:".to_owned());
        lines.push(tail.to_owned());
    }
    lines.push("</task-notification>".to_owned());
    lines
}

/// `%Y-%m-%d %H:%M:%S` in local time, as Python's `datetime.fromtimestamp(..).strftime(..)`.
fn local_time(seconds: f64) -> String {
    let whole = seconds.floor();
    // Sub-second digits do not appear in the format; whole seconds are all that matter.
    DateTime::from_timestamp(whole as i64, 0)
        .map(|t| t.with_timezone(&Local).format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::model::TaskStatus;
    use crate::background::model::{
        OwnerRole, TaskConsumerState, TaskControl, TaskKind, TaskRuntime, TaskSpec,
    };
    use crate::background::status::TaskEvent;
    use pretty_assertions::assert_eq;

    fn view() -> TaskView {
        TaskView {
            spec: TaskSpec {
                version: 1,
                id: "bash-abcdefgh".into(),
                kind: TaskKind::Bash,
                session_id: "s".into(),
                description: "build".into(),
                tool_call_id: "tc".into(),
                owner_role: OwnerRole::Root,
                created_at: 100.0,
                command: Some("make".into()),
                shell_name: None,
                shell_path: None,
                cwd: None,
                timeout_s: None,
                kind_payload: None,
            },
            runtime: TaskRuntime::new(100.0),
            control: TaskControl::default(),
            consumer: TaskConsumerState::default(),
        }
    }

    #[test]
    fn running_tasks_have_no_notification() {
        let mut view = view();
        assert_eq!(terminal_notification(&view), None);
        view.runtime.status = TaskStatus::Running;
        assert_eq!(terminal_notification(&view), None);
    }

    #[test]
    fn a_timed_out_task() {
        let mut view = view();
        view.runtime
            .apply(TaskEvent::Launch { worker_pid: 1 }, 100.0)
            .unwrap();
        view.runtime
            .apply(
                TaskEvent::TimeOut {
                    reason: "Command timed out after 90s".into(),
                    exit_code: Some(-15),
                },
                190.5,
            )
            .unwrap();
        let event = terminal_notification(&view).unwrap();
        assert_eq!(event.kind, "task.timed_out");
        assert_eq!(event.category, Category::Task);
        assert_eq!(event.severity, Severity::Error);
        assert_eq!(event.title, "Background task timed out: build");
        assert_eq!(
            event.dedupe_key.as_deref(),
            Some("background_task:bash-abcdefgh:timed_out")
        );
        let finished = local_time(190.5);
        assert_eq!(
            event.body,
            format!(
                "Task ID: bash-abcdefgh\nStatus: failed (Finished at: {finished}, Duration: 1m 30s)\n\
                 Description: build\nTerminal reason: timed_out\nExit code: -15\n\
                 Failure reason: Command timed out after 90s"
            )
        );
        assert_eq!(
            Value::Object(event.payload),
            json!({
                "task_id": "bash-abcdefgh", "task_kind": "bash", "status": "failed", "description": "build",
                "exit_code": -15, "interrupted": true, "timed_out": true, "terminal_reason": "timed_out",
                "failure_reason": "Command timed out after 90s", "finished_at": 190.5, "duration_s": 90.5
            })
        );
    }

    #[test]
    fn completed_and_stopped_titles() {
        let mut done = view();
        done.runtime
            .apply(TaskEvent::Exit { exit_code: 0 }, 101.0)
            .unwrap();
        let event = terminal_notification(&done).unwrap();
        assert_eq!(
            (event.severity, event.title.as_str()),
            (Severity::Success, "Background task completed: build")
        );
        assert!(
            event.body.contains("Status: completed (Completed at: "),
            "{}",
            event.body
        );
        let mut killed = view();
        killed
            .runtime
            .apply(
                TaskEvent::Kill {
                    reason: "Stopped by TaskStop".into(),
                    exit_code: None,
                },
                101.0,
            )
            .unwrap();
        let event = terminal_notification(&killed).unwrap();
        assert_eq!(
            (event.severity, event.title.as_str(), event.kind.as_str()),
            (Severity::Warning, "Background task stopped: build", "task.killed")
        );
    }

    #[test]
    fn model_block() {
        let mut view = view();
        view.runtime
            .apply(TaskEvent::Exit { exit_code: 1 }, 101.0)
            .unwrap();
        assert_eq!(
            task_notification_lines(&view, "a\nb").join("\n"),
            "<task-notification>\nTask ID: bash-abcdefgh\nTask Type: bash\nDescription: build\nStatus: failed\n\
             Exit code: 1\nFailure reason: Command failed with exit code 1\nOutput tail:\na\nb\n</task-notification>"
        );
        assert!(!task_notification_lines(&view, "").contains(&"Output tail:".to_owned()));
    }
}
