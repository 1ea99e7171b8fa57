//! What a tool is: a name, a description, a parameter schema, and a two-phase call.
//!
//! Phase one, [`Tool::plan`], validates the arguments and declares the call's [`Effect`] without doing
//! anything. Phase two is the returned future, which the toolset polls only after hooks and approval have
//! allowed it. Because approval is decided from the declared effect by the toolset, a tool cannot forget
//! to ask (the reference leaves that to each tool; seeds/000 section 7).
//!
//! Besides the effect, a plan says how the call may share time with the other calls of its step
//! ([`Access`]); the step scheduler (`schedule.rs`) orders the calls from it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::approval::{ApprovalAsk, Effect};

/// How a call may share time with the other calls of its step (seeds/003: reads together, changes one
/// at a time in the model's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Only reads: may start while the model is still answering and runs beside the other calls.
    Read,
    /// Reaches the user or the client, or changes the session's own state (a question, plan mode, a
    /// subagent, the todo list): starts only once the model's answer is complete, beside the other
    /// calls. A subagent orders and approves its own calls.
    Interact,
    /// May change the world (a write, a command, a client's tool): starts only once the model's answer
    /// is complete, after every earlier call of the step has finished, and every later call waits for it.
    Change,
}

/// Per-call facts a tool may need besides its own dependencies.
#[derive(Debug, Clone)]
pub struct CallContext {
    /// The model's id for this call.
    pub tool_call_id: String,
    /// The arguments exactly as the model sent them (external tools forward them unchanged).
    pub raw_arguments: Option<String>,
    /// Fires when the turn is cancelled; long-running tools should stop promptly.
    pub cancel: CancellationToken,
    /// Set by a tool whose question the user turned down (a rejected plan): the turn then stops after
    /// this step, as it does when the user rejects an approval.
    pub user_rejection: UserRejection,
    /// Whether plan mode is on for this call (tools that change things outside files may refuse).
    pub plan_mode: bool,
}

impl CallContext {
    /// The context of call `tool_call_id`.
    pub fn new(
        tool_call_id: impl Into<String>,
        raw_arguments: Option<String>,
        cancel: CancellationToken,
    ) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            raw_arguments,
            cancel,
            user_rejection: UserRejection::default(),
            plan_mode: false,
        }
    }
}

/// A tool's report that the user said no (the reference's `ToolRejectedError` result).
#[derive(Debug, Clone, Default)]
pub struct UserRejection(Arc<AtomicBool>);

impl UserRejection {
    /// Records the rejection.
    pub fn record(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Was a rejection recorded?
    pub fn is_recorded(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A validated call, ready to run once allowed.
pub struct Plan {
    /// What the call would do, and so whether it needs approval.
    pub effect: Effect,
    /// How it may share time with the step's other calls.
    pub access: Access,
    /// The work itself; not started until polled.
    pub run: BoxFuture<'static, ToolReturnValue>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Plan")
            .field("effect", &self.effect)
            .field("access", &self.access)
            .finish_non_exhaustive()
    }
}

impl Plan {
    /// A read-only plan ([`Access::Read`]).
    pub fn read_only(run: BoxFuture<'static, ToolReturnValue>) -> Self {
        Self {
            effect: Effect::ReadOnly,
            access: Access::Read,
            run,
        }
    }

    /// A plan that talks to the user or the client, or changes session state, without needing
    /// approval ([`Access::Interact`]).
    pub fn interactive(run: BoxFuture<'static, ToolReturnValue>) -> Self {
        Self {
            effect: Effect::ReadOnly,
            access: Access::Interact,
            run,
        }
    }

    /// A plan that needs approval first and may change the world ([`Access::Change`]).
    pub fn side_effect(ask: ApprovalAsk, run: BoxFuture<'static, ToolReturnValue>) -> Self {
        Self {
            effect: Effect::SideEffect(ask),
            access: Access::Change,
            run,
        }
    }

    /// The same plan with another [`Access`] (a client's tool changes things without our approval; an
    /// MCP tool marked read-only is approved but runs beside other reads).
    #[must_use]
    pub fn with_access(mut self, access: Access) -> Self {
        self.access = access;
        self
    }
}

/// A tool the model can call.
pub trait Tool: Send + Sync + std::fmt::Debug {
    /// Name, description and (sanitized, inlined) parameter schema, as the model sees them.
    fn spec(&self) -> &ToolSpec;

    /// Validates `args` and returns the plan, or the tool result to give the model instead (bad args).
    fn plan(
        self: Arc<Self>,
        args: Value,
        ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>>;

    /// Whether this tool comes from the wire client (external tools may be replaced by a re-`initialize`).
    fn is_external(&self) -> bool {
        false
    }
}

/// Parses arguments into a tool's typed struct, with the reference's error text on failure.
pub fn parse_args<T: DeserializeOwned>(args: Value) -> Result<T, ToolReturnValue> {
    serde_json::from_value(args).map_err(|e| {
        ToolReturnValue::error(
            "",
            format!("Error validating JSON arguments: {e}"),
            "Invalid arguments",
        )
    })
}

/// The parameter schema of a typed args struct as the model should see it: draft 2020-12, every
/// sub-schema inlined (Moonshot rejects `$ref`), no `$schema`/`title` noise.
pub fn schema_for<T: schemars::JsonSchema>() -> Value {
    let generator = schemars::generate::SchemaSettings::draft2020_12()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    if let Value::Object(map) = &mut schema {
        map.remove("title");
    }
    schema
}
