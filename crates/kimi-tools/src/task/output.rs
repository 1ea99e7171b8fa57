//! `TaskOutput`: one task's state and the last 32 KiB of its output, optionally waiting for it to end
//! (read-only). The text follows the reference's `key: value` layout, which models are prompted with.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_core::{TaskManager, TaskView, agent_lines};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::preview::{PREVIEW_BYTES, Preview, READ_HINT_LINES};
use super::{OUTPUT, TaskFormat, ensure_root, find, task_display};
use crate::args;

// Parameters of `TaskOutput`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TaskOutputArgs {
    /// The id of the task, as `Shell` or `TaskList` reported it.
    task_id: String,
    /// Wait for the task to finish (up to `timeout` seconds) instead of returning at once.
    #[serde(default)]
    block: bool,
    /// The most seconds to wait when `block` is true.
    #[serde(default = "default_timeout")]
    #[schemars(schema_with = "crate::args::plain_integer", range(min = 0, max = 3600))]
    timeout: i64,
}

fn default_timeout() -> i64 {
    30
}

/// The `TaskOutput` tool.
#[derive(Debug)]
pub struct TaskOutput {
    spec: ToolSpec,
    tasks: TaskManager,
    format: TaskFormat,
}

impl TaskOutput {
    /// A `TaskOutput` over `tasks`.
    pub fn new(tasks: TaskManager) -> Self {
        Self::with_format(tasks, TaskFormat::Reference)
    }

    /// A `TaskOutput` writing its snapshot in `format`.
    pub fn with_format(tasks: TaskManager, format: TaskFormat) -> Self {
        let description = match format {
            TaskFormat::Reference => include_str!("../descriptions/task_output.md"),
            TaskFormat::KimiCode => include_str!("../kimi_code/descriptions/task_output.md"),
        };
        Self {
            spec: crate::tool_spec::<TaskOutputArgs>(OUTPUT, description),
            tasks,
            format,
        }
    }

    fn make_plan(self: Arc<Self>, args: Value) -> Result<Plan, ToolReturnValue> {
        let args: TaskOutputArgs = parse_args(args)?;
        args::check_range("TaskOutputParams", "timeout", args.timeout, 0, 3600)?;
        ensure_root(&self.tasks)?;
        let view = find(&self.tasks, &args.task_id)?;
        Ok(Plan::read_only(Box::pin(
            async move { self.run(view, &args).await },
        )))
    }

    async fn run(&self, view: TaskView, args: &TaskOutputArgs) -> ToolReturnValue {
        let id = view.spec.id.clone();
        let view = if args.block {
            let timeout = Duration::from_secs(u64::try_from(args.timeout).unwrap_or(0));
            self.tasks.wait(&id, timeout).await.unwrap_or(view)
        } else {
            view
        };
        let retrieval_status = match (view.runtime.status.is_terminal(), args.block) {
            (true, _) => "success",
            (false, true) => "timeout",
            (false, false) => "not_ready",
        };
        let preview = self.preview(&id);
        self.tasks.mark_viewed(&id, preview.size);
        let message = if retrieval_status == "not_ready" {
            "Task snapshot retrieved."
        } else {
            "Task output retrieved."
        };
        let current = self.tasks.get(&id).unwrap_or_else(|| view.clone());
        let text = match self.format {
            TaskFormat::Reference => render(&view, retrieval_status, &preview),
            TaskFormat::KimiCode => crate::task::kimi_code::output(&view, retrieval_status, &preview),
        };
        ToolReturnValue {
            display: vec![task_display(&current)],
            ..ToolReturnValue::ok(text, message)
        }
    }

    fn preview(&self, id: &str) -> Preview {
        let path = self.tasks.output_path(id);
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        let offset = size.saturating_sub(PREVIEW_BYTES);
        let (text, shown) = match self.tasks.read_output(id, offset, PREVIEW_BYTES) {
            Ok(chunk) => (chunk.text, chunk.next_offset - chunk.offset),
            Err(e) => {
                tracing::warn!(task = id, error = %e, "task output unreadable");
                (String::new(), 0)
            }
        };
        Preview {
            text: text.trim_end_matches('\n').to_owned(),
            path: std::fs::canonicalize(&path).unwrap_or(path),
            size,
            shown,
            truncated: offset > 0,
        }
    }
}

fn render(view: &TaskView, retrieval_status: &str, preview: &Preview) -> String {
    let runtime = &view.runtime;
    let path = display_path(&preview.path);
    let mut lines = vec![
        format!("retrieval_status: {retrieval_status}"),
        format!("task_id: {}", view.spec.id),
        format!("kind: {}", view.spec.kind.as_str()),
        format!("status: {}", runtime.status),
        format!("description: {}", view.spec.description),
    ];
    lines.extend(agent_lines(view));
    if let Some(command) = view.spec.command.as_deref().filter(|c| !c.is_empty()) {
        lines.push(format!("command: {command}"));
    }
    lines.push(format!("interrupted: {}", runtime.interrupted));
    lines.push(format!("timed_out: {}", runtime.timed_out));
    lines.push(format!("terminal_reason: {}", runtime.terminal_reason()));
    if let Some(code) = runtime.exit_code {
        lines.push(format!("exit_code: {code}"));
    }
    if let Some(reason) = runtime.failure_reason.as_deref().filter(|r| !r.is_empty()) {
        lines.push(format!("reason: {reason}"));
    }
    let available = preview.size > 0;
    let hint = if available {
        format!(
            "full_output_hint: Use ReadFile(path=\"{path}\", line_offset=1, n_lines={READ_HINT_LINES}) \
             to inspect the full log. Increase line_offset to continue paging through the file."
        )
    } else {
        "full_output_hint: No output file is currently available for this task.".to_owned()
    };
    lines.extend([
        String::new(),
        format!("output_path: {path}"),
        format!("output_size_bytes: {}", preview.size),
        format!("output_preview_bytes: {}", preview.shown),
        format!("output_truncated: {}", preview.truncated),
        String::new(),
        format!("full_output_available: {available}"),
        "full_output_tool: ReadFile".to_owned(),
        hint,
        String::new(),
        "[output]".to_owned(),
    ]);
    let output = if preview.text.is_empty() {
        "[no output available]"
    } else {
        preview.text.as_str()
    };
    if preview.truncated {
        lines.push(format!("[Truncated. Full output: {path}]\n\n{output}"));
    } else {
        lines.push(output.to_owned());
    }
    lines.join("\n")
}

fn display_path(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

impl Tool for TaskOutput {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move { self.make_plan(args) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::testing::{Tasks, WAIT, call};
    use kimi_wire::message::{DisplayBlock, ToolOutput};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn text(value: &ToolReturnValue) -> &str {
        match &value.output {
            ToolOutput::Text(text) => text,
            ToolOutput::Parts(_) => panic!("text expected"),
        }
    }

    #[tokio::test]
    async fn blocking_waits_for_the_end_and_shows_the_output() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskOutput::new(tasks.manager.clone()));
        let task = tasks.start("echo first; echo second; exit 2");
        let id = task.spec.id.clone();
        let value = call(&tool, json!({"task_id": id, "block": true, "timeout": 15})).await;
        let path = std::fs::canonicalize(tasks.manager.output_path(&id)).unwrap();
        let path = path.display();
        assert_eq!(
            text(&value),
            format!(
                "retrieval_status: success\ntask_id: {id}\nkind: bash\nstatus: failed\ndescription: job\n\
                 command: echo first; echo second; exit 2\ninterrupted: false\ntimed_out: false\n\
                 terminal_reason: failed\nexit_code: 2\nreason: Command failed with exit code 2\n\n\
                 output_path: {path}\noutput_size_bytes: 13\noutput_preview_bytes: 13\noutput_truncated: false\n\n\
                 full_output_available: true\nfull_output_tool: ReadFile\n\
                 full_output_hint: Use ReadFile(path=\"{path}\", line_offset=1, n_lines=300) to inspect the full log. \
                 Increase line_offset to continue paging through the file.\n\n[output]\nfirst\nsecond"
            )
        );
        assert_eq!(value.message, "Task output retrieved.");
        assert!(!value.is_error);
        assert_eq!(
            value.display,
            vec![DisplayBlock::BackgroundTask {
                task_id: id.clone(),
                kind: "bash".into(),
                status: "failed".into(),
                description: "job".into()
            }]
        );
        let consumer =
            std::fs::read_to_string(tasks.dir.path().join("tasks").join(&id).join("consumer.json")).unwrap();
        assert!(consumer.contains("\"last_seen_output_size\": 13"), "{consumer}");
    }

    #[tokio::test]
    async fn a_snapshot_of_a_running_task_and_a_block_that_times_out() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskOutput::new(tasks.manager.clone()));
        let task = tasks.start("sleep 30");
        let id = task.spec.id.clone();
        let snapshot = call(&tool, json!({"task_id": id})).await;
        assert_eq!(snapshot.message, "Task snapshot retrieved.");
        let body = text(&snapshot);
        assert!(body.starts_with("retrieval_status: not_ready\n"), "{body}");
        assert!(body.contains("\nterminal_reason: running\n"), "{body}");
        assert!(body.contains(
            "\nfull_output_available: false\nfull_output_tool: ReadFile\n\
             full_output_hint: No output file is currently available for this task.\n\n[output]\n[no output available]"
        ));
        let waited = call(&tool, json!({"task_id": id, "block": true, "timeout": 0})).await;
        assert!(text(&waited).starts_with("retrieval_status: timeout\n"));
        assert_eq!(waited.message, "Task output retrieved.");
        tasks.manager.kill(&id, "done").await.unwrap();
    }

    #[tokio::test]
    async fn long_output_shows_its_last_32_kib() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskOutput::new(tasks.manager.clone()));
        let task = tasks.start("for i in $(seq 1 5000); do printf '%09d\\n' $i; done");
        let id = task.spec.id.clone();
        tasks.manager.wait(&id, WAIT).await.unwrap();
        let value = call(&tool, json!({"task_id": id})).await;
        let body = text(&value);
        assert!(
            body.contains(
                "\noutput_size_bytes: 50000\noutput_preview_bytes: 32768\noutput_truncated: true\n"
            )
        );
        let path = std::fs::canonicalize(tasks.manager.output_path(&id)).unwrap();
        let output = body.split("\n[output]\n").nth(1).unwrap();
        let expected_start = format!("[Truncated. Full output: {}]\n\n", path.display());
        assert!(output.starts_with(&expected_start), "{output:.200}");
        assert!(output.ends_with("000005000"));
        assert_eq!(output.len(), expected_start.len() + 32768 - 1);
    }

    #[test]
    fn schema_matches_the_reference_shape() {
        let schema = crate::tool_spec::<TaskOutputArgs>(OUTPUT, "").parameters;
        assert_eq!(schema["required"], json!(["task_id"]));
        let props = schema["properties"].as_object().unwrap();
        assert_eq!(props.keys().collect::<Vec<_>>(), ["task_id", "block", "timeout"]);
        assert_eq!(props["block"]["default"], false);
        assert_eq!(
            (
                &props["timeout"]["default"],
                &props["timeout"]["minimum"],
                &props["timeout"]["maximum"]
            ),
            (&json!(30), &json!(0), &json!(3600))
        );
        assert_eq!(props["timeout"]["type"], "integer");
    }

    #[tokio::test]
    async fn unknown_tasks_bad_arguments_and_subagents() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskOutput::new(tasks.manager.clone()));
        assert_eq!(
            call(&tool, json!({"task_id": "bash-nothere1"})).await,
            ToolReturnValue::error("", "Task not found: bash-nothere1", "Task not found")
        );
        assert_eq!(
            call(&tool, json!({"task_id": "../../etc"})).await.message,
            "Task not found: ../../etc"
        );
        assert_eq!(
            call(&tool, json!({"task_id": "x", "timeout": -1})).await.message,
            "Error validating JSON arguments: 1 validation error for TaskOutputParams\ntimeout\n  Input should be greater than or equal to 0"
        );
        let sub = Arc::new(TaskOutput::new(tasks.manager.for_subagent()));
        assert_eq!(
            call(&sub, json!({"task_id": "x"})).await.message,
            "Background tasks can only be managed by the root agent."
        );
    }
}
