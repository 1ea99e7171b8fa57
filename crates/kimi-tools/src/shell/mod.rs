//! `Shell`: runs one command with bash in the work dir and returns its combined output.
//!
//! The parameters and results follow the reference's `Shell` (`kimi_cli/tools/shell`): `command`,
//! `timeout` (seconds, 1..=86400, at most 300 in the foreground), `run_in_background` and
//! `description` (required with `run_in_background`). Every run needs approval (action `run command`,
//! or `run background command`).
//!
//! With `run_in_background` the command becomes a background task of the session's
//! [`TaskManager`]: the call returns at once with the task's id, the command runs on detached from the
//! turn (cancelling the turn does not stop it), and its end is announced to the model and the client.
//!
//! How a foreground process is started, read and stopped lives in [`process`].
//!
//! Output: the reference cuts Shell output to its first 50 000 characters inside the tool. We capture up
//! to [`MAX_CAPTURED_CHARS`] (lines still cut at 2000 characters, as the reference does) and let the
//! toolset's output budget decide what the model sees: head and tail of anything over 50 000 characters,
//! with the whole output saved in the session folder. The client's `ToolResult` shows everything
//! captured. Only beyond the capture cap is output dropped, with the reference's truncation note.

mod process;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kimi_core::CommandSandbox;
use kimi_core::Environment;
use kimi_core::{ApprovalAsk, CallContext, Plan, Tool, parse_args};
use kimi_core::{BashTaskRequest, TaskManager, TaskView, format_task};
use kimi_llm::ToolSpec;
use kimi_wire::message::{DisplayBlock, ToolReturnValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::args;
use crate::output::{DEFAULT_MAX_LINE_LENGTH, OutputBuilder};
use process::{KILL_GRACE, Limits, Outcome, ShellCommand};

/// The tool's name.
pub const NAME: &str = "Shell";

/// Longest timeout for a foreground command, in seconds (reference `MAX_FOREGROUND_TIMEOUT`).
pub const MAX_FOREGROUND_TIMEOUT: i64 = 5 * 60;

/// Longest timeout for a background command, in seconds (reference `MAX_BACKGROUND_TIMEOUT`).
pub const MAX_BACKGROUND_TIMEOUT: i64 = 24 * 60 * 60;

/// Characters of output kept of one command: far above the model's budget, so the toolset can save the
/// whole output for the model to page through; low enough that a runaway command cannot exhaust memory
/// or produce a protocol line near the wire's size cap.
pub const MAX_CAPTURED_CHARS: usize = 1_000_000;

/// The lines and characters of output tail quoted in a failed command's brief (reference defaults).
const BRIEF_TAIL_LINES: usize = 5;
const BRIEF_TAIL_LINE_CHARS: usize = 200;

// Parameters of `Shell`. Doc comments on fields become the descriptions the model reads; a doc
// comment here would become a description of the whole object, which the reference does not have.
#[derive(Debug, Deserialize, JsonSchema)]
struct ShellArgs {
    /// The shell command line to run.
    command: String,
    /// Seconds the command may take before it is stopped (at most 300 unless it runs in the background).
    #[serde(default = "default_timeout")]
    #[schemars(schema_with = "crate::args::plain_integer", range(min = 1, max = 86400))]
    timeout: i64,
    /// Run the command as a background task instead of waiting for it.
    #[serde(default)]
    run_in_background: bool,
    /// A few words saying what the background task does; required when `run_in_background` is true.
    #[serde(default)]
    description: String,
}

fn default_timeout() -> i64 {
    60
}

/// One command to run, once the tool the model called (`Shell`, or the kimi-code `Bash`) has checked
/// its own arguments: both run commands the same way, with their own limits.
#[derive(Debug)]
pub(crate) struct ShellRun {
    /// The command line, run with `bash -c`.
    pub command: String,
    /// Where it runs; the work dir when `None`.
    pub cwd: Option<PathBuf>,
    /// In the foreground or as a background task.
    pub mode: RunMode,
}

/// How a command's run relates to the call.
#[derive(Debug)]
pub(crate) enum RunMode {
    /// The call waits for the command, which is stopped after `timeout`.
    Foreground {
        /// The most the command may take.
        timeout: Duration,
    },
    /// The command becomes a background task and the call returns at once.
    Background {
        /// The model's few words about the task.
        description: String,
        /// The most the task may take; `None` for no limit.
        timeout: Option<Duration>,
    },
}

/// What a background run adds to the command: the task's description and limit, where it runs (for
/// the approval), the call that starts it and how it is confined.
struct BackgroundRun {
    description: String,
    timeout: Option<Duration>,
    place: String,
    tool_call_id: String,
    sandbox: CommandSandbox,
}

/// The `Shell` tool.
#[derive(Debug)]
pub struct Shell {
    spec: ToolSpec,
    shell: PathBuf,
    shell_name: &'static str,
    env: Arc<Environment>,
    tasks: TaskManager,
}

impl Shell {
    /// A `Shell` running commands in `env.work_dir` with the shell found by [`find_shell`], confined by
    /// `env`'s sandbox, starting background commands as tasks of `tasks`.
    pub fn new(env: Arc<Environment>, tasks: TaskManager) -> Self {
        let (shell, shell_name) = find_shell();
        let description = include_str!("../descriptions/shell.md")
            .replace("{shell}", &format!("{shell_name} (`{}`)", shell.display()));
        Self {
            spec: crate::tool_spec::<ShellArgs>(NAME, description),
            shell,
            shell_name,
            env,
            tasks,
        }
    }

    fn make_plan(self: Arc<Self>, args: Value, ctx: CallContext) -> Result<Plan, ToolReturnValue> {
        let args: ShellArgs = parse_args(args)?;
        validate(&args)?;
        // `validate` bounds the timeout to 1..=300 in the foreground and 1..=86400 in the background.
        let timeout = Duration::from_secs(u64::try_from(args.timeout).unwrap_or(1));
        let mode = if args.run_in_background {
            RunMode::Background {
                description: args.description,
                timeout: Some(timeout),
            }
        } else {
            RunMode::Foreground { timeout }
        };
        let run = ShellRun {
            command: args.command,
            cwd: None,
            mode,
        };
        self.plan_run(run, ctx)
    }

    /// The plan of a command whose arguments were checked by the tool the model called (`Shell`, or the
    /// kimi-code `Bash`): approval of the command, then the run in the foreground or as a task.
    pub(crate) fn plan_run(
        self: Arc<Self>,
        run: ShellRun,
        ctx: CallContext,
    ) -> Result<Plan, ToolReturnValue> {
        if run.command.is_empty() {
            return Err(ToolReturnValue::error(
                "",
                "Command cannot be empty.",
                "Empty command",
            ));
        }
        // Before approval: a command the sandbox cannot confine is not worth asking about.
        let sandbox = command_sandbox(&self.env)?;
        // The user approves a command where it runs: a directory other than the work dir is named.
        let place = run
            .cwd
            .as_ref()
            .map(|dir| format!(" in `{}`", dir.display()))
            .unwrap_or_default();
        let cwd = run.cwd.unwrap_or_else(|| self.env.work_dir.clone());
        let timeout = match run.mode {
            RunMode::Foreground { timeout } => timeout,
            RunMode::Background { description, timeout } => {
                let task = BackgroundRun {
                    description,
                    timeout,
                    place,
                    tool_call_id: ctx.tool_call_id,
                    sandbox,
                };
                return Ok(self.background_plan(run.command, cwd, task));
            }
        };
        let ask = ApprovalAsk {
            action: "run command".to_owned(),
            description: format!("Run command `{}`{place}", run.command),
            display: vec![DisplayBlock::Shell {
                language: "bash".to_owned(),
                command: run.command.clone(),
            }],
            detail_display: Vec::new(),
            writes: Vec::new(),
        };
        Ok(Plan::side_effect(
            ask,
            Box::pin(async move {
                self.execute(run.command, &cwd, timeout, sandbox, ctx.cancel)
                    .await
            }),
        ))
    }

    /// Approval for `run background command`, then a task that outlives this call.
    fn background_plan(self: Arc<Self>, command: String, cwd: PathBuf, task: BackgroundRun) -> Plan {
        let BackgroundRun {
            description,
            timeout,
            place,
            tool_call_id,
            sandbox,
        } = task;
        let ask = ApprovalAsk {
            action: "run background command".to_owned(),
            description: format!("Run background command `{command}`{place}"),
            display: vec![DisplayBlock::Shell {
                language: "bash".to_owned(),
                command: command.clone(),
            }],
            detail_display: Vec::new(),
            writes: Vec::new(),
        };
        let request = BashTaskRequest {
            command,
            description: description.trim().to_owned(),
            // Task records keep whole seconds (the reference's `timeout_s`): a part second rounds up.
            timeout_s: timeout.map(|t| t.as_secs() + u64::from(t.subsec_nanos() > 0)),
            tool_call_id,
            shell_name: self.shell_name.to_owned(),
            shell_path: self.shell.clone(),
            cwd,
            sandbox,
        };
        Plan::side_effect(
            ask,
            Box::pin(async move {
                match self.tasks.create_bash_task(request) {
                    Ok(view) => background_started(&view),
                    Err(e) => {
                        tracing::error!(error = %e, "background shell task not started");
                        ToolReturnValue::error(
                            "",
                            format!("Failed to start background task: {e}"),
                            "Start failed",
                        )
                    }
                }
            }),
        )
    }

    async fn execute(
        &self,
        command: String,
        cwd: &Path,
        timeout: Duration,
        sandbox: CommandSandbox,
        cancel: CancellationToken,
    ) -> ToolReturnValue {
        let mut out = OutputBuilder::with_limits(MAX_CAPTURED_CHARS, Some(DEFAULT_MAX_LINE_LENGTH));
        let cmd = ShellCommand {
            shell: &self.shell,
            command: &command,
            cwd,
            sandbox: &sandbox,
        };
        let limits = Limits {
            timeout,
            grace: KILL_GRACE,
        };
        let result = {
            let mut sink = |line: &str| {
                out.write(line);
            };
            process::run(cmd, limits, &cancel, &mut sink).await
        };
        match result {
            Ok(Outcome::Exited(0)) => out.ok("Command executed successfully.", ""),
            Ok(Outcome::Exited(code)) => {
                let mut brief = format!("Failed with exit code: {code}");
                let tail = out.tail(BRIEF_TAIL_LINES, BRIEF_TAIL_LINE_CHARS);
                if !tail.is_empty() {
                    brief.push('\n');
                    brief.push_str(&tail);
                }
                out.error(&format!("Command failed with exit code: {code}."), &brief)
            }
            Ok(Outcome::TimedOut) => {
                let limit = timeout_label(timeout);
                out.error(
                    &format!("Command killed by timeout ({limit})"),
                    &format!("Killed by timeout ({limit})"),
                )
            }
            Ok(Outcome::Cancelled) => out.error("Command was cancelled before it finished.", "Cancelled"),
            Err(e) => {
                tracing::error!(command = %command, error = %e, "shell command could not be started");
                let place = if sandbox.is_confined() {
                    " in the sandbox"
                } else {
                    ""
                };
                out.error(
                    &format!("Command execution failed{place}: {e}"),
                    "Execution failed",
                )
            }
        }
    }
}

impl Tool for Shell {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move { self.make_plan(args, ctx) })
    }
}

/// How a process the model asked for (a command, or git_diff's git) is confined now, or the tool error
/// refusing it when the sandbox cannot be enforced.
pub(crate) fn command_sandbox(env: &Environment) -> Result<CommandSandbox, ToolReturnValue> {
    env.command_sandbox()
        .map_err(|e| ToolReturnValue::error("", e.to_string(), "Sandbox unavailable"))
}

/// A timeout as the timeout messages write it: whole seconds as `60s`, anything finer as `1500ms`.
fn timeout_label(timeout: Duration) -> String {
    if timeout.subsec_nanos() == 0 {
        format!("{}s", timeout.as_secs())
    } else {
        format!("{}ms", timeout.as_millis())
    }
}

/// The result of a started background command: the task, and how the model should follow it up.
fn background_started(view: &TaskView) -> ToolReturnValue {
    let mut out = OutputBuilder::new();
    out.write(
        &[
            format_task(view, true).as_str(),
            "automatic_notification: true",
            "next_step: You will be automatically notified when it completes.",
            "next_step: Use TaskOutput with this task_id for a non-blocking status/output snapshot. \
             Only set block=true when you intentionally want to wait.",
            "next_step: Use TaskStop only if the task must be cancelled.",
            "human_shell_hint: For users in the interactive shell, the only task-management slash command \
             is /task. Do not suggest /task list, /task output, /task stop, or /tasks.",
        ]
        .join("\n"),
    );
    out.display(crate::task::task_display(view));
    out.ok("Background task started", &format!("Started {}", view.spec.id))
}

/// The reference's pydantic rules, in its order: field ranges first, then the cross-field checks.
fn validate(args: &ShellArgs) -> Result<(), ToolReturnValue> {
    if args.timeout < 1 {
        return Err(args::below_minimum("timeout", 1));
    }
    if args.timeout > MAX_BACKGROUND_TIMEOUT {
        return Err(args::above_maximum("timeout", MAX_BACKGROUND_TIMEOUT));
    }
    if args.run_in_background && args.description.trim().is_empty() {
        return Err(args::value_error(
            "description is required when run_in_background is true",
        ));
    }
    if !args.run_in_background && args.timeout > MAX_FOREGROUND_TIMEOUT {
        return Err(args::value_error(&format!(
            "timeout must be <= {MAX_FOREGROUND_TIMEOUT}s for foreground commands; \
             use run_in_background=true for longer timeouts (up to {MAX_BACKGROUND_TIMEOUT}s)"
        )));
    }
    Ok(())
}

/// The shell commands run with, and its name (`bash` or `sh`): the first of `/bin/bash`,
/// `/usr/bin/bash`, `/usr/local/bin/bash` that exists (the reference's list), else `bash` found on
/// `PATH`, else `/bin/sh`.
pub fn find_shell() -> (PathBuf, &'static str) {
    const KNOWN: [&str; 3] = ["/bin/bash", "/usr/bin/bash", "/usr/local/bin/bash"];
    if let Some(path) = KNOWN.iter().map(Path::new).find(|p| p.is_file()) {
        return (path.to_owned(), "bash");
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("bash"))
            .find(|p| p.is_file())
    });
    match on_path {
        Some(path) => (path, "bash"),
        None => (PathBuf::from("/bin/sh"), "sh"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::testing::{Tasks, WAIT};
    use kimi_core::BackgroundConfig;
    use kimi_core::Effect;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn shell_in(dir: &Path) -> Arc<Shell> {
        shell_with(dir, &Tasks::new())
    }

    fn shell_with(dir: &Path, tasks: &Tasks) -> Arc<Shell> {
        Arc::new(Shell::new(
            Arc::new(Environment::new(dir.to_owned(), Vec::new(), dir.to_owned())),
            tasks.manager.clone(),
        ))
    }

    fn ctx(cancel: &CancellationToken) -> CallContext {
        CallContext::new("tc-1", None, cancel.clone())
    }

    async fn plan(tool: &Arc<Shell>, args: Value) -> Result<Plan, ToolReturnValue> {
        Arc::clone(tool).plan(args, ctx(&CancellationToken::new())).await
    }

    async fn call(tool: &Arc<Shell>, args: Value) -> ToolReturnValue {
        match plan(tool, args).await {
            Ok(plan) => plan.run.await,
            Err(value) => value,
        }
    }

    fn plan_error(result: Result<Plan, ToolReturnValue>) -> ToolReturnValue {
        match result {
            Ok(plan) => panic!("expected an argument error, got {plan:?}"),
            Err(value) => value,
        }
    }

    #[tokio::test]
    async fn echo_succeeds_and_asks_to_run_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        let plan = plan(&tool, json!({"command": "echo ok"})).await.unwrap();
        assert_eq!(
            plan.effect,
            Effect::SideEffect(ApprovalAsk {
                action: "run command".into(),
                description: "Run command `echo ok`".into(),
                display: vec![DisplayBlock::Shell {
                    language: "bash".into(),
                    command: "echo ok".into()
                }],
                detail_display: Vec::new(),
                writes: Vec::new(),
            })
        );
        assert_eq!(
            plan.run.await,
            ToolReturnValue::ok("ok\n", "Command executed successfully.")
        );
    }

    #[tokio::test]
    async fn runs_in_the_work_dir_with_shell_set() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        let value = call(
            &tool,
            json!({"command": "pwd; test -n \"$SHELL\" && echo shell-set"}),
        )
        .await;
        let expected = format!("{}\nshell-set\n", dir.path().display());
        assert_eq!(
            value,
            ToolReturnValue::ok(expected, "Command executed successfully.")
        );
    }

    #[tokio::test]
    async fn a_failing_command_reports_its_code_and_tail() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        let value = call(&tool, json!({"command": "echo out; echo oops >&2; exit 3"})).await;
        assert_eq!(
            value,
            ToolReturnValue::error(
                "out\noops\n",
                "Command failed with exit code: 3.",
                "Failed with exit code: 3\nout\noops"
            )
        );
        let silent = call(&tool, json!({"command": "false"})).await;
        assert_eq!(
            silent,
            ToolReturnValue::error(
                "",
                "Command failed with exit code: 1.",
                "Failed with exit code: 1"
            )
        );
    }

    #[tokio::test]
    async fn stderr_is_interleaved_in_write_order() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        let value = call(
            &tool,
            json!({"command": "echo a; echo b >&2; echo c; echo d >&2"}),
        )
        .await;
        assert_eq!(value.output, "a\nb\nc\nd\n".into());
    }

    #[tokio::test]
    async fn timeout_kills_the_command_and_its_stubborn_grandchild() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        // One second of timeout, then at most the grace period before SIGKILL: a deadline on the awaited
        // result, far under the grandchild's 100 s.
        let value = tokio::time::timeout(
            Duration::from_secs(1) + KILL_GRACE + Duration::from_secs(2),
            call(
                &tool,
                json!({"command": "echo begin; bash -c 'trap \"\" TERM; sleep 100' & wait", "timeout": 1}),
            ),
        )
        .await
        .expect("the timeout killed the stubborn grandchild");
        assert_eq!(
            value,
            ToolReturnValue::error(
                "begin\n",
                "Command killed by timeout (1s)",
                "Killed by timeout (1s)"
            )
        );
    }

    #[tokio::test]
    async fn cancel_stops_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        let cancel = CancellationToken::new();
        let plan = Arc::clone(&tool)
            .plan(json!({"command": "sleep 100"}), ctx(&cancel))
            .await
            .unwrap();
        let trigger = cancel.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            trigger.cancel();
        });
        let value = tokio::time::timeout(Duration::from_secs(10), plan.run)
            .await
            .unwrap();
        assert_eq!(
            value,
            ToolReturnValue::error("", "Command was cancelled before it finished.", "Cancelled")
        );
    }

    #[tokio::test]
    async fn output_beyond_the_model_budget_is_kept_whole() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        let value = call(
            &tool,
            json!({"command": "for i in $(seq 1 3000); do printf '%050d\\n' $i; done; echo tail"}),
        )
        .await;
        // 153 005 characters: over the model's 50 000, which the toolset applies, not the tool.
        assert_eq!(value.message, "Command executed successfully.");
        let kimi_wire::message::ToolOutput::Text(text) = value.output else {
            panic!("text output expected")
        };
        assert_eq!(text.chars().count(), 3000 * 51 + 5);
        assert!(text.ends_with("tail\n"));
    }

    #[tokio::test]
    async fn output_beyond_the_capture_cap_is_truncated() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        // 1000 lines of 1001 characters: 1 001 000, just over the cap.
        let value = call(
            &tool,
            json!({"command": "for i in $(seq 1 1000); do printf '%01000d\\n' $i; done; echo tail"}),
        )
        .await;
        assert_eq!(
            value.message,
            "Command executed successfully. Output is truncated to fit in the message."
        );
        let kimi_wire::message::ToolOutput::Text(text) = value.output else {
            panic!("text output expected")
        };
        // 999 whole lines fit; the 1000th has one character left, so it becomes just the marker and its
        // line break (the builder overshoots by design, as the reference's does).
        assert_eq!(text.chars().count(), 999 * 1001 + "[...truncated]\n".len());
        assert!(text.ends_with("[...truncated]\n"));
        assert!(!text.contains("tail"));
    }

    #[tokio::test]
    async fn argument_errors_use_the_reference_messages() {
        let dir = tempfile::tempdir().unwrap();
        let tool = shell_in(dir.path());
        let prefix = "Error validating JSON arguments: 1 validation error for Params\n";
        let cases = [
            (
                json!({"command": "ls", "timeout": 0}),
                "timeout\n  Input should be greater than or equal to 1",
            ),
            (
                json!({"command": "ls", "timeout": 86401}),
                "timeout\n  Input should be less than or equal to 86400",
            ),
            (
                json!({"command": "ls", "timeout": 301}),
                "  Value error, timeout must be <= 300s for foreground commands; use run_in_background=true for longer timeouts (up to 86400s)",
            ),
            (
                json!({"command": "ls", "run_in_background": true, "description": "  "}),
                "  Value error, description is required when run_in_background is true",
            ),
        ];
        for (args, detail) in cases {
            let value = plan_error(plan(&tool, args).await);
            assert_eq!(
                value,
                ToolReturnValue::error("", format!("{prefix}{detail}"), "Invalid arguments")
            );
        }
        let missing = plan_error(plan(&tool, json!({})).await);
        assert!(
            missing.message.starts_with("Error validating JSON arguments: "),
            "{}",
            missing.message
        );
        assert!(missing.message.contains("command"), "{}", missing.message);
        assert_eq!(
            plan_error(plan(&tool, json!({"command": ""})).await),
            ToolReturnValue::error("", "Command cannot be empty.", "Empty command")
        );
    }

    #[tokio::test]
    async fn a_background_command_becomes_a_task_that_outlives_the_call() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = Tasks::new();
        let tool = shell_with(dir.path(), &tasks);
        let cancel = CancellationToken::new();
        let args = json!({"command": "sleep 0.3; echo done", "run_in_background": true,
                          "description": " nap ", "timeout": 600});
        let plan = Arc::clone(&tool).plan(args, ctx(&cancel)).await.unwrap();
        assert_eq!(
            plan.effect,
            Effect::SideEffect(ApprovalAsk {
                action: "run background command".into(),
                description: "Run background command `sleep 0.3; echo done`".into(),
                display: vec![DisplayBlock::Shell {
                    language: "bash".into(),
                    command: "sleep 0.3; echo done".into()
                }],
                detail_display: Vec::new(),
                writes: Vec::new(),
            })
        );
        let value = plan.run.await;
        // The turn ends; the task goes on.
        cancel.cancel();
        let [task] = tasks.manager.list(false, None).try_into().unwrap();
        let id = task.spec.id.clone();
        assert_eq!(task.spec.description, "nap");
        assert_eq!(task.spec.tool_call_id, "tc-1");
        assert_eq!(task.spec.timeout_s, Some(600));
        assert_eq!(
            value,
            ToolReturnValue {
                is_error: false,
                output: format!(
                    "task_id: {id}\nkind: bash\nstatus: running\ndescription: nap\ncommand: sleep 0.3; echo done\n\
                     automatic_notification: true\n\
                     next_step: You will be automatically notified when it completes.\n\
                     next_step: Use TaskOutput with this task_id for a non-blocking status/output snapshot. Only set block=true when you intentionally want to wait.\n\
                     next_step: Use TaskStop only if the task must be cancelled.\n\
                     human_shell_hint: For users in the interactive shell, the only task-management slash command is /task. Do not suggest /task list, /task output, /task stop, or /tasks."
                )
                .into(),
                message: "Background task started.".into(),
                display: vec![
                    DisplayBlock::Brief {
                        text: format!("Started {id}")
                    },
                    DisplayBlock::BackgroundTask {
                        task_id: id.clone(),
                        kind: "bash".into(),
                        status: "running".into(),
                        description: "nap".into()
                    }
                ],
                extras: None,
            }
        );
        let done = tasks.manager.wait(&id, WAIT).await.unwrap();
        assert_eq!(done.runtime.status, kimi_core::TaskStatus::Completed);
        assert_eq!(
            std::fs::read_to_string(tasks.manager.output_path(&id)).unwrap(),
            "done\n"
        );
    }

    #[tokio::test]
    async fn background_start_failures_are_tool_errors() {
        let dir = tempfile::tempdir().unwrap();
        let tasks = Tasks::with(BackgroundConfig {
            max_running_tasks: 1,
            ..BackgroundConfig::default()
        });
        let tool = shell_with(dir.path(), &tasks);
        let args = json!({"command": "sleep 30", "run_in_background": true, "description": "nap"});
        assert!(!call(&tool, args.clone()).await.is_error);
        assert_eq!(
            call(&tool, args.clone()).await,
            ToolReturnValue::error(
                "",
                "Failed to start background task: Too many background tasks are already running.",
                "Start failed"
            )
        );
        let sub = Arc::new(Shell::new(
            Arc::new(Environment::new(
                dir.path().to_owned(),
                Vec::new(),
                dir.path().to_owned(),
            )),
            tasks.manager.for_subagent(),
        ));
        assert_eq!(
            call(&sub, args).await.message,
            "Failed to start background task: Background tasks are only supported from the root agent."
        );
        tasks.manager.shutdown().await;
    }

    #[test]
    fn schema_matches_the_reference_shape() {
        let dir = std::env::temp_dir();
        let tool = shell_in(&dir);
        let params = &tool.spec().parameters;
        assert_eq!(params["type"], "object");
        assert_eq!(params["required"], json!(["command"]));
        let props = params["properties"].as_object().unwrap();
        assert_eq!(
            props.keys().collect::<Vec<_>>(),
            ["command", "timeout", "run_in_background", "description"]
        );
        assert_eq!(props["timeout"]["default"], 60);
        assert_eq!(props["timeout"]["minimum"], 1);
        assert_eq!(props["timeout"]["maximum"], 86400);
        assert_eq!(props["run_in_background"]["default"], false);
        assert_eq!(props["description"]["default"], "");
        assert!(
            tool.spec().description.contains("bash (`"),
            "{}",
            tool.spec().description
        );
    }
}
