//! The agent loop: a turn is a sequence of steps; a step is one model call plus the tool calls it asked
//! for. See [`Soul::run_turn`].

mod command;
pub(crate) mod compaction;
mod message;
mod notify;
mod ralph;
mod remind;
mod retry;
mod step;
mod turn;
mod walk;

use std::collections::{BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::AtomicU32;
use std::sync::{Arc, Mutex};

use kimi_llm::{ChatError, ChatProvider};
use kimi_wire::message::UserInput;

use crate::approval::ApprovalRuntime;
use crate::context::Context;
use crate::events::{EventSink, SubagentIdentity};
use crate::hooks::HookEngine;
use crate::mcp::McpManager;
use crate::notifications::NotificationQueue;
use crate::plan::PlanMode;
use crate::recorder::WriteError;
use crate::reminders::Reminders;
use crate::skills::Skills;
use crate::sync::lock;
use crate::toolset::{DedupTracker, Toolset};

pub(crate) use command::CommandContext;
pub use message::system;
pub use ralph::RalphLoop;
pub use retry::RetryBackoff;

/// Loop limits (config `loop_control`, overridable by flags).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoopSettings {
    /// Steps per turn before `max_steps_reached`.
    pub max_steps_per_turn: u32,
    /// Attempts per step (the first one included) on retryable provider errors.
    pub max_retries_per_step: u32,
    /// Tokens kept free for the answer; compaction starts before they run out.
    pub reserved_context_size: u64,
    /// Fraction of the context that starts compaction.
    pub compaction_trigger_ratio: f64,
    /// How long to wait between attempts.
    pub retry_backoff: RetryBackoff,
    /// Whether a prompt is fed again until the model says it is done.
    pub ralph: RalphLoop,
}

impl Default for LoopSettings {
    fn default() -> Self {
        Self {
            max_steps_per_turn: 1000,
            max_retries_per_step: 3,
            reserved_context_size: 50_000,
            compaction_trigger_ratio: 0.85,
            retry_backoff: RetryBackoff::default(),
            ralph: RalphLoop::Off,
        }
    }
}

/// What the loop needs to know about the model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// The provider's model name (used in capability errors).
    pub name: String,
    /// Context window in tokens.
    pub max_context_size: u64,
    /// `image_in`, `video_in`, `thinking`, ...
    pub capabilities: BTreeSet<String>,
}

/// How a turn ended when it did not fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnOutcome {
    /// The model stopped asking for tools (or a rejection / repeat guard stopped it).
    Finished,
    /// The step limit was hit; carries the limit.
    MaxStepsReached(u32),
    /// The client cancelled.
    Cancelled,
}

/// Why a turn failed; each maps to one JSON-RPC error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TurnError {
    /// No model configured (-32001).
    #[error("LLM is not set")]
    LlmNotSet,
    /// The input needs capabilities the model lacks (-32002).
    #[error(
        "LLM model '{model}' does not support required {}: {}.",
        if missing.len() == 1 { "capability" } else { "capabilities" },
        missing.join(", ")
    )]
    LlmNotSupported {
        /// The model's name.
        model: String,
        /// The capabilities it lacks, sorted.
        missing: Vec<String>,
    },
    /// The provider failed after retries (-32003).
    #[error(transparent)]
    Provider(#[from] ChatError),
    /// A session file (`context.jsonl`, `wire.jsonl`) could not be written (-32603): the turn stops,
    /// since what it did could not be resumed. Not retried.
    #[error("SessionFileError: {0}")]
    SessionFile(#[from] WriteError),
}

/// One session's agent: model, context, tools and the state a turn reads.
#[derive(Debug)]
pub struct Soul {
    pub(crate) llm: Option<Arc<dyn ChatProvider>>,
    pub(crate) model: ModelInfo,
    pub(crate) settings: LoopSettings,
    pub(crate) context: tokio::sync::Mutex<Context>,
    pub(crate) toolset: Arc<Toolset>,
    pub(crate) approvals: Arc<ApprovalRuntime>,
    pub(crate) events: EventSink,
    pub(crate) hooks: Arc<HookEngine>,
    steers: Mutex<VecDeque<UserInput>>,
    plan: Arc<PlanMode>,
    /// Set when this soul is a subagent: its approval requests name it.
    subagent: Option<SubagentIdentity>,
    /// Repeat detection across the steps of a turn (no await while held).
    pub(crate) dedup: Mutex<DedupTracker>,
    /// The session's MCP servers; the first turn waits for their loading.
    mcp: Option<Arc<McpManager>>,
    /// The session's notifications, delivered by the root agent only.
    notifications: Option<Arc<NotificationQueue>>,
    /// The session's skills (slash commands, nesting of the `Skill` tool).
    skills: Option<Arc<Skills>>,
    /// Session facts slash commands need (the root agent's).
    session: Option<SessionInfo>,
    /// The workspace its tools see, and how its commands are confined (every soul's, for the sandbox
    /// reminder).
    workspace: Arc<crate::state::Environment>,
    /// Nested turns (flow nodes, `/init`) begun and not yet ended; a cancelled turn closes them.
    pub(crate) open_nested_turns: AtomicU32,
    /// The reminders this soul owes its model (a subagent: only the sandbox's).
    reminders: Mutex<Reminders>,
    /// Ids of the calls the client saw (`ToolCall`) without their `ToolResult` yet, so a cancel or a
    /// failed attempt can answer each (no await while held).
    pub(crate) open_calls: Mutex<Vec<String>>,
}

/// What slash commands need to know about the session besides the conversation.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// The work dir.
    pub work_dir: PathBuf,
    /// The share dir (other sessions live under it).
    pub share_dir: PathBuf,
    /// The workspace the tools see (`/add-dir` adds to it).
    pub env: Arc<crate::state::Environment>,
}

/// Everything a [`Soul`] is made from: given whole when it is made (by `assemble::soul`, or as the
/// scratch copy of an existing soul), so nothing is attached afterwards.
#[derive(Debug)]
pub(crate) struct SoulParts {
    /// The provider, `None` when no model is configured.
    pub llm: Option<Arc<dyn ChatProvider>>,
    /// Model facts.
    pub model: ModelInfo,
    /// Loop limits.
    pub settings: LoopSettings,
    /// The (restored or new) context.
    pub context: Context,
    /// Registered tools.
    pub toolset: Arc<Toolset>,
    /// Approval runtime.
    pub approvals: Arc<ApprovalRuntime>,
    /// Event output.
    pub events: EventSink,
    /// Hook engine.
    pub hooks: Arc<HookEngine>,
    /// Plan mode, shared with the plan tools.
    pub plan: Arc<PlanMode>,
    /// Who this soul is when it runs as a subagent.
    pub subagent: Option<SubagentIdentity>,
    /// The session's MCP servers (the root agent's, shared by its scratch souls).
    pub mcp: Option<Arc<McpManager>>,
    /// The session's skills.
    pub skills: Option<Arc<Skills>>,
    /// Session facts slash commands need (the root agent's).
    pub session: Option<SessionInfo>,
    /// The workspace its tools see.
    pub workspace: Arc<crate::state::Environment>,
    /// The session's notifications, delivered to the model and client (the root agent's).
    pub notifications: Option<Arc<NotificationQueue>>,
    /// The reminders this soul owes its model ([`Reminders::for_subagent`] for subagents,
    /// [`Reminders::none`] for scratch souls).
    pub reminders: Reminders,
}

impl Soul {
    /// Makes a soul of `parts`; the only constructor.
    pub(crate) fn new(parts: SoulParts) -> Self {
        Self {
            llm: parts.llm,
            model: parts.model,
            settings: parts.settings,
            context: tokio::sync::Mutex::new(parts.context),
            toolset: parts.toolset,
            approvals: parts.approvals,
            events: parts.events,
            hooks: parts.hooks,
            steers: Mutex::new(VecDeque::new()),
            plan: parts.plan,
            subagent: parts.subagent,
            dedup: Mutex::new(DedupTracker::new()),
            mcp: parts.mcp,
            skills: parts.skills,
            session: parts.session,
            workspace: parts.workspace,
            open_nested_turns: AtomicU32::new(0),
            open_calls: Mutex::new(Vec::new()),
            reminders: Mutex::new(parts.reminders),
            notifications: parts.notifications,
        }
    }

    /// A soul sharing this one's model, tools, approvals, hooks, events, plan mode, skills and MCP
    /// servers, with an empty context that is not written anywhere (`/init` works in one); the only
    /// constructor call besides `assemble::soul`.
    pub(crate) async fn scratch(&self) -> Soul {
        let system_prompt = self.context.lock().await.system_prompt().to_owned();
        Soul::new(SoulParts {
            llm: self.llm.clone(),
            model: self.model.clone(),
            settings: self.settings,
            context: Context::in_memory(system_prompt),
            toolset: Arc::clone(&self.toolset),
            approvals: Arc::clone(&self.approvals),
            events: self.events.clone(),
            hooks: Arc::clone(&self.hooks),
            plan: Arc::clone(&self.plan),
            subagent: None,
            mcp: self.mcp.clone(),
            skills: self.skills.clone(),
            session: None,
            workspace: Arc::clone(&self.workspace),
            notifications: None,
            reminders: Reminders::none(),
        })
    }

    /// The session's skills, if it has any.
    pub fn skills(&self) -> Option<&Arc<Skills>> {
        self.skills.as_ref()
    }

    /// The session's MCP servers (the root agent's and its scratch souls').
    pub fn mcp(&self) -> Option<&Arc<McpManager>> {
        self.mcp.as_ref()
    }

    /// Queues input for the running turn; consumed after the current step.
    pub fn steer(&self, input: UserInput) {
        lock(&self.steers).push_back(input);
    }

    fn take_steers(&self) -> Vec<UserInput> {
        lock(&self.steers).drain(..).collect()
    }

    /// Is plan mode on?
    pub fn plan_mode(&self) -> bool {
        self.plan.is_on()
    }

    /// Sets plan mode.
    pub fn set_plan_mode(&self, enabled: bool) {
        self.plan.set(enabled);
    }

    /// The plan slug of the current plan session, if any.
    pub fn plan_slug(&self) -> Option<String> {
        self.plan.slug()
    }

    /// The approval runtime.
    pub fn approvals(&self) -> &Arc<ApprovalRuntime> {
        &self.approvals
    }

    /// The toolset.
    pub fn toolset(&self) -> &Arc<Toolset> {
        &self.toolset
    }

    /// The hook engine.
    pub fn hooks(&self) -> &Arc<HookEngine> {
        &self.hooks
    }

    /// The event sink.
    pub fn events(&self) -> &EventSink {
        &self.events
    }

    /// Waits until the session files (context.jsonl, wire.jsonl) have everything, on disk when
    /// `durable`; failures are logged. See [`Soul::persist`] for a caller that must know.
    pub async fn flush(&self, durable: bool) {
        if let Err(e) = self.persist(durable).await {
            tracing::error!(error = %e, "session files not written");
        }
    }

    /// Like [`Soul::flush`], but returns the first failure (a full disk, an unwritable session
    /// directory): a write error is remembered by each file's writer, so it surfaces here however long
    /// ago it happened. Both files are flushed either way.
    pub async fn persist(&self, durable: bool) -> Result<(), WriteError> {
        let context = self.context.lock().await.flush(durable).await;
        let wire = match self.events.recorder() {
            Some(recorder) if durable => recorder.sync().await,
            Some(recorder) => recorder.flush().await,
            None => Ok(()),
        };
        context.and(wire)
    }

    /// Reports a write failure of either session file that is already known, without writing: the
    /// check after each step. The stdout writer commits both files with every batch it sends, so a
    /// failed write surfaces here a step later at most; [`Soul::persist`] writes and reports at once.
    pub(crate) async fn check_files(&self) -> Result<(), WriteError> {
        let context = self.context.lock().await.check();
        let wire = self.events.recorder().map_or(Ok(()), |recorder| recorder.check());
        context.and(wire)
    }

    /// The text of the last message if the model wrote it (a subagent's answer to its parent), or
    /// `None` when the conversation does not end with the model.
    pub async fn last_assistant_text(&self) -> Option<String> {
        let context = self.context.lock().await;
        let last = context.messages().last()?;
        (last.role == kimi_llm::Role::Assistant).then(|| {
            last.content
                .iter()
                .filter_map(kimi_wire::message::ContentPart::as_text)
                .collect::<Vec<_>>()
                .join("\n")
        })
    }

    /// Has the session no conversation at all (reference `Session.is_empty`: no wire records and no
    /// messages in the context)?
    pub async fn is_empty(&self) -> bool {
        let recorded = self.events.recorder().is_some_and(|r| r.has_records());
        !recorded && self.context.lock().await.is_empty()
    }
}
