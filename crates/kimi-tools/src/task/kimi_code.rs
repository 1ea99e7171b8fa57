//! How the kimi-code agent's task tools write tasks (seeds/002): each task as its record, one
//! `key: value` line per field (snake_case, fields without a value left out), tasks separated by `---`;
//! a task stopped by its timeout has the status `timed_out`, one ended for a reason carries
//! `stop_reason`, and `TaskOutput` names `Read` for the full log. The task tools themselves
//! (the rest of `crate::task`) do the work; these only render.

use chrono::{DateTime, Local};
use kimi_core::{TaskStatus, TaskView};

use super::preview::{PREVIEW_BYTES, Preview, READ_HINT_LINES};

/// `TaskList`'s text.
pub(crate) fn list(views: &[TaskView], active_only: bool) -> String {
    let label = if active_only {
        "active_background_tasks"
    } else {
        "background_tasks"
    };
    if views.is_empty() {
        return format!("{label}: 0\nNo background tasks found.");
    }
    let records: Vec<String> = views.iter().map(|v| lines(&record(v))).collect();
    format!("{label}: {}\n{}", views.len(), records.join("\n---\n"))
}

/// `TaskOutput`'s text: how the retrieval went, the task's record, where its whole log is, and the
/// end of the log.
pub(crate) fn output(view: &TaskView, retrieval_status: &str, preview: &Preview) -> String {
    let path = preview.path.to_string_lossy().into_owned();
    let available = preview.size > 0;
    let mut fields = vec![("retrieval_status", retrieval_status.to_owned())];
    fields.extend(record(view));
    fields.push(("output_path", path.clone()));
    if let Some(reason) = terminal_reason(view) {
        fields.push(("terminal_reason", reason.to_owned()));
    }
    fields.extend([
        ("output_size_bytes", preview.size.to_string()),
        ("output_preview_bytes", preview.shown.to_string()),
        ("output_truncated", preview.truncated.to_string()),
        ("full_output_available", available.to_string()),
    ]);
    if available {
        fields.push(("full_output_tool", "Read".to_owned()));
        let shown = if preview.truncated {
            format!("Only the last {PREVIEW_BYTES} bytes are shown below.")
        } else {
            "The output below is complete.".to_owned()
        };
        fields.push((
            "full_output_hint",
            format!(
                "{shown} Page through the whole log with Read (path: output_path, line_offset, n_lines; \
                 about {READ_HINT_LINES} lines a page)."
            ),
        ));
    }
    let mut text = lines(&fields);
    text.push_str("\n\n");
    if preview.truncated {
        text.push_str(&format!("[Truncated. Full output: {path}]\n"));
    }
    text.push_str("[output]\n");
    text.push_str(if preview.text.is_empty() {
        "[no output available]"
    } else {
        &preview.text
    });
    text
}

/// `TaskStop`'s text: the task, where it now stands, and why it ended.
pub(crate) fn stopped(view: &TaskView) -> String {
    let reason = view
        .runtime
        .failure_reason
        .as_deref()
        .filter(|r| !r.trim().is_empty())
        .unwrap_or("The task had already ended.");
    lines(&[
        ("task_id", view.spec.id.clone()),
        ("status", status(view).to_owned()),
        ("reason", reason.to_owned()),
    ])
}

/// A task's record, in seeds/002's fields.
fn record(view: &TaskView) -> Vec<(&'static str, String)> {
    let (spec, runtime) = (&view.spec, &view.runtime);
    let mut fields = vec![
        ("task_id", spec.id.clone()),
        ("kind", spec.kind.as_str().to_owned()),
        ("status", status(view).to_owned()),
        ("description", spec.description.clone()),
        ("created_at", timestamp(spec.created_at)),
    ];
    let optional = [
        ("started_at", runtime.started_at.map(timestamp)),
        ("ended_at", runtime.finished_at.map(timestamp)),
        ("command", spec.command.clone()),
        ("pid", runtime.child_pid.map(|p| p.to_string())),
        ("exit_code", runtime.exit_code.map(|c| c.to_string())),
        ("agent_id", payload(view, "agent_id")),
        ("subagent_type", payload(view, "subagent_type")),
        ("timeout_s", spec.timeout_s.map(|t| t.to_string())),
        ("stop_reason", runtime.failure_reason.clone()),
    ];
    fields.extend(
        optional
            .into_iter()
            .filter_map(|(key, value)| value.filter(|v| !v.is_empty()).map(|v| (key, v))),
    );
    fields
}

/// The status, with a task stopped by its timeout shown as `timed_out` (our records say `failed`
/// with `timed_out` set, as the reference's do).
fn status(view: &TaskView) -> &'static str {
    if view.runtime.timed_out {
        "timed_out"
    } else {
        view.runtime.status.as_str()
    }
}

/// Why a task that ended did not complete: its timeout, a stop, or a failure.
fn terminal_reason(view: &TaskView) -> Option<&'static str> {
    match view.runtime.status {
        _ if view.runtime.timed_out => Some("timed_out"),
        TaskStatus::Killed => Some("stopped"),
        TaskStatus::Failed => Some("failed"),
        _ => None,
    }
}

fn payload(view: &TaskView, key: &str) -> Option<String> {
    view.spec
        .kind_payload
        .as_ref()
        .and_then(|p| p.get(key))
        .and_then(|v| v.as_str())
        .map(str::to_owned)
}

/// Seconds since the epoch as local ISO 8601, to the second (as CronCreate's `nextFireAt`).
fn timestamp(seconds: f64) -> String {
    let millis = (seconds * 1000.0) as i64;
    DateTime::from_timestamp_millis(millis)
        .map(|at| kimi_core::cron_time(&at.with_timezone(&Local)))
        .unwrap_or_default()
}

fn lines(fields: &[(&str, String)]) -> String {
    fields
        .iter()
        .map(|(key, value)| format!("{key}: {value}"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_core::{TaskKind, TaskRuntime, TaskSpec};
    use pretty_assertions::assert_eq;

    fn view(status: TaskStatus, timed_out: bool, reason: Option<&str>) -> TaskView {
        TaskView {
            spec: TaskSpec {
                version: 1,
                id: "bash-abcd1234".into(),
                kind: TaskKind::Bash,
                session_id: "s".into(),
                description: "build".into(),
                tool_call_id: "tc".into(),
                owner_role: kimi_core::OwnerRole::Root,
                created_at: 0.0,
                command: Some("make".into()),
                shell_name: None,
                shell_path: None,
                cwd: None,
                timeout_s: Some(600),
                kind_payload: None,
            },
            runtime: TaskRuntime {
                status,
                timed_out,
                child_pid: Some(42),
                exit_code: Some(-15),
                failure_reason: reason.map(str::to_owned),
                ..TaskRuntime::new(0.0)
            },
            control: Default::default(),
            consumer: Default::default(),
        }
    }

    #[test]
    fn records_carry_seeds_fields_and_leave_out_empty_ones() {
        let killed = view(TaskStatus::Killed, false, Some("Stopped by TaskStop"));
        let created = timestamp(0.0);
        assert_eq!(
            lines(&record(&killed)),
            format!(
                "task_id: bash-abcd1234\nkind: bash\nstatus: killed\ndescription: build\ncreated_at: {created}\n\
                 command: make\npid: 42\nexit_code: -15\ntimeout_s: 600\nstop_reason: Stopped by TaskStop"
            )
        );
        assert_eq!(terminal_reason(&killed), Some("stopped"));
        let timed_out = view(TaskStatus::Failed, true, Some("Command timed out after 600s"));
        assert_eq!(status(&timed_out), "timed_out");
        assert_eq!(terminal_reason(&timed_out), Some("timed_out"));
        assert_eq!(
            stopped(&timed_out),
            "task_id: bash-abcd1234\nstatus: timed_out\nreason: Command timed out after 600s"
        );
        let running = view(TaskStatus::Running, false, None);
        assert_eq!(terminal_reason(&running), None);
        assert_eq!(
            list(&[], true),
            "active_background_tasks: 0\nNo background tasks found."
        );
        assert_eq!(
            list(&[running.clone(), running], false)
                .matches("\n---\n")
                .count(),
            1
        );
    }
}
