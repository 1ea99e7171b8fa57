//! The toolset: the registry of tools and the pipeline every call goes through.
//!
//! A call goes: find the tool → parse the arguments → de-duplicate → PreToolUse hooks → plan (validate,
//! declare the effect) → approval for side effects → run → PostToolUse hooks → output budget → result.
//! Every call of a step starts as soon as the model finishes streaming it; read-only calls run
//! concurrently, side-effecting calls run one at a time in the order they were approved.
//!
//! A result has two faces ([`CallResult`]): the client's `ToolResult` shows the whole output, the model's
//! context gets it through the [`OutputBudget`] (head and tail, the whole saved in the session folder).

mod budget;
mod dedup;
mod external;
mod tool;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use futures::future::BoxFuture;
use kimi_llm::ToolSpec;
use kimi_wire::message::{ToolCall, ToolReturnValue};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalRuntime, ApprovalSource, Verdict};
use crate::config::HookEvent;
use crate::hooks::{HookDecision, HookEngine, input as hook_input};
pub use budget::{MODEL_OUTPUT_MAX_CHARS, OutputBudget, TOOL_OUTPUTS_DIR};
use dedup::Verdict as DedupVerdict;
pub use dedup::{
    CallKey, DedupTracker, FORCE_STOP_AT, REMINDER_FIRM_AT, REMINDER_GENTLE_AT, REMINDER_STOP_AT, Reminder,
    ReminderLevel, StepVerdict, append_reminder,
};
pub use external::{ExternalTool, SchemaError};
pub use tool::{ApprovalAsk, CallContext, Effect, Plan, Tool, UserRejection, parse_args, schema_for};

/// The message the model gets when the user rejects a call without saying why (reference text).
pub const REJECTED_MESSAGE: &str = "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.";

/// The registered tools, in the order the model sees them.
#[derive(Debug, Default)]
pub struct Toolset {
    tools: RwLock<Vec<Arc<dyn Tool>>>,
    hidden: RwLock<BTreeSet<String>>,
    budget: RwLock<Arc<OutputBudget>>,
}

impl Toolset {
    /// An empty toolset.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds `tool`, replacing a tool of the same name.
    pub fn register(&self, tool: Arc<dyn Tool>) {
        let mut tools = write(&self.tools);
        let name = tool.spec().name.clone();
        match tools.iter_mut().find(|t| t.spec().name == name) {
            Some(slot) => *slot = tool,
            None => tools.push(tool),
        }
    }

    /// Removes the tool called `name`, if any.
    pub fn remove(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let mut tools = write(&self.tools);
        let index = tools.iter().position(|t| t.spec().name == name)?;
        Some(tools.remove(index))
    }

    /// The tool called `name`.
    pub fn find(&self, name: &str) -> Option<Arc<dyn Tool>> {
        read(&self.tools).iter().find(|t| t.spec().name == name).cloned()
    }

    /// Hides or shows a tool in the list sent to the model; a hidden tool can still be called.
    pub fn set_hidden(&self, name: &str, hidden: bool) {
        let mut set = write(&self.hidden);
        if hidden {
            set.insert(name.to_owned());
        } else {
            set.remove(name);
        }
    }

    /// The specs of the visible tools, for the model request.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let hidden = read(&self.hidden);
        read(&self.tools)
            .iter()
            .filter(|t| !hidden.contains(&t.spec().name))
            .map(|t| t.spec().clone())
            .collect()
    }

    /// Sets the output budget, e.g. [`OutputBudget::for_session`] once the session folder is known.
    pub fn set_output_budget(&self, budget: OutputBudget) {
        *write(&self.budget) = Arc::new(budget);
    }

    /// The output budget results go through (the default saves nothing).
    pub fn output_budget(&self) -> Arc<OutputBudget> {
        Arc::clone(&read(&self.budget))
    }

    /// Names of every registered tool.
    pub fn names(&self) -> Vec<String> {
        read(&self.tools).iter().map(|t| t.spec().name.clone()).collect()
    }
}

/// What one call produced.
#[derive(Debug, Clone)]
pub struct CallResult {
    /// The model's id for the call.
    pub tool_call_id: String,
    /// What the client sees (`ToolResult`, wire.jsonl): the whole output.
    pub value: ToolReturnValue,
    /// What the model sees (the tool message in the context): `value` within the output budget.
    pub model_value: ToolReturnValue,
    /// The user rejected the call and gave no feedback: the root turn stops after this step.
    pub rejected_without_feedback: bool,
}

impl CallResult {
    /// A result the model and the client see the same way (errors found before running, short output).
    pub fn same(tool_call_id: String, value: ToolReturnValue, rejected_without_feedback: bool) -> Self {
        Self {
            tool_call_id,
            model_value: value.clone(),
            value,
            rejected_without_feedback,
        }
    }
}

/// Results of a step's calls by tool call id, published when each finishes.
pub type InFlight = Arc<Mutex<HashMap<String, watch::Receiver<Option<CallResult>>>>>;

/// Everything a call needs besides the tool itself.
#[derive(Clone, Debug)]
pub struct Dispatch {
    /// Registry.
    pub toolset: Arc<Toolset>,
    /// Approval runtime.
    pub approvals: Arc<ApprovalRuntime>,
    /// Who asks.
    pub source: ApprovalSource,
    /// Serializes side-effecting runs within a step.
    pub exclusive: Arc<tokio::sync::Mutex<()>>,
    /// The turn's cancellation.
    pub cancel: CancellationToken,
    /// Results of this step's calls, for identical calls that join them.
    pub in_flight: InFlight,
    /// Hook engine (PreToolUse may block a call; PostToolUse observes it).
    pub hooks: Arc<HookEngine>,
    /// In plan mode, the only file a call may write (approved without asking).
    pub plan_file: Option<std::path::PathBuf>,
}

impl Dispatch {
    /// A dispatcher for one step.
    pub fn for_step(
        toolset: Arc<Toolset>,
        approvals: Arc<ApprovalRuntime>,
        hooks: Arc<HookEngine>,
        source: ApprovalSource,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            toolset,
            approvals,
            source,
            exclusive: Arc::new(tokio::sync::Mutex::new(())),
            cancel,
            in_flight: Arc::new(Mutex::new(HashMap::new())),
            hooks,
            plan_file: None,
        }
    }

    /// Restricts writes to `plan_file` (plan mode), or lifts the restriction (`None`).
    #[must_use]
    pub fn with_plan_file(mut self, plan_file: Option<std::path::PathBuf>) -> Self {
        self.plan_file = plan_file;
        self
    }

    /// Plan mode: a write anywhere but the plan file is refused; a write to the plan file needs no
    /// approval (its directory is created). `None` means "ask as usual".
    async fn plan_mode_verdict(&self, ask: &ApprovalAsk) -> Option<Result<(), ToolReturnValue>> {
        let plan = self.plan_file.as_ref()?;
        if ask.writes.is_empty() {
            return None;
        }
        if ask.writes.iter().any(|w| w != plan) {
            let message = format!(
                "Plan mode is active. You may only edit the current plan file: `{}`.",
                plan.display()
            );
            return Some(Err(ToolReturnValue::error("", message, "Plan mode restriction")));
        }
        if let Some(dir) = plan.parent() {
            let _ = tokio::fs::create_dir_all(dir).await;
        }
        Some(Ok(()))
    }

    /// Starts `call`: resolves the tool and arguments and consults `dedup` now (in call order), and
    /// returns the rest of the pipeline as a future.
    pub fn start(&self, call: ToolCall, dedup: &mut DedupTracker) -> BoxFuture<'static, CallResult> {
        let tool_call_id = call.id.clone();
        let name = call.function.name.clone();
        let Some(tool) = self.toolset.find(&name) else {
            let message = format!("Tool `{name}` not found");
            return Box::pin(std::future::ready(CallResult::same(
                tool_call_id,
                ToolReturnValue::error("", message.clone(), message),
                false,
            )));
        };
        let args = match parse_arguments(call.function.arguments.as_deref()) {
            Ok(args) => args,
            Err(e) => {
                let message = format!("Error parsing JSON arguments: {e}");
                let value = ToolReturnValue::error("", message, "Invalid arguments");
                return Box::pin(std::future::ready(CallResult::same(tool_call_id, value, false)));
            }
        };
        match dedup.observe(&CallKey::new(&name, &args), &call.id) {
            DedupVerdict::JoinInFlight { first_tool_call_id } => {
                let receiver = lock(&self.in_flight).get(&first_tool_call_id).cloned();
                Box::pin(async move {
                    let joined = match receiver {
                        Some(mut rx) => rx.wait_for(Option::is_some).await.ok().and_then(|v| v.clone()),
                        None => None,
                    };
                    match joined {
                        Some(first) => CallResult {
                            tool_call_id,
                            ..first
                        },
                        None => CallResult::same(
                            tool_call_id,
                            ToolReturnValue::error(
                                "",
                                "The identical call this one joined did not finish.",
                                "Not run",
                            ),
                            false,
                        ),
                    }
                })
            }
            DedupVerdict::Run { reminder } => {
                let (tx, rx) = watch::channel(None);
                lock(&self.in_flight).insert(call.id.clone(), rx);
                let dispatch = self.clone();
                let budget = self.toolset.output_budget();
                Box::pin(async move {
                    let (mut value, rejected) = dispatch.run_pipeline(tool, &name, &call, args).await;
                    let mut model_value = match budget.apply(&call.id, &value).await {
                        Some(cut) => cut,
                        None => value.clone(),
                    };
                    // After the budget, so a long output cannot cut the reminder away.
                    if let Some(reminder) = &reminder {
                        append_reminder(&mut value, reminder);
                        append_reminder(&mut model_value, reminder);
                    }
                    let result = CallResult {
                        tool_call_id,
                        value,
                        model_value,
                        rejected_without_feedback: rejected,
                    };
                    let _ = tx.send(Some(result.clone()));
                    result
                })
            }
        }
    }

    /// Plan → approval → run, for a call whose tool and arguments are known.
    async fn run_pipeline(
        &self,
        tool: Arc<dyn Tool>,
        name: &str,
        call: &ToolCall,
        args: Value,
    ) -> (ToolReturnValue, bool) {
        // The hook inputs copy the arguments and the output: built only when some hook could use them.
        if self.hooks.has_hooks_for(HookEvent::PreToolUse) {
            let pre = hook_input::pre_tool_use(name, args.clone(), &call.id);
            if let HookDecision::Block { reason, .. } =
                self.hooks.trigger(HookEvent::PreToolUse, name, pre).await
            {
                let message = if reason.is_empty() {
                    "Blocked by PreToolUse hook".to_owned()
                } else {
                    reason
                };
                return (ToolReturnValue::error("", message, "Hook blocked"), false);
            }
        }
        let hook_args = self
            .hooks
            .has_hooks_for(HookEvent::PostToolUse)
            .then(|| args.clone());
        let mut ctx = CallContext::new(&call.id, call.function.arguments.clone(), self.cancel.clone());
        ctx.plan_mode = self.plan_file.is_some();
        let user_rejection = ctx.user_rejection.clone();
        let plan = match tool.plan(args, ctx).await {
            Ok(plan) => plan,
            Err(value) => return (value, false),
        };
        let _exclusive = match &plan.effect {
            Effect::ReadOnly => None,
            Effect::SideEffect(ask) => {
                match self.plan_mode_verdict(ask).await {
                    Some(Err(refusal)) => return (refusal, false),
                    Some(Ok(())) => return (plan.run.await, user_rejection.is_recorded()),
                    None => {}
                }
                match self.approvals.request(&self.source, &call.id, name, ask).await {
                    Verdict::Approved => {}
                    Verdict::Rejected { feedback } => return rejection(feedback),
                }
                Some(self.exclusive.lock().await)
            }
        };
        let value = plan.run.await;
        if let Some(hook_args) = hook_args {
            let post = hook_input::post_tool_use(name, hook_args, &tool_output_text(&value), &call.id);
            self.hooks
                .trigger_detached(HookEvent::PostToolUse, name.to_owned(), post);
        }
        (value, user_rejection.is_recorded())
    }
}

fn rejection(feedback: Option<String>) -> (ToolReturnValue, bool) {
    match feedback {
        None => (
            ToolReturnValue::error("", REJECTED_MESSAGE, "Rejected by user"),
            true,
        ),
        Some(feedback) => (
            ToolReturnValue::error(
                "",
                format!("The tool call is rejected by the user. User feedback: {feedback}"),
                format!("Rejected: {feedback}"),
            ),
            false,
        ),
    }
}

/// Missing or empty arguments mean "no arguments", as the reference treats them.
fn parse_arguments(arguments: Option<&str>) -> Result<Value, serde_json::Error> {
    match arguments.map(str::trim) {
        None | Some("") => Ok(Value::Object(Default::default())),
        Some(text) => serde_json::from_str(text),
    }
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The text a PostToolUse hook sees as `tool_output`.
fn tool_output_text(value: &ToolReturnValue) -> String {
    match &value.output {
        kimi_wire::message::ToolOutput::Text(text) => text.clone(),
        kimi_wire::message::ToolOutput::Parts(parts) => parts
            .iter()
            .filter_map(kimi_wire::message::ContentPart::as_text)
            .collect::<Vec<_>>()
            .join(""),
    }
}
