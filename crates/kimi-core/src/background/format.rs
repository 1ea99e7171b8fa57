//! Tasks as text for the model, in the reference's `key: value` lines (`background/summary.py`): one
//! task, a list of tasks, and the snapshot of active tasks kept across a compaction.

use super::model::{TaskKind, TaskView};

/// One task: id, kind, status, description, then what applies of agent id and type, command, exit
/// code and failure reason.
pub fn format_task(view: &TaskView, include_command: bool) -> String {
    let mut lines = vec![
        format!("task_id: {}", view.spec.id),
        format!("kind: {}", view.spec.kind.as_str()),
        format!("status: {}", view.runtime.status),
        format!("description: {}", view.spec.description),
    ];
    lines.extend(agent_lines(view));
    if include_command && let Some(command) = view.spec.command.as_deref().filter(|c| !c.is_empty()) {
        lines.push(format!("command: {command}"));
    }
    if let Some(code) = view.runtime.exit_code {
        lines.push(format!("exit_code: {code}"));
    }
    if let Some(reason) = view.runtime.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        lines.push(format!("reason: {reason}"));
    }
    lines.join("\n")
}

/// `agent_id:` and `subagent_type:` lines of an agent task, when its payload has them.
pub fn agent_lines(view: &TaskView) -> Vec<String> {
    let (TaskKind::Agent, Some(payload)) = (view.spec.kind, &view.spec.kind_payload) else {
        return Vec::new();
    };
    ["agent_id", "subagent_type"]
        .into_iter()
        .filter_map(|key| {
            payload
                .get(key)
                .and_then(|v| v.as_str())
                .filter(|v| !v.is_empty())
                .map(|v| format!("{key}: {v}"))
        })
        .collect()
}

/// A numbered list of tasks under a count header (`active_background_tasks: 2`).
pub fn format_task_list(views: &[TaskView], active_only: bool, include_command: bool) -> String {
    let header = if active_only {
        "active_background_tasks"
    } else {
        "background_tasks"
    };
    if views.is_empty() {
        return format!("{header}: 0\n[no tasks]");
    }
    let mut lines = vec![format!("{header}: {}", views.len()), String::new()];
    for (index, view) in views.iter().enumerate() {
        lines.push(format!("[{}]", index + 1));
        lines.push(format_task(view, include_command));
        lines.push(String::new());
    }
    // Python's `rstrip()`: all trailing whitespace goes, not only the last blank line.
    lines.join("\n").trim_end().to_owned()
}

/// A duration as the reference's `format_elapsed` writes it: `<1s`, `5s`, `1m 30s`, `1h 1m 1s`.
pub fn format_elapsed(seconds: f64) -> String {
    if seconds < 1.0 {
        return "<1s".to_owned();
    }
    // Whole seconds, as Python's `int()` truncates.
    let total = seconds as u64;
    if total < 60 {
        return format!("{total}s");
    }
    let (hours, rest) = (total / 3600, total % 3600);
    let (minutes, secs) = (rest / 60, rest % 60);
    if hours > 0 {
        format!("{hours}h {minutes}m {secs}s")
    } else {
        format!("{minutes}m {secs}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::model::TaskStatus;
    use crate::background::model::{OwnerRole, TaskConsumerState, TaskControl, TaskRuntime, TaskSpec};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn view(id: &str, status: TaskStatus) -> TaskView {
        TaskView {
            spec: TaskSpec {
                version: 1,
                id: id.into(),
                kind: TaskKind::Bash,
                session_id: "s".into(),
                description: "run tests".into(),
                tool_call_id: "tc".into(),
                owner_role: OwnerRole::Root,
                created_at: 1.0,
                command: Some("make test".into()),
                shell_name: Some("bash".into()),
                shell_path: Some("/bin/bash".into()),
                cwd: Some("/w".into()),
                timeout_s: Some(60),
                kind_payload: None,
            },
            runtime: TaskRuntime {
                status,
                ..TaskRuntime::new(1.0)
            },
            control: TaskControl::default(),
            consumer: TaskConsumerState::default(),
        }
    }

    #[test]
    fn one_task() {
        let mut failed = view("bash-1", TaskStatus::Failed);
        failed.runtime.exit_code = Some(2);
        failed.runtime.failure_reason = Some("Command failed with exit code 2".into());
        assert_eq!(
            format_task(&failed, true),
            "task_id: bash-1\nkind: bash\nstatus: failed\ndescription: run tests\ncommand: make test\n\
             exit_code: 2\nreason: Command failed with exit code 2"
        );
        assert_eq!(
            format_task(&view("bash-2", TaskStatus::Running), false),
            "task_id: bash-2\nkind: bash\nstatus: running\ndescription: run tests"
        );
        let mut agent = view("agent-1", TaskStatus::Running);
        agent.spec.kind = TaskKind::Agent;
        agent.spec.command = None;
        agent.spec.kind_payload = json!({"agent_id": "a1", "subagent_type": "coder"})
            .as_object()
            .cloned();
        assert_eq!(
            format_task(&agent, true),
            "task_id: agent-1\nkind: agent\nstatus: running\ndescription: run tests\nagent_id: a1\n\
             subagent_type: coder"
        );
    }

    #[test]
    fn lists_and_snapshot() {
        assert_eq!(
            format_task_list(&[], true, true),
            "active_background_tasks: 0\n[no tasks]"
        );
        assert_eq!(
            format_task_list(&[], false, true),
            "background_tasks: 0\n[no tasks]"
        );
        let views = [
            view("bash-1", TaskStatus::Running),
            view("bash-2", TaskStatus::Starting),
        ];
        assert_eq!(
            format_task_list(&views, true, true),
            "active_background_tasks: 2\n\n[1]\ntask_id: bash-1\nkind: bash\nstatus: running\n\
             description: run tests\ncommand: make test\n\n[2]\ntask_id: bash-2\nkind: bash\n\
             status: starting\ndescription: run tests\ncommand: make test"
        );
    }

    #[test]
    fn elapsed_like_the_reference() {
        for (seconds, text) in [
            (0.5, "<1s"),
            (1.0, "1s"),
            (59.9, "59s"),
            (90.0, "1m 30s"),
            (3600.0, "1h 0m 0s"),
            (3661.2, "1h 1m 1s"),
        ] {
            assert_eq!(format_elapsed(seconds), text, "{seconds}");
        }
    }
}
