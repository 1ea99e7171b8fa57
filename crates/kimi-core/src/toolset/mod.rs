//! The toolset: the registry of tools and the pipeline every call goes through.
//!
//! A call goes: find the tool → parse the arguments → de-duplicate → PreToolUse hooks → plan (validate,
//! declare the effect) → approval for side effects → run → PostToolUse hooks → result. Every call of a step
//! starts as soon as the model finishes streaming it; read-only calls run concurrently, side-effecting
//! calls run one at a time in the order they were approved.

mod external;
mod tool;

use std::collections::BTreeSet;
use std::sync::{Arc, RwLock};

use kimi_llm::ToolSpec;
use kimi_wire::message::{ToolCall, ToolReturnValue};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalRuntime, ApprovalSource, Verdict};
pub use external::{ExternalTool, SchemaError};
pub use tool::{ApprovalAsk, CallContext, Effect, Plan, Tool, parse_args, schema_for};

/// The message the model gets when the user rejects a call without saying why (reference text).
pub const REJECTED_MESSAGE: &str = "The tool call is rejected by the user. Stop what you are doing and wait for the user to tell you how to proceed.";

/// The registered tools, in the order the model sees them.
#[derive(Debug, Default)]
pub struct Toolset {
    tools: RwLock<Vec<Arc<dyn Tool>>>,
    hidden: RwLock<BTreeSet<String>>,
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
    /// What the model and the client see.
    pub value: ToolReturnValue,
    /// The user rejected the call and gave no feedback: the root turn stops after this step.
    pub rejected_without_feedback: bool,
}

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
}

impl Dispatch {
    /// Runs one call through the whole pipeline.
    pub async fn call(&self, call: &ToolCall) -> CallResult {
        let tool_call_id = call.id.clone();
        let (value, rejected_without_feedback) = self.call_inner(call).await;
        CallResult {
            tool_call_id,
            value,
            rejected_without_feedback,
        }
    }

    async fn call_inner(&self, call: &ToolCall) -> (ToolReturnValue, bool) {
        let name = &call.function.name;
        let Some(tool) = self.toolset.find(name) else {
            let message = format!("Tool `{name}` not found");
            return (ToolReturnValue::error("", message.clone(), message), false);
        };
        let args = match parse_arguments(call.function.arguments.as_deref()) {
            Ok(args) => args,
            Err(e) => {
                let message = format!("Error parsing JSON arguments: {e}");
                return (ToolReturnValue::error("", message, "Invalid arguments"), false);
            }
        };
        let ctx = CallContext {
            tool_call_id: call.id.clone(),
            raw_arguments: call.function.arguments.clone(),
            cancel: self.cancel.clone(),
        };
        let plan = match tool.plan(args, ctx).await {
            Ok(plan) => plan,
            Err(value) => return (value, false),
        };
        let _exclusive = match &plan.effect {
            Effect::ReadOnly => None,
            Effect::SideEffect(ask) => {
                match self.approvals.request(&self.source, &call.id, name, ask).await {
                    Verdict::Approved => {}
                    Verdict::Rejected { feedback } => return rejection(feedback),
                }
                Some(self.exclusive.lock().await)
            }
        };
        (plan.run.await, false)
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
