//! Running a subagent for the `Agent` tool, in the foreground or as a background task: its instance
//! on disk ([`crate::subagent`]), its soul (made by [`super::soul::soul`]), its run to a report, and
//! what the caller is told (reference `kimi_cli/tools/agent`, `kimi_cli/subagents`).
//!
//! The subagent's events reach the client wrapped in `SubagentEvent`s through its [`EventSink`]; its
//! approval requests go to the client directly and name it. Subagents get no `Agent` tool, so they
//! cannot start subagents of their own.

mod report;
mod transcript;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kimi_wire::message::ToolReturnValue;
use tokio_util::sync::CancellationToken;

use self::report::{RunFailure, run_with_report};
use self::transcript::Transcript;
use super::kinds::{ModelChoice, SubagentType};
use super::soul::{self, Recipe};
use super::tools::{Subagents, ToolInputs};
use crate::background::{NewTask, TaskEvent, TaskKind};
use crate::config::HookEvent;
use crate::context::Context;
use crate::events::{EventSink, SubagentIdentity};
use crate::hooks::input as hook_input;
use crate::recorder::WireRecorder;
use crate::soul::Soul;
use crate::subagent::{InstanceRecord, InstanceStatus, SubagentStore};
use crate::toolset::CallContext;

/// What the `Agent` tool asks for, its arguments checked.
#[derive(Debug, Clone)]
pub struct AgentRequest {
    /// A short description of the task.
    pub description: String,
    /// The complete task for the subagent.
    pub prompt: String,
    /// Which subagent type runs the task.
    pub subagent_type: String,
    /// A model alias of the configuration (already checked to exist).
    pub model: Option<String>,
    /// The agent_id of an earlier subagent to continue.
    pub resume: Option<String>,
    /// Run in the background and return at once.
    pub run_in_background: bool,
    /// Stop the subagent after this many seconds.
    pub timeout: Option<u64>,
}

impl Subagents {
    /// Runs the subagent `args` asks for, for the call `ctx`: in the foreground until its report
    /// (or `timeout`), or as a background task, returning at once with the reference's launch report.
    pub async fn run(self: Arc<Self>, args: AgentRequest, ctx: CallContext) -> ToolReturnValue {
        if args.run_in_background {
            return self.start_background(args, &ctx);
        }
        let run = self.run_foreground(&args, &ctx);
        match args.timeout {
            Some(seconds) => match tokio::time::timeout(Duration::from_secs(seconds), run).await {
                Ok(result) => result,
                Err(_) => ToolReturnValue::error(
                    "",
                    format!("Agent timed out after {seconds}s."),
                    format!("Agent timed out ({seconds}s)"),
                ),
            },
            None => run.await,
        }
    }

    async fn run_foreground(&self, args: &AgentRequest, ctx: &CallContext) -> ToolReturnValue {
        let store = SubagentStore::new(&self.parent.env.session_dir);
        let (mut record, resumed) = match self.prepare(&store, args) {
            Ok(prepared) => prepared,
            Err(error) => return error,
        };
        let Some(kind) = self.types.iter().find(|t| t.name == record.subagent_type) else {
            return unknown_type(&record.subagent_type);
        };
        let model = match self.model_for(&record, args.model.as_deref()) {
            Ok(model) => model,
            Err(error) => return error,
        };
        let fail = |e: &dyn std::fmt::Display| {
            ToolReturnValue::error("", format!("Failed to run agent: {e}"), "Agent failed")
        };
        if let Err(e) = store.update(
            &mut record,
            InstanceStatus::RunningForeground,
            Some(args.description.trim()),
        ) {
            return fail(&e);
        }
        // A cancelled turn drops this future mid-run; the guard then marks the instance killed so it
        // can be resumed later.
        let mut running = RunningInstance {
            store: store.clone(),
            record: Some(record.clone()),
        };
        let dir = store.dir(&record.agent_id);
        let _ = tokio::fs::write(dir.join("prompt.txt"), &args.prompt).await;
        let identity = SubagentIdentity {
            parent_tool_call_id: ctx.tool_call_id.clone(),
            agent_id: record.agent_id.clone(),
            subagent_type: kind.name.clone(),
            background_task: None,
        };
        let recorder =
            Arc::new(WireRecorder::open(&dir.join("wire.jsonl"), Some(self.parent.events.client())).await);
        let events = EventSink::for_subagent(&self.parent.events, identity.clone(), recorder);
        let soul = self.build_soul(kind, identity, events, model, &dir).await;
        let _ = self
            .hooks
            .trigger(
                HookEvent::SubagentStart,
                &kind.name,
                hook_input::subagent_start(&kind.name, &args.prompt),
            )
            .await;
        let outcome = run_with_report(&soul, &args.prompt, &ctx.cancel).await;
        soul.flush(true).await;
        let (status, result) = match outcome {
            Ok(report) => {
                self.hooks.trigger_detached(
                    HookEvent::SubagentStop,
                    kind.name.clone(),
                    hook_input::subagent_stop(&kind.name, &report),
                );
                let _ = tokio::fs::write(dir.join("output"), &report).await;
                let mut lines = vec![
                    format!("agent_id: {}", record.agent_id),
                    format!("resumed: {resumed}"),
                ];
                if resumed && args.subagent_type != kind.name {
                    lines.push(format!("requested_subagent_type: {}", args.subagent_type));
                }
                lines.extend([
                    format!("actual_subagent_type: {}", kind.name),
                    "status: completed".to_owned(),
                    String::new(),
                    "[summary]".to_owned(),
                    report,
                ]);
                (InstanceStatus::Idle, ToolReturnValue::ok(lines.join("\n"), ""))
            }
            Err(RunFailure::Cancelled) => (
                InstanceStatus::Killed,
                ToolReturnValue::error("", "Subagent run was cancelled.", "Agent cancelled"),
            ),
            Err(RunFailure::Failed { message, brief }) => {
                (InstanceStatus::Failed, ToolReturnValue::error("", message, brief))
            }
        };
        running.finish(status);
        result
    }

    /// `run_in_background`: registers the instance as a background task and returns at once with the
    /// reference's launch report; the run goes on under the task manager, which tells the model when it
    /// ends.
    fn start_background(self: Arc<Self>, args: AgentRequest, ctx: &CallContext) -> ToolReturnValue {
        let store = SubagentStore::new(&self.parent.env.session_dir);
        let (mut record, resumed) = match self.prepare(&store, &args) {
            Ok(prepared) => prepared,
            Err(error) => return error,
        };
        let Some(kind) = self
            .types
            .iter()
            .find(|t| t.name == record.subagent_type)
            .cloned()
        else {
            return unknown_type(&record.subagent_type);
        };
        let model = match self.model_for(&record, args.model.as_deref()) {
            Ok(model) => model,
            Err(error) => return error,
        };
        let description = args.description.trim().to_owned();
        if let Err(e) = store.update(&mut record, InstanceStatus::RunningBackground, Some(&description)) {
            return ToolReturnValue::error("", e.to_string(), "Background start failed");
        }
        let timeout_s = args
            .timeout
            .unwrap_or(self.parent.tasks.config().agent_task_timeout_s);
        let mut payload = serde_json::Map::new();
        payload.insert("agent_id".into(), record.agent_id.clone().into());
        payload.insert("subagent_type".into(), kind.name.clone().into());
        payload.insert("prompt".into(), args.prompt.clone().into());
        payload.insert("model_override".into(), args.model.clone().into());
        payload.insert("launch_mode".into(), "background".into());
        let new = NewTask {
            kind: TaskKind::Agent,
            description: description.clone(),
            tool_call_id: ctx.tool_call_id.clone(),
            timeout_s: Some(timeout_s),
            kind_payload: Some(payload),
        };
        let run = BackgroundRun {
            parent_tool_call_id: ctx.tool_call_id.clone(),
            record: record.clone(),
            kind: kind.clone(),
            prompt: args.prompt,
            timeout_s,
            model,
        };
        let tool = Arc::clone(&self);
        let started = self
            .parent
            .tasks
            .start_task(new, move |task_id, stop| async move {
                tool.run_in_background(run, task_id, stop).await
            });
        let view = match started {
            Ok(view) => view,
            Err(e) => {
                if let Err(e) = store.update(&mut record, InstanceStatus::Idle, None) {
                    tracing::warn!(agent_id = %record.agent_id, error = %e, "subagent meta.json not reset");
                }
                if !resumed {
                    store.delete(&record.agent_id);
                }
                return ToolReturnValue::error("", e.to_string(), "Background start failed");
            }
        };
        let agent_id = &record.agent_id;
        let lines = [
            format!("task_id: {}", view.spec.id),
            format!("kind: {}", view.spec.kind.as_str()),
            format!("status: {}", view.runtime.status.as_str()),
            format!("description: {}", view.spec.description),
            format!("agent_id: {agent_id}"),
            format!("actual_subagent_type: {}", kind.name),
            "automatic_notification: true".to_owned(),
            "next_step: You will be automatically notified when it completes.".to_owned(),
            "next_step: Use TaskOutput with this task_id for a non-blocking status/output snapshot. Only set block=true when you intentionally want to wait.".to_owned(),
            format!(
                "resume_hint: Use Agent(resume=\"{agent_id}\", prompt=\"...\") to continue this instance later."
            ),
        ];
        ToolReturnValue::ok(lines.join("\n"), "Background task started.")
    }

    /// The body of a background agent task: the subagent's run, its transcript kept in both its own
    /// `output` and the task's output, and the event that ends the task.
    async fn run_in_background(
        &self,
        run: BackgroundRun,
        task_id: String,
        stop: CancellationToken,
    ) -> TaskEvent {
        let store = SubagentStore::new(&self.parent.env.session_dir);
        let dir = store.dir(&run.record.agent_id);
        let transcript = Transcript::new(vec![dir.join("output"), self.parent.tasks.output_path(&task_id)]);
        let _ = self
            .parent
            .tasks
            .record(&task_id, TaskEvent::Start { child_pid: None });
        transcript.stage("runner_started");
        let _ = tokio::fs::write(dir.join("prompt.txt"), &run.prompt).await;
        let mut running = RunningInstance {
            store: store.clone(),
            record: Some(run.record.clone()),
        };
        let identity = SubagentIdentity {
            parent_tool_call_id: run.parent_tool_call_id.clone(),
            agent_id: run.record.agent_id.clone(),
            subagent_type: run.kind.name.clone(),
            background_task: Some(task_id.clone()),
        };
        let recorder =
            Arc::new(WireRecorder::open(&dir.join("wire.jsonl"), Some(self.parent.events.client())).await);
        let observer = {
            let transcript = transcript.clone();
            Arc::new(move |event: &kimi_wire::message::Event| transcript.event(event))
        };
        let events = EventSink::for_background(&self.parent.events, recorder, observer);
        let soul = self
            .build_soul(&run.kind, identity, events, run.model.clone(), &dir)
            .await;
        let _ = self
            .hooks
            .trigger(
                HookEvent::SubagentStart,
                &run.kind.name,
                hook_input::subagent_start(&run.kind.name, &run.prompt),
            )
            .await;
        transcript.stage("run_soul_start");
        let outcome = tokio::time::timeout(
            Duration::from_secs(run.timeout_s),
            run_with_report(&soul, &run.prompt, &stop),
        )
        .await;
        soul.flush(true).await;
        match outcome {
            Ok(Ok(report)) => {
                transcript.stage("run_soul_finished");
                transcript.summary(&report);
                self.hooks.trigger_detached(
                    HookEvent::SubagentStop,
                    run.kind.name.clone(),
                    hook_input::subagent_stop(&run.kind.name, &report),
                );
                running.finish(InstanceStatus::Idle);
                TaskEvent::Exit { exit_code: 0 }
            }
            Ok(Err(RunFailure::Cancelled)) => {
                running.finish(InstanceStatus::Killed);
                transcript.stage("cancelled");
                // The session ending says so; a TaskStop gets the reference's words.
                let ended = self
                    .parent
                    .tasks
                    .get(&task_id)
                    .and_then(|view| view.control.kill_reason)
                    .filter(|reason| reason == crate::background::SESSION_ENDED);
                TaskEvent::Kill {
                    reason: ended.unwrap_or_else(|| "Stopped by TaskStop".to_owned()),
                    exit_code: None,
                }
            }
            Ok(Err(RunFailure::Failed { message, brief })) => {
                running.finish(InstanceStatus::Failed);
                transcript.stage(&format!("failed: {brief}"));
                TaskEvent::Fail { reason: message }
            }
            Err(_elapsed) => {
                let reason = format!("Agent task timed out after {}s", run.timeout_s);
                running.finish(InstanceStatus::Failed);
                transcript.error(&reason);
                TaskEvent::TimeOut {
                    reason,
                    exit_code: None,
                }
            }
        }
    }

    /// The instance to run: the one named by `resume`, or a new one of the requested type.
    fn prepare(
        &self,
        store: &SubagentStore,
        args: &AgentRequest,
    ) -> Result<(InstanceRecord, bool), ToolReturnValue> {
        if let Some(id) = &args.resume {
            let record = store.get(id).ok_or_else(|| {
                ToolReturnValue::error(
                    "",
                    format!("Failed to run agent: Subagent instance not found: {id}"),
                    "Agent failed",
                )
            })?;
            if record.status.is_running() {
                return Err(ToolReturnValue::error(
                    "",
                    format!(
                        "Failed to run agent: Agent instance {} is still {} and cannot be resumed concurrently.",
                        record.agent_id,
                        record.status.as_str()
                    ),
                    "Agent failed",
                ));
            }
            return Ok((record, true));
        }
        if !self.types.iter().any(|t| t.name == args.subagent_type) {
            return Err(unknown_type(&args.subagent_type));
        }
        store
            .create(&args.subagent_type, args.description.trim(), args.model.clone())
            .map(|record| (record, false))
            .map_err(|e| ToolReturnValue::error("", format!("Failed to run agent: {e}"), "Agent failed"))
    }

    /// The provider for a run of `record`: the `model` argument, else the instance's own model alias,
    /// else the parent's model.
    fn model_for(
        &self,
        record: &InstanceRecord,
        asked: Option<&str>,
    ) -> Result<ModelChoice, ToolReturnValue> {
        match asked.or(record.launch_spec.effective_model.as_deref()) {
            None => Ok((self.llm.clone(), self.model.clone())),
            Some(alias) if !self.model_aliases.contains(alias) => Err(ToolReturnValue::error(
                "",
                format!("Unknown model alias: {alias}"),
                "Invalid model alias",
            )),
            Some(alias) => self
                .models
                .build(alias)
                .map_err(|e| ToolReturnValue::error("", format!("Failed to run agent: {e}"), "Agent failed")),
        }
    }

    /// The subagent's soul, made by the same builder as the root agent's: its type's tools (never
    /// `Agent`: the inputs carry no subagents), its own context and events.
    async fn build_soul(
        &self,
        kind: &SubagentType,
        identity: SubagentIdentity,
        events: EventSink,
        (llm, model): ModelChoice,
        dir: &Path,
    ) -> Soul {
        let inputs = ToolInputs {
            events,
            // A subagent may look at the session's background tasks but not start or stop them.
            tasks: self.parent.tasks.for_subagent(),
            ..self.parent.clone()
        };
        let context = Context::open(
            &dir.join("context.jsonl"),
            kind.system_prompt.clone(),
            Some(inputs.events.client()),
        )
        .await;
        soul::soul(Recipe {
            factory: self.factory.as_ref(),
            tools: &self.tools(kind),
            tool_names: self.factory.tool_names(&kind.tools),
            inputs: &inputs,
            llm,
            model,
            settings: self.settings,
            context,
            hooks: Arc::clone(&self.hooks),
            subagent: Some(identity),
            root: None,
        })
    }
}

/// What a background run needs, moved into its task.
struct BackgroundRun {
    parent_tool_call_id: String,
    record: InstanceRecord,
    kind: SubagentType,
    prompt: String,
    timeout_s: u64,
    model: ModelChoice,
}

/// An instance whose run is in progress; its status is written when the run ends, however it ends.
struct RunningInstance {
    store: SubagentStore,
    record: Option<InstanceRecord>,
}

impl RunningInstance {
    fn finish(&mut self, status: InstanceStatus) {
        if let Some(mut record) = self.record.take()
            && let Err(e) = self.store.update(&mut record, status, None)
        {
            tracing::warn!(agent_id = %record.agent_id, error = %e, "subagent meta.json not updated");
        }
    }
}

impl Drop for RunningInstance {
    fn drop(&mut self) {
        self.finish(InstanceStatus::Killed);
    }
}

/// The reference's message: its registry raises `KeyError`, whose text Python prints quoted.
fn unknown_type(name: &str) -> ToolReturnValue {
    ToolReturnValue::error(
        "",
        format!("Failed to run agent: 'Builtin subagent type not found: {name}'"),
        "Agent failed",
    )
}
