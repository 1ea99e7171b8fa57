//! The task tools (reference `kimi_cli/tools/background`): `TaskList`, `TaskOutput` and `TaskStop`,
//! over the session's [`TaskManager`]. Only the root agent may use them; a subagent's call is refused
//! with the reference's error.

pub(crate) mod kimi_code;
mod list;
pub(crate) mod output;
pub(crate) mod preview;
mod stop;

use kimi_core::{TaskManager, TaskView};
use kimi_wire::message::{DisplayBlock, ToolReturnValue};

pub use list::TaskList;
pub use output::TaskOutput;
pub use stop::TaskStop;

/// The tools' names.
pub const LIST: &str = "TaskList";
/// See [`LIST`].
pub const OUTPUT: &str = "TaskOutput";
/// See [`LIST`].
pub const STOP: &str = "TaskStop";

/// How the task tools write tasks for the model: the reference's lines, or seeds/002's records (the
/// kimi-code agent; `crate::task::kimi_code`). The tools do the same work either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TaskFormat {
    /// The reference's `key: value` layout (`[1]`-numbered lists, `ReadFile` hints).
    #[default]
    Reference,
    /// seeds/002's: each task's record (snake_case keys, nothing empty), `---` between tasks, `Read`
    /// hints, `timed_out` and `stop_reason` as Kimi Code reports them.
    KimiCode,
}

/// The `background_task` display block for a task.
pub(crate) fn task_display(view: &TaskView) -> DisplayBlock {
    DisplayBlock::BackgroundTask {
        task_id: view.spec.id.clone(),
        kind: view.spec.kind.as_str().to_owned(),
        status: view.runtime.status.as_str().to_owned(),
        description: view.spec.description.clone(),
    }
}

/// The reference's refusal for calls from a subagent.
fn ensure_root(tasks: &TaskManager) -> Result<(), ToolReturnValue> {
    if tasks.is_root() {
        Ok(())
    } else {
        Err(ToolReturnValue::error(
            "",
            "Background tasks can only be managed by the root agent.",
            "Background task unavailable",
        ))
    }
}

/// The task `id`, or the reference's "not found" error.
fn find(tasks: &TaskManager, id: &str) -> Result<TaskView, ToolReturnValue> {
    tasks
        .get(id)
        .ok_or_else(|| ToolReturnValue::error("", format!("Task not found: {id}"), "Task not found"))
}

#[cfg(test)]
pub(crate) mod testing {
    //! A session with a task manager, for the task tools' tests and Shell's.

    use std::path::PathBuf;
    use std::sync::Arc;
    use std::time::Duration;

    use kimi_core::BackgroundConfig;
    use kimi_core::NotificationQueue;
    use kimi_core::{BashTaskRequest, TaskManager, TaskView};
    use kimi_core::{CallContext, Plan, Tool};
    use kimi_wire::message::ToolReturnValue;
    use serde_json::Value;
    use tokio_util::sync::CancellationToken;

    pub(crate) const WAIT: Duration = Duration::from_secs(15);

    pub(crate) struct Tasks {
        pub dir: tempfile::TempDir,
        pub manager: TaskManager,
    }

    impl Tasks {
        pub(crate) fn new() -> Self {
            Self::with(BackgroundConfig {
                kill_grace_period_ms: 300,
                ..BackgroundConfig::default()
            })
        }

        pub(crate) fn with(config: BackgroundConfig) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let queue = Arc::new(NotificationQueue::in_memory());
            let manager = TaskManager::open(dir.path(), "session", config, queue);
            Self { dir, manager }
        }

        /// Starts `command` as a bash task.
        pub(crate) fn start(&self, command: &str) -> TaskView {
            self.manager
                .create_bash_task(BashTaskRequest {
                    command: command.into(),
                    description: "job".into(),
                    timeout_s: Some(60),
                    tool_call_id: "tc-0".into(),
                    shell_name: "bash".into(),
                    shell_path: PathBuf::from("bash"),
                    cwd: self.dir.path().to_owned(),
                    sandbox: kimi_core::CommandSandbox::unconfined(),
                })
                .unwrap()
        }
    }

    /// Whether the process group `pgid` is gone within a few seconds (SIGKILL lands asynchronously).
    pub(crate) async fn group_gone_soon(pgid: i32) -> bool {
        for _ in 0..300 {
            if !kimi_core::procgroup::is_alive(pgid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    pub(crate) fn ctx(plan_mode: bool) -> CallContext {
        let mut ctx = CallContext::new("tc-1", None, CancellationToken::new());
        ctx.plan_mode = plan_mode;
        ctx
    }

    pub(crate) async fn plan<T: Tool + 'static>(
        tool: &Arc<T>,
        args: Value,
        plan_mode: bool,
    ) -> Result<Plan, ToolReturnValue> {
        Arc::clone(tool).plan(args, ctx(plan_mode)).await
    }

    pub(crate) async fn call<T: Tool + 'static>(tool: &Arc<T>, args: Value) -> ToolReturnValue {
        match plan(tool, args, false).await {
            Ok(plan) => plan.run.await,
            Err(value) => value,
        }
    }
}
