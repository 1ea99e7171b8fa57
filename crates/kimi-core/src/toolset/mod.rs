//! The toolset: the registry of tools and the pipeline every call goes through.
//!
//! A call goes: find the tool → parse the arguments → de-duplicate → plan (validate, declare the effect
//! and the access) → PreToolUse hooks → approval for side effects → wait for its turn → run →
//! PostToolUse (or PostToolUseFailure) hooks → output budget → result.
//!
//! The calls of a step are ordered by the step scheduler (`schedule.rs`, seeds/003): consecutive reads
//! run together, a call that may change something runs alone in the model's order, and nothing but a
//! plain read starts (or is put to the user) before the model's answer is complete.
//!
//! A result has two faces ([`CallResult`]): the client's `ToolResult` shows the whole output, the model's
//! context gets it through the [`OutputBudget`] (head and tail, the whole saved in the session folder).

mod budget;
mod dedup;
mod external;
mod schedule;
mod tool;

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use futures::future::BoxFuture;
use kimi_llm::ToolSpec;
use kimi_wire::message::{ToolCall, ToolReturnValue};
use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use crate::approval::{ApprovalAsk, Effect};
use crate::approval::{ApprovalRuntime, ApprovalSource, Verdict};
use crate::config::HookEvent;
use crate::hooks::{HookDecision, HookEngine, input as hook_input};
use crate::plan::PlanMode;
use crate::sync::{lock, read, write};
pub use budget::OutputBudget;
use dedup::Verdict as DedupVerdict;
pub use dedup::{CallKey, DedupTracker, StepVerdict, append_reminder};
pub use external::ExternalTool;
use schedule::{Lane, Schedule, SlotGuard};
pub use tool::{Access, CallContext, Plan, Tool, UserRejection, parse_args, schema_for};

/// The message the model gets when the user rejects a call without saying why (reference text).
pub const REJECTED_MESSAGE: &str = "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.";

/// What a subagent is told when the user rejects one of its calls without saying why: find another
/// way or report the limit, but do not retry nor work around it (our words for the reference's intent).
pub const SUBAGENT_REJECTED_MESSAGE: &str = "The user rejected this tool call. Reach the goal another way \
    if there is one; if there is none, say in your report what you could not do and why. Do not send the \
    same call again, and do not try to get around the refusal by other means.";

/// The registered tools, in the order the model sees them.
#[derive(Debug, Default)]
pub struct Toolset {
    tools: RwLock<Vec<Arc<dyn Tool>>>,
    hidden: RwLock<BTreeSet<String>>,
    budget: RwLock<Arc<OutputBudget>>,
    /// The visible specs as last built, until a tool is registered, removed, hidden or shown: every
    /// step hands them to the model, and cloning each tool's JSON schema per step was a third of a
    /// step's instructions (docs/benchmarks.md, issue 20).
    specs: RwLock<Option<Arc<[ToolSpec]>>>,
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
        *write(&self.specs) = None;
    }

    /// Removes the tool called `name`, if any.
    pub fn remove(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let mut tools = write(&self.tools);
        let index = tools.iter().position(|t| t.spec().name == name)?;
        *write(&self.specs) = None;
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
        *write(&self.specs) = None;
    }

    /// The specs of the visible tools, for the model request.
    pub fn specs(&self) -> Arc<[ToolSpec]> {
        if let Some(specs) = read(&self.specs).as_ref() {
            return Arc::clone(specs);
        }
        // Built under the tools' lock, so a registration cannot slip between building and caching.
        let tools = read(&self.tools);
        let hidden = read(&self.hidden);
        let specs: Arc<[ToolSpec]> = tools
            .iter()
            .filter(|t| !hidden.contains(&t.spec().name))
            .map(|t| t.spec().clone())
            .collect();
        *write(&self.specs) = Some(Arc::clone(&specs));
        specs
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
type InFlight = Arc<Mutex<HashMap<String, watch::Receiver<Option<CallResult>>>>>;

/// Everything a step's calls need besides the tools themselves.
#[derive(Clone, Debug)]
pub struct Dispatch {
    /// Registry.
    pub toolset: Arc<Toolset>,
    /// Approval runtime.
    pub approvals: Arc<ApprovalRuntime>,
    /// Who asks.
    pub source: ApprovalSource,
    /// The turn's cancellation.
    pub cancel: CancellationToken,
    /// Hook engine (PreToolUse may block a call; PostToolUse / PostToolUseFailure observe it).
    pub hooks: Arc<HookEngine>,
    /// Plan mode, read when each call is judged: in plan mode the plan file is the only file a call
    /// may write (approved without asking). `None`: no plan mode (a bare dispatcher).
    pub plan: Option<Arc<PlanMode>>,
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
            cancel,
            hooks,
            plan: None,
        }
    }

    /// Restricts writes to the plan file whenever `plan` is on (read at each call's turn, so an
    /// EnterPlanMode or ExitPlanMode earlier in the step counts).
    #[must_use]
    pub fn with_plan_mode(mut self, plan: Arc<PlanMode>) -> Self {
        self.plan = Some(plan);
        self
    }

    /// Is plan mode on now?
    fn plan_mode_on(&self) -> bool {
        self.plan.as_ref().is_some_and(|p| p.is_on())
    }

    /// The calls of one attempt at the step: a fresh schedule, nothing in flight.
    pub fn attempt(&self) -> StepCalls {
        StepCalls {
            dispatch: self.clone(),
            schedule: Schedule::new(),
            in_flight: Arc::default(),
        }
    }

    /// Plan mode: a write anywhere but the plan file is refused; a write to the plan file needs no
    /// approval (its directory is created). `None` means "ask as usual".
    async fn plan_mode_verdict(&self, ask: &ApprovalAsk) -> Option<Result<(), ToolReturnValue>> {
        if ask.writes.is_empty() {
            return None;
        }
        let plan = self.plan.as_ref()?.active_file()?;
        if ask.writes.iter().any(|w| *w != plan) {
            let message = format!(
                "Plan mode is active. You may only edit the current plan file: `{}`.",
                plan.display()
            );
            return Some(Err(ToolReturnValue::error("", message, "Plan mode restriction")));
        }
        if let Some(dir) = plan.parent() {
            let _ = crate::private_files::create_dir_all(dir);
        }
        Some(Ok(()))
    }

    /// Whether `effect` may go ahead: plan mode's rule for writes, then the approval runtime. `Err`
    /// carries the result to give the model instead, and whether the user rejected without feedback.
    async fn allow(
        &self,
        call: &ToolCall,
        name: &str,
        effect: &Effect,
    ) -> Result<(), (ToolReturnValue, bool)> {
        let Some(ask) = effect.approval() else {
            return Ok(());
        };
        match self.plan_mode_verdict(ask).await {
            Some(Err(refusal)) => return Err((refusal, false)),
            Some(Ok(())) => return Ok(()),
            None => {}
        }
        match self.approvals.request(&self.source, &call.id, name, ask).await {
            Verdict::Approved => Ok(()),
            Verdict::Rejected { feedback } => Err(rejection(feedback, self.source.agent_id.is_some())),
        }
    }
}

/// The calls of one attempt at a step, scheduled together (see `schedule.rs`).
#[derive(Debug)]
pub struct StepCalls {
    dispatch: Dispatch,
    schedule: Schedule,
    in_flight: InFlight,
}

impl StepCalls {
    /// The model's answer is complete: calls that wait for it (anything but plain reads) may go on.
    pub fn answer_complete(&self) {
        self.schedule.complete_answer();
    }

    /// Starts `call`, the next one in the model's order: resolves the tool and arguments and consults
    /// `dedup` now (in call order), and returns the rest of the pipeline as a future, which waits for
    /// its turn in the step's schedule.
    pub fn start(&self, call: ToolCall, dedup: &mut DedupTracker) -> BoxFuture<'static, CallResult> {
        let slot = self.schedule.add();
        let tool_call_id = call.id.clone();
        let name = call.function.name.clone();
        let Some(tool) = self.dispatch.toolset.find(&name) else {
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
                // It runs nothing itself: a read, finished when the call it joins is.
                slot.classify(Lane::Shared { early: true });
                let receiver = lock(&self.in_flight).get(&first_tool_call_id).cloned();
                Box::pin(async move {
                    let joined = match receiver {
                        Some(mut rx) => rx.wait_for(Option::is_some).await.ok().and_then(|v| v.clone()),
                        None => None,
                    };
                    drop(slot);
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
                let dispatch = self.dispatch.clone();
                let budget = dispatch.toolset.output_budget();
                Box::pin(async move {
                    let (mut value, rejected) = dispatch.run_pipeline(&slot, tool, &name, &call, args).await;
                    // Whoever waits on this call (a later write, a join) may go on once its result is in.
                    drop(slot);
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
}

impl Dispatch {
    /// Plan → (the answer complete, unless a plain read) → PreToolUse → plan mode / approval → the
    /// call's turn → plan mode again → run → PostToolUse or PostToolUseFailure, for a call whose tool
    /// and arguments are known. Returns the result and whether the user rejected it without feedback.
    async fn run_pipeline(
        &self,
        slot: &SlotGuard,
        tool: Arc<dyn Tool>,
        name: &str,
        call: &ToolCall,
        args: Value,
    ) -> (ToolReturnValue, bool) {
        let mut ctx = CallContext::new(&call.id, call.function.arguments.clone(), self.cancel.clone());
        let user_rejection = ctx.user_rejection.clone();

        // Planning only validates and reads, so it happens at once, in the model's order.
        slot.planning_turn().await;
        ctx.plan_mode = self.plan_mode_on();
        let first = Arc::clone(&tool).plan(args.clone(), ctx.clone()).await;
        // A plan that failed after a call that may change things (a ReadFile of a file a Shell is
        // about to create) is only provisional: it is made again at its turn.
        let provisional = first.is_err() && slot.changes_before();
        // A PreToolUse hook runs a command or asks the client: like an approval, not before the
        // answer is complete, so a failed attempt leaves no hook run and no HookRequest open.
        let hooked = self.hooks.has_hooks_matching(HookEvent::PreToolUse, name);
        let lane = match &first {
            Ok(plan) => Lane::of(plan.access, plan.effect.approval().is_some() || hooked),
            Err(_) if provisional => Lane::Alone,
            Err(_) => Lane::Shared { early: !hooked },
        };
        slot.classify(lane);
        if lane != (Lane::Shared { early: true }) {
            slot.answer_complete().await;
        }

        // The hook inputs copy the arguments and the output: built only when some hook could use them.
        if hooked {
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
        let mut plan = match first {
            Ok(plan) => plan,
            Err(_) if provisional => {
                slot.start_turn().await;
                ctx.plan_mode = self.plan_mode_on();
                match Arc::clone(&tool).plan(args.clone(), ctx.clone()).await {
                    Ok(plan) => plan,
                    Err(value) => return self.after_run(name, args, &call.id, value, false),
                }
            }
            Err(value) => return self.after_run(name, args, &call.id, value, false),
        };
        // In plan mode a write is judged at its turn: an ExitPlanMode earlier in the step may end it.
        if ctx.plan_mode && writes(&plan) {
            slot.start_turn().await;
            plan = match self.plan_as_mode_stands(&tool, &args, &mut ctx, plan).await {
                Ok(plan) => plan,
                Err(value) => return self.after_run(name, args, &call.id, value, false),
            };
        }
        if let Err((value, rejected)) = self.allow(call, name, &plan.effect).await {
            return self.after_run(name, args, &call.id, value, rejected);
        }
        slot.start_turn().await;
        // Plan mode may have come on while the call waited (an EnterPlanMode earlier in the step).
        plan = match self.plan_as_mode_stands(&tool, &args, &mut ctx, plan).await {
            Ok(plan) => plan,
            Err(value) => return self.after_run(name, args, &call.id, value, false),
        };
        let value = plan.run.await;
        self.after_run(name, args, &call.id, value, user_rejection.is_recorded())
    }

    /// `plan`, or, when plan mode changed since it was made, the call planned again as plan mode now
    /// stands; a write plan mode now forbids is refused.
    async fn plan_as_mode_stands(
        &self,
        tool: &Arc<dyn Tool>,
        args: &Value,
        ctx: &mut CallContext,
        mut plan: Plan,
    ) -> Result<Plan, ToolReturnValue> {
        // Planning awaits, and plan mode may change meanwhile (the client's set_plan_mode): look again
        // until the plan was made under the mode that holds now, so a plan made for plan mode (its write
        // private and outside the sandbox's roots) never runs once plan mode is off, nor the reverse.
        loop {
            let on = self.plan_mode_on();
            if on == ctx.plan_mode {
                return Ok(plan);
            }
            ctx.plan_mode = on;
            plan = Arc::clone(tool).plan(args.clone(), ctx.clone()).await?;
            if let Some(ask) = plan.effect.approval()
                && let Some(Err(refusal)) = self.plan_mode_verdict(ask).await
            {
                return Err(refusal);
            }
        }
    }

    /// Fires PostToolUse for a result, PostToolUseFailure for an error, in the background.
    fn after_run(
        &self,
        name: &str,
        args: Value,
        tool_call_id: &str,
        value: ToolReturnValue,
        rejected: bool,
    ) -> (ToolReturnValue, bool) {
        let event = if value.is_error {
            HookEvent::PostToolUseFailure
        } else {
            HookEvent::PostToolUse
        };
        if self.hooks.has_hooks_for(event) {
            let input = if value.is_error {
                hook_input::post_tool_use_failure(name, args, &value.message, tool_call_id)
            } else {
                hook_input::post_tool_use(name, args, &tool_output_text(&value), tool_call_id)
            };
            self.hooks.trigger_detached(event, name.to_owned(), input);
        }
        (value, rejected)
    }
}

/// The result of a rejected call, and whether it stops the turn. A subagent is told to find another
/// way instead (reference: its turn goes on, seeds/000 section 4.3).
fn rejection(feedback: Option<String>, subagent: bool) -> (ToolReturnValue, bool) {
    match feedback {
        None if subagent => (
            ToolReturnValue::error("", SUBAGENT_REJECTED_MESSAGE, "Rejected by user"),
            false,
        ),
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

/// Whether `plan` writes files, so plan mode has a say in it.
fn writes(plan: &Plan) -> bool {
    plan.effect.approval().is_some_and(|ask| !ask.writes.is_empty())
}

/// Missing or empty arguments mean "no arguments", as the reference treats them.
fn parse_arguments(arguments: Option<&str>) -> Result<Value, serde_json::Error> {
    match arguments.map(str::trim) {
        None | Some("") => Ok(Value::Object(Default::default())),
        Some(text) => serde_json::from_str(text),
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[derive(Debug)]
    struct Named(ToolSpec);

    impl Tool for Named {
        fn spec(&self) -> &ToolSpec {
            &self.0
        }

        fn plan(
            self: Arc<Self>,
            _args: Value,
            _ctx: CallContext,
        ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
            Box::pin(async { Err(ToolReturnValue::error("unused", "unused", "")) })
        }
    }

    fn tool(name: &str, description: &str) -> Arc<dyn Tool> {
        Arc::new(Named(ToolSpec {
            name: name.to_owned(),
            description: description.to_owned(),
            parameters: json!({"type": "object"}),
        }))
    }

    fn names(toolset: &Toolset) -> Vec<String> {
        toolset
            .specs()
            .iter()
            .map(|s| format!("{}: {}", s.name, s.description))
            .collect()
    }

    #[test]
    fn the_cached_specs_follow_every_change_of_the_tools() {
        let toolset = Toolset::new();
        toolset.register(tool("A", "first"));
        toolset.register(tool("B", "second"));
        assert_eq!(names(&toolset), ["A: first", "B: second"]);
        assert!(
            Arc::ptr_eq(&toolset.specs(), &toolset.specs()),
            "built once, then shared"
        );
        toolset.set_hidden("A", true);
        assert_eq!(names(&toolset), ["B: second"]);
        toolset.set_hidden("A", false);
        toolset.register(tool("B", "replaced"));
        assert_eq!(names(&toolset), ["A: first", "B: replaced"]);
        toolset.remove("A");
        toolset.register(tool("C", "third"));
        assert_eq!(names(&toolset), ["B: replaced", "C: third"]);
    }
}
