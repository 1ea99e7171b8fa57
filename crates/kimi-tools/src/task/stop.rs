//! `TaskStop`: stops a background task after the user approves (action `stop background task`).
//! Refused in plan mode; a task that already finished is left alone and reported as it is.

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_core::{TaskManager, format_task};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{STOP, TaskFormat, ensure_root, find, task_display};

/// The reason recorded when the model gives none (reference default).
const DEFAULT_REASON: &str = "Stopped by TaskStop";

// Parameters of `TaskStop`.
#[derive(Debug, Deserialize, JsonSchema)]
struct TaskStopArgs {
    /// The id of the task to stop.
    task_id: String,
    /// A few words on why, kept with the task.
    #[serde(default = "default_reason")]
    reason: String,
}

fn default_reason() -> String {
    DEFAULT_REASON.to_owned()
}

/// The `TaskStop` tool.
#[derive(Debug)]
pub struct TaskStop {
    spec: ToolSpec,
    tasks: TaskManager,
    format: TaskFormat,
}

impl TaskStop {
    /// A `TaskStop` over `tasks`.
    pub fn new(tasks: TaskManager) -> Self {
        Self::with_format(tasks, TaskFormat::Reference)
    }

    /// A `TaskStop` reporting the stopped task in `format`.
    pub fn with_format(tasks: TaskManager, format: TaskFormat) -> Self {
        let description = match format {
            TaskFormat::Reference => include_str!("../descriptions/task_stop.md"),
            TaskFormat::KimiCode => include_str!("../kimi_code/descriptions/task_stop.md"),
        };
        Self {
            spec: crate::tool_spec::<TaskStopArgs>(STOP, description),
            tasks,
            format,
        }
    }

    fn make_plan(self: Arc<Self>, args: Value, plan_mode: bool) -> Result<Plan, ToolReturnValue> {
        let args: TaskStopArgs = parse_args(args)?;
        ensure_root(&self.tasks)?;
        if plan_mode {
            return Err(ToolReturnValue::error(
                "",
                "TaskStop is not available in plan mode.",
                "Blocked in plan mode",
            ));
        }
        let view = find(&self.tasks, &args.task_id)?;
        let ask = ApprovalAsk {
            action: "stop background task".to_owned(),
            description: format!("Stop background task `{}`", view.spec.id),
            display: vec![task_display(&view)],
            detail_display: Vec::new(),
            writes: Vec::new(),
        };
        let reason = match args.reason.trim() {
            "" => DEFAULT_REASON.to_owned(),
            reason => reason.to_owned(),
        };
        Ok(Plan::side_effect(
            ask,
            Box::pin(async move {
                match self.tasks.kill(&view.spec.id, &reason).await {
                    Ok(view) => {
                        let text = match self.format {
                            TaskFormat::Reference => format_task(&view, true),
                            TaskFormat::KimiCode => crate::task::kimi_code::stopped(&view),
                        };
                        ToolReturnValue {
                            display: vec![task_display(&view)],
                            ..ToolReturnValue::ok(text, "Task stop requested.")
                        }
                    }
                    Err(e) => ToolReturnValue::error("", format!("Failed to stop task: {e}"), "Stop failed"),
                }
            }),
        ))
    }
}

impl Tool for TaskStop {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move { self.make_plan(args, ctx.plan_mode) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::testing::{Tasks, WAIT, call, group_gone_soon, plan};
    use kimi_core::Effect;
    use kimi_wire::message::DisplayBlock;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[tokio::test]
    async fn asks_then_stops_a_running_task() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskStop::new(tasks.manager.clone()));
        let task = tasks.start("sleep 30");
        let id = task.spec.id.clone();
        let plan = plan(&tool, json!({"task_id": id, "reason": "  "}), false)
            .await
            .unwrap();
        assert_eq!(
            plan.effect,
            Effect::SideEffect(ApprovalAsk {
                action: "stop background task".into(),
                description: format!("Stop background task `{id}`"),
                display: vec![DisplayBlock::BackgroundTask {
                    task_id: id.clone(),
                    kind: "bash".into(),
                    status: "running".into(),
                    description: "job".into()
                }],
                detail_display: Vec::new(),
                writes: Vec::new(),
            })
        );
        let value = plan.run.await;
        assert_eq!(value.message, "Task stop requested.");
        assert_eq!(
            value.output,
            format!(
                "task_id: {id}\nkind: bash\nstatus: killed\ndescription: job\ncommand: sleep 30\n\
                 exit_code: -15\nreason: Stopped by TaskStop"
            )
            .into()
        );
        assert!(group_gone_soon(task.runtime.child_pgid.unwrap()).await);
    }

    #[tokio::test]
    async fn a_finished_task_is_left_as_it_is() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskStop::new(tasks.manager.clone()));
        let task = tasks.start("echo done");
        let done = tasks.manager.wait(&task.spec.id, WAIT).await.unwrap();
        let value = call(&tool, json!({"task_id": task.spec.id})).await;
        assert_eq!(value.output, format_task(&done, true).into());
        assert_eq!(tasks.manager.get(&task.spec.id).unwrap(), done);
    }

    #[test]
    fn schema_matches_the_reference_shape() {
        let schema = crate::tool_spec::<TaskStopArgs>(STOP, "").parameters;
        assert_eq!(schema["required"], json!(["task_id"]));
        let props = schema["properties"].as_object().unwrap();
        assert_eq!(props.keys().collect::<Vec<_>>(), ["task_id", "reason"]);
        assert_eq!(props["reason"]["default"], "Stopped by TaskStop");
    }

    #[tokio::test]
    async fn refusals() {
        let tasks = Tasks::new();
        let tool = Arc::new(TaskStop::new(tasks.manager.clone()));
        let task = tasks.start("sleep 30");
        let in_plan_mode = plan(&tool, json!({"task_id": task.spec.id}), true)
            .await
            .unwrap_err();
        assert_eq!(
            in_plan_mode,
            ToolReturnValue::error(
                "",
                "TaskStop is not available in plan mode.",
                "Blocked in plan mode"
            )
        );
        assert_eq!(
            call(&tool, json!({"task_id": "bash-missing1"})).await,
            ToolReturnValue::error("", "Task not found: bash-missing1", "Task not found")
        );
        let sub = Arc::new(TaskStop::new(tasks.manager.for_subagent()));
        assert_eq!(
            call(&sub, json!({"task_id": task.spec.id})).await.message,
            "Background tasks can only be managed by the root agent."
        );
        tasks.manager.kill(&task.spec.id, "cleanup").await.unwrap();
    }
}
