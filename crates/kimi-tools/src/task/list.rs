//! `TaskList`: the session's background tasks, most recently changed first (read-only).

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::{CallContext, Plan, Tool, parse_args};
use kimi_core::{TaskManager, format_task_list};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{LIST, TaskFormat, ensure_root, task_display};
use crate::args;

// Parameters of `TaskList` (plain comments: doc comments on the type would describe the whole object).
#[derive(Debug, Deserialize, JsonSchema)]
struct TaskListArgs {
    /// List only tasks that have not finished yet.
    #[serde(default = "yes")]
    active_only: bool,
    /// The most tasks to list.
    #[serde(default = "default_limit")]
    #[schemars(schema_with = "crate::args::plain_integer", range(min = 1, max = 100))]
    limit: i64,
}

fn yes() -> bool {
    true
}

fn default_limit() -> i64 {
    20
}

/// The `TaskList` tool.
#[derive(Debug)]
pub struct TaskList {
    spec: ToolSpec,
    tasks: TaskManager,
    format: TaskFormat,
}

impl TaskList {
    /// A `TaskList` over `tasks`.
    pub fn new(tasks: TaskManager) -> Self {
        Self::with_format(tasks, TaskFormat::Reference)
    }

    /// A `TaskList` writing its list in `format`.
    pub fn with_format(tasks: TaskManager, format: TaskFormat) -> Self {
        let description = match format {
            TaskFormat::Reference => include_str!("../descriptions/task_list.md"),
            TaskFormat::KimiCode => include_str!("../kimi_code/descriptions/task_list.md"),
        };
        Self {
            spec: crate::tool_spec::<TaskListArgs>(LIST, description),
            tasks,
            format,
        }
    }

    fn make_plan(self: Arc<Self>, args: Value) -> Result<Plan, ToolReturnValue> {
        let args: TaskListArgs = parse_args(args)?;
        args::check_range("TaskListParams", "limit", args.limit, 1, 100)?;
        ensure_root(&self.tasks)?;
        let limit = usize::try_from(args.limit).unwrap_or(1);
        Ok(Plan::read_only(Box::pin(async move {
            let views = self.tasks.list(args.active_only, Some(limit));
            let text = match self.format {
                TaskFormat::Reference => format_task_list(&views, args.active_only, true),
                TaskFormat::KimiCode => crate::task::kimi_code::list(&views, args.active_only),
            };
            ToolReturnValue {
                display: views.iter().map(task_display).collect(),
                ..ToolReturnValue::ok(text, "Task list retrieved.")
            }
        })))
    }
}

impl Tool for TaskList {
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
    use crate::task::testing::{Tasks, WAIT, call, plan};
    use kimi_core::Effect;
    use kimi_wire::message::DisplayBlock;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[tokio::test]
    async fn lists_active_tasks_by_default_and_all_on_request() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskList::new(tasks.manager.clone()));
        assert_eq!(
            call(&tool, json!({})).await,
            ToolReturnValue::ok("active_background_tasks: 0\n[no tasks]", "Task list retrieved.")
        );
        let done = tasks.start("true");
        tasks.manager.wait(&done.spec.id, WAIT).await.unwrap();
        let running = tasks.start("sleep 30");
        let id = &running.spec.id;
        let value = call(&tool, json!({})).await;
        assert_eq!(
            value,
            ToolReturnValue {
                display: vec![DisplayBlock::BackgroundTask {
                    task_id: id.clone(),
                    kind: "bash".into(),
                    status: "running".into(),
                    description: "job".into(),
                }],
                ..ToolReturnValue::ok(
                    format!(
                        "active_background_tasks: 1\n\n[1]\ntask_id: {id}\nkind: bash\nstatus: running\n\
                         description: job\ncommand: sleep 30"
                    ),
                    "Task list retrieved."
                )
            }
        );
        let all = call(&tool, json!({"active_only": false})).await;
        assert_eq!(all.display.len(), 2);
        let kimi_wire::message::ToolOutput::Text(text) = &all.output else {
            panic!("text expected")
        };
        assert!(text.starts_with("background_tasks: 2\n"), "{text}");
        assert_eq!(
            call(&tool, json!({"active_only": false, "limit": 1}))
                .await
                .display
                .len(),
            1
        );
        tasks.manager.kill(id, "done").await.unwrap();
    }

    #[tokio::test]
    async fn is_read_only_validates_and_refuses_subagents() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskList::new(tasks.manager.clone()));
        assert_eq!(
            plan(&tool, json!({}), true).await.unwrap().effect,
            Effect::ReadOnly
        );
        assert_eq!(
            call(&tool, json!({"limit": 0})).await.message,
            "Error validating JSON arguments: 1 validation error for TaskListParams\nlimit\n  Input should be greater than or equal to 1"
        );
        let sub = Arc::new(TaskList::new(tasks.manager.for_subagent()));
        assert_eq!(
            call(&sub, json!({})).await,
            ToolReturnValue::error(
                "",
                "Background tasks can only be managed by the root agent.",
                "Background task unavailable"
            )
        );
    }

    #[test]
    fn schema_matches_the_reference_shape() {
        let schema = crate::tool_spec::<TaskListArgs>(LIST, "").parameters;
        assert_eq!(
            schema,
            json!({
                "type": "object",
                "properties": {
                    "active_only": {"description": "List only tasks that have not finished yet.", "type": "boolean", "default": true},
                    "limit": {"description": "The most tasks to list.", "type": "integer", "default": 20, "minimum": 1, "maximum": 100}
                }
            })
        );
    }
}
