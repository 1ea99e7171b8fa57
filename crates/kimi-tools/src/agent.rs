//! `Agent`: runs a subagent, a separate loop with its own context, tools and `wire.jsonl` under
//! `<session>/subagents/<id>/`, and returns its final report (reference `kimi_cli/tools/agent`,
//! `kimi_cli/subagents`).
//!
//! The subagent's events reach the client wrapped in `SubagentEvent`s through its [`EventSink`]; its
//! approval requests go to the client directly and name it. Subagents get no `Agent` tool, so they cannot
//! start subagents of their own. The call is read-only for the approval runtime (the subagent asks for
//! its own side effects), so several `Agent` calls in one step run at once.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kimi_core::agent_spec::{AgentSpec, AgentSpecError};
use kimi_core::background::{NewTask, TaskEvent, TaskKind};
use kimi_core::config::HookEvent;
use kimi_core::context::Context;
use kimi_core::events::{EventSink, SubagentIdentity};
use kimi_core::hooks::{HookEngine, input as hook_input};
use kimi_core::recorder::WireRecorder;
use kimi_core::soul::{LoopSettings, ModelInfo, Soul, SoulParts, TurnError, TurnOutcome};
use kimi_core::subagent::{InstanceRecord, InstanceStatus, SubagentStore};
use kimi_core::toolset::{CallContext, Plan, Toolset, parse_args};
use kimi_llm::{ChatProvider, ToolSpec};
use kimi_wire::message::{ToolReturnValue, UserInput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::{ToolDeps, args};

/// The tool's name.
pub const NAME: &str = "Agent";

/// A report shorter than this gets one request for more detail (reference `SUMMARY_MIN_LENGTH`).
const SUMMARY_MIN_CHARS: usize = 200;
/// What the subagent is told when its report is too short (our words).
const MORE_DETAIL_PROMPT: &str = "Your report is too short for the agent that asked you. Write it again in full: \
     what you did, what you found (with file paths, names and the technical details that matter), and \
     anything left open.";

/// One subagent type the agent file offers.
#[derive(Debug, Clone)]
pub struct SubagentType {
    /// Its name (`coder`, `explore`, `plan`).
    pub name: String,
    /// What it is good at.
    pub description: String,
    /// When to pick it.
    pub when_to_use: String,
    /// Its tool paths (agent-file form).
    pub tools: Vec<String>,
    /// Its rendered system prompt.
    pub system_prompt: String,
}

impl SubagentType {
    /// Loads type `name` from its agent file at `path`, rendering its prompt with `vars` (the
    /// session's built-in prompt variables).
    pub fn load(
        name: &str,
        description: &str,
        path: &str,
        vars: &BTreeMap<String, String>,
    ) -> Result<Self, AgentSpecError> {
        let spec = AgentSpec::load(path)?;
        let mut vars = vars.clone();
        vars.extend(spec.system_prompt_args.clone());
        let system_prompt = kimi_core::prompt::render(&spec.system_prompt_template()?, &vars);
        Ok(Self {
            name: name.to_owned(),
            description: description.to_owned(),
            when_to_use: spec.when_to_use.split_whitespace().collect::<Vec<_>>().join(" "),
            tools: spec.effective_tools(),
            system_prompt,
        })
    }

    /// Its tools as [`crate::build_tool`] takes them, in order, once each.
    fn tool_names(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = Vec::new();
        for entry in &self.tools {
            if let Some(name) = crate::resolve_entry(entry)
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
        names
    }
}

/// A provider and its model facts.
pub type ModelChoice = (Option<Arc<dyn ChatProvider>>, ModelInfo);

/// Builds the provider for a model alias of the configuration, for a subagent run with `model`.
#[derive(Clone)]
pub struct ModelSwitch(Arc<BuildModel>);

type BuildModel = dyn Fn(&str) -> Result<ModelChoice, String> + Send + Sync;

impl ModelSwitch {
    /// A switch calling `build` with the alias.
    pub fn new(build: impl Fn(&str) -> Result<ModelChoice, String> + Send + Sync + 'static) -> Self {
        Self(Arc::new(build))
    }

    fn build(&self, alias: &str) -> Result<ModelChoice, String> {
        (self.0)(alias)
    }
}

impl std::fmt::Debug for ModelSwitch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ModelSwitch")
    }
}

/// Everything needed to start subagents.
#[derive(Debug, Clone)]
pub struct SubagentKit {
    /// The provider subagents use unless they ask for another model (the parent's).
    pub llm: Option<Arc<dyn ChatProvider>>,
    /// The model facts.
    pub model: ModelInfo,
    /// Loop limits.
    pub settings: LoopSettings,
    /// The session's hooks (SubagentStart / SubagentStop, and the subagent's own tool hooks).
    pub hooks: Arc<HookEngine>,
    /// The types, in the agent file's order.
    pub types: Vec<SubagentType>,
    /// Model aliases the config defines (a `model` argument must name one).
    pub model_aliases: BTreeSet<String>,
    /// Builds the provider of another alias.
    pub models: ModelSwitch,
}

impl SubagentKit {
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
}

// Parameters of `Agent` (plain comments on the types: doc comments would become schema descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct AgentArgs {
    /// A short (3 to 5 words) description of the task.
    description: String,
    /// The complete task for the subagent, with all the context it needs.
    prompt: String,
    /// Which subagent type runs the task.
    #[serde(default = "default_type")]
    subagent_type: String,
    /// A model alias from the configuration to run the subagent with instead of the current model.
    #[serde(default)]
    model: Option<String>,
    /// The agent_id of an earlier subagent to continue, with its conversation, instead of starting a new one.
    #[serde(default)]
    resume: Option<String>,
    /// Run in the background and return at once. Prefer false unless the work is independent and you do not need its result soon.
    #[serde(default)]
    run_in_background: bool,
    /// Stop the subagent after this many seconds (30 to 3600). No limit by default in the foreground.
    #[serde(default)]
    timeout: Option<u64>,
}

fn default_type() -> String {
    "coder".to_owned()
}

/// The `Agent` tool.
#[derive(Debug)]
pub struct AgentTool {
    spec: ToolSpec,
    kit: Arc<SubagentKit>,
    deps: ToolDeps,
}

impl AgentTool {
    /// The tool; `deps` are the session's tool dependencies (the parent's), from which each
    /// subagent's tools are built.
    pub fn new(kit: Arc<SubagentKit>, deps: ToolDeps) -> Self {
        let types = kit
            .types
            .iter()
            .map(|t| {
                let tools = t
                    .tool_names()
                    .into_iter()
                    .map(crate::model_name)
                    .collect::<Vec<_>>()
                    .join(", ");
                let when = if t.when_to_use.is_empty() {
                    String::new()
                } else {
                    format!(" When to use: {}", t.when_to_use)
                };
                format!("- `{}`: {} (Tools: {tools}).{when}", t.name, t.description)
            })
            .collect::<Vec<_>>()
            .join("\n");
        let description = include_str!("descriptions/agent.md").replace("${SUBAGENT_TYPES}", &types);
        Self {
            spec: crate::tool_spec::<AgentArgs>(NAME, description),
            kit,
            deps,
        }
    }

    async fn run(self: Arc<Self>, args: AgentArgs, ctx: CallContext) -> ToolReturnValue {
        if let Some(model) = &args.model
            && !self.kit.model_aliases.contains(model)
        {
            return ToolReturnValue::error(
                "",
                format!("Unknown model alias: {model}"),
                "Invalid model alias",
            );
        }
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

    async fn run_foreground(&self, args: &AgentArgs, ctx: &CallContext) -> ToolReturnValue {
        let store = SubagentStore::new(&self.deps.env.session_dir);
        let (mut record, resumed) = match self.prepare(&store, args) {
            Ok(prepared) => prepared,
            Err(error) => return error,
        };
        let Some(kind) = self.kit.types.iter().find(|t| t.name == record.subagent_type) else {
            return unknown_type(&record.subagent_type);
        };
        let model = match self.kit.model_for(&record, args.model.as_deref()) {
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
        let recorder = Arc::new(WireRecorder::open(&dir.join("wire.jsonl")).await);
        let events = EventSink::for_subagent(&self.deps.events, identity.clone(), recorder);
        let soul = self.build_soul(kind, identity, events, model, &dir).await;
        let _ = self
            .kit
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
                self.kit.hooks.trigger_detached(
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
    fn start_background(self: Arc<Self>, args: AgentArgs, ctx: &CallContext) -> ToolReturnValue {
        let store = SubagentStore::new(&self.deps.env.session_dir);
        let (mut record, resumed) = match self.prepare(&store, &args) {
            Ok(prepared) => prepared,
            Err(error) => return error,
        };
        let Some(kind) = self
            .kit
            .types
            .iter()
            .find(|t| t.name == record.subagent_type)
            .cloned()
        else {
            return unknown_type(&record.subagent_type);
        };
        let model = match self.kit.model_for(&record, args.model.as_deref()) {
            Ok(model) => model,
            Err(error) => return error,
        };
        let description = args.description.trim().to_owned();
        if let Err(e) = store.update(&mut record, InstanceStatus::RunningBackground, Some(&description)) {
            return ToolReturnValue::error("", e.to_string(), "Background start failed");
        }
        let timeout_s = args
            .timeout
            .unwrap_or(self.deps.tasks.config().agent_task_timeout_s);
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
        let started = self.deps.tasks.start_task(new, move |task_id, stop| async move {
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
        let store = SubagentStore::new(&self.deps.env.session_dir);
        let dir = store.dir(&run.record.agent_id);
        let transcript = Transcript::new(vec![dir.join("output"), self.deps.tasks.output_path(&task_id)]);
        let _ = self
            .deps
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
        let recorder = Arc::new(WireRecorder::open(&dir.join("wire.jsonl")).await);
        let observer = {
            let transcript = transcript.clone();
            Arc::new(move |event: &kimi_wire::message::Event| transcript.event(event))
        };
        let events = EventSink::for_background(&self.deps.events, recorder, observer);
        let soul = self
            .build_soul(&run.kind, identity, events, run.model.clone(), &dir)
            .await;
        let _ = self
            .kit
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
                self.kit.hooks.trigger_detached(
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
                    .deps
                    .tasks
                    .get(&task_id)
                    .and_then(|view| view.control.kill_reason)
                    .filter(|reason| reason == kimi_core::background::SESSION_ENDED);
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
        args: &AgentArgs,
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
        if !self.kit.types.iter().any(|t| t.name == args.subagent_type) {
            return Err(unknown_type(&args.subagent_type));
        }
        store
            .create(&args.subagent_type, args.description.trim(), args.model.clone())
            .map(|record| (record, false))
            .map_err(|e| ToolReturnValue::error("", format!("Failed to run agent: {e}"), "Agent failed"))
    }

    async fn build_soul(
        &self,
        kind: &SubagentType,
        identity: SubagentIdentity,
        events: EventSink,
        (llm, model): ModelChoice,
        dir: &std::path::Path,
    ) -> Soul {
        let deps = ToolDeps {
            events: events.clone(),
            // A subagent may look at the session's background tasks but not start or stop them.
            tasks: self.deps.tasks.for_subagent(),
            ..self.deps.clone()
        };
        let toolset = Arc::new(Toolset::new());
        toolset.set_output_budget(
            kimi_core::toolset::OutputBudget::for_session(&self.deps.env.session_dir)
                .with_tool_names(crate::tool_names(&kind.tools)),
        );
        for name in kind.tool_names() {
            // Never `Agent`: subagents cannot start subagents.
            if crate::model_name(name) == NAME {
                continue;
            }
            match crate::build_tool(name, &deps) {
                Ok(Some(tool)) => toolset.register(tool),
                Ok(None) => {}
                Err(e) => tracing::warn!(tool = name, error = %e, "subagent tool not built"),
            }
        }
        let context = Context::open(&dir.join("context.jsonl"), kind.system_prompt.clone()).await;
        Soul::new(SoulParts {
            llm,
            model,
            settings: self.kit.settings,
            context,
            toolset,
            approvals: Arc::clone(&self.deps.approvals),
            events,
            hooks: Arc::clone(&self.kit.hooks),
            plan: Arc::clone(&self.deps.plan),
            subagent: Some(identity),
            mcp: None,
            skills: None,
            session: None,
            notifications: None,
            reminders: kimi_core::reminders::Reminders::none(),
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

/// A background agent's readable transcript, appended to every one of its files (the reference's
/// layout: `[stage] …`, the model's text, `[tool] Name`, `[tool_result] success|error[: brief]`,
/// `[summary]`). Best effort: a file that cannot be opened is left out, a failed write never stops the
/// agent. The files are opened once: the observer calls `event` for every streamed part.
#[derive(Clone)]
struct Transcript {
    files: Arc<std::sync::Mutex<Vec<std::fs::File>>>,
}

impl Transcript {
    fn new(paths: Vec<std::path::PathBuf>) -> Self {
        let files = paths
            .iter()
            .filter_map(|path| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .inspect_err(|e| {
                        tracing::debug!(path = %path.display(), error = %e, "agent transcript not opened");
                    })
                    .ok()
            })
            .collect();
        Self {
            files: Arc::new(std::sync::Mutex::new(files)),
        }
    }

    fn stage(&self, name: &str) {
        self.append(&format!("[stage] {name}\n"));
    }

    fn error(&self, message: &str) {
        self.append(&format!("[error] {message}\n"));
    }

    fn summary(&self, report: &str) {
        if !report.is_empty() {
            self.append(&format!("\n[summary]\n{report}\n"));
        }
    }

    fn event(&self, event: &kimi_wire::message::Event) {
        use kimi_wire::message::{ContentPart, Event};
        match event {
            Event::ContentPart(ContentPart::Text(part)) if !part.text.is_empty() => self.append(&part.text),
            Event::ToolCall(call) => self.append(&format!("[tool] {}\n", call.function.name)),
            Event::ToolResult(result) => {
                let value = &result.return_value;
                let status = if value.is_error { "error" } else { "success" };
                match value.brief() {
                    "" => self.append(&format!("[tool_result] {status}\n")),
                    brief => self.append(&format!("[tool_result] {status}: {brief}\n")),
                }
            }
            _ => {}
        }
    }

    fn append(&self, text: &str) {
        use std::io::Write;
        let mut files = kimi_core::sync::lock(&self.files);
        for file in files.iter_mut() {
            if let Err(e) = file.write_all(text.as_bytes()) {
                tracing::debug!(error = %e, "agent transcript not written");
            }
        }
    }
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

enum RunFailure {
    Cancelled,
    Failed { message: String, brief: String },
}

/// Runs the task, then asks once more if the report is too short (reference behaviour).
async fn run_with_report(
    soul: &Soul,
    prompt: &str,
    cancel: &CancellationToken,
) -> Result<String, RunFailure> {
    let mut report = run_once(soul, prompt, cancel, "running agent").await?;
    if report.chars().count() < SUMMARY_MIN_CHARS {
        report = run_once(soul, MORE_DETAIL_PROMPT, cancel, "continuing the agent summary").await?;
    }
    Ok(report)
}

async fn run_once(
    soul: &Soul,
    prompt: &str,
    cancel: &CancellationToken,
    phase: &str,
) -> Result<String, RunFailure> {
    let failed = |message: String, brief: &str| RunFailure::Failed {
        message,
        brief: brief.to_owned(),
    };
    match soul
        .run_turn(UserInput::Text(prompt.to_owned()), cancel.child_token())
        .await
    {
        Ok(TurnOutcome::Finished) => {}
        Ok(TurnOutcome::Cancelled) => return Err(RunFailure::Cancelled),
        Ok(TurnOutcome::MaxStepsReached(n)) => {
            return Err(failed(
                format!(
                    "Max steps {n} reached when {phase}. Please try splitting the task into smaller subtasks."
                ),
                "Max steps reached",
            ));
        }
        Err(TurnError::Provider(e)) => {
            return Err(match e.status_code() {
                Some(code) => failed(
                    format!("LLM API error (HTTP {code}) when {phase}: {e}"),
                    &format!("API error ({code})"),
                ),
                None => failed(
                    format!("LLM provider error when {phase}: {e}"),
                    "LLM provider error",
                ),
            });
        }
        Err(e) => {
            return Err(failed(
                format!("Unexpected error when {phase}: {e}"),
                "Agent run error",
            ));
        }
    }
    soul.last_assistant_text().await.ok_or_else(|| {
        failed(
            "The agent did not produce a valid assistant response.".to_owned(),
            "Invalid agent result",
        )
    })
}

/// The reference's message: its registry raises `KeyError`, whose text Python prints quoted.
fn unknown_type(name: &str) -> ToolReturnValue {
    ToolReturnValue::error(
        "",
        format!("Failed to run agent: 'Builtin subagent type not found: {name}'"),
        "Agent failed",
    )
}

impl kimi_core::toolset::Tool for AgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: AgentArgs = parse_args(args)?;
            if let Some(timeout) = args.timeout {
                if timeout < 30 {
                    return Err(args::below_minimum("timeout", 30));
                }
                if timeout > 3600 {
                    return Err(args::above_maximum("timeout", 3600));
                }
            }
            // A subagent approves and orders its own calls; it starts once the answer is complete.
            Ok(Plan::interactive(Box::pin(
                async move { self.run(args, ctx).await },
            )))
        })
    }
}
