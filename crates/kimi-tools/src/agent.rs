//! `Agent`: runs a subagent, a separate loop with its own context, tools and `wire.jsonl` under
//! `<session>/subagents/<id>/`, and returns its final report (reference `kimi_cli/tools/agent`).
//!
//! The tool holds the arguments, their checks and the plan; the subagent is prepared, run and reported
//! on by [`Subagents`], the core's runner, which makes its soul with the same builder as the root
//! agent's. The call is read-only for the approval runtime (the subagent asks for its own side
//! effects), so several `Agent` calls in one step run at once.

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_core::{AgentRequest, Subagents};
use kimi_core::{CallContext, Plan, parse_args};
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use crate::args;

/// The tool's name.
pub const NAME: &str = "Agent";

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
    subagents: Arc<Subagents>,
}

impl AgentTool {
    /// The tool, starting the session's `subagents`.
    pub fn new(subagents: Arc<Subagents>) -> Self {
        let types = subagents
            .types()
            .iter()
            .map(|t| {
                let tools = subagents
                    .tools(t)
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
            subagents,
        }
    }

    async fn run(self: Arc<Self>, args: AgentArgs, ctx: CallContext) -> ToolReturnValue {
        if let Some(model) = &args.model
            && !self.subagents.has_model(model)
        {
            return ToolReturnValue::error(
                "",
                format!("Unknown model alias: {model}"),
                "Invalid model alias",
            );
        }
        let request = AgentRequest {
            description: args.description,
            prompt: args.prompt,
            subagent_type: args.subagent_type,
            model: args.model,
            resume: args.resume,
            run_in_background: args.run_in_background,
            timeout: args.timeout,
        };
        Arc::clone(&self.subagents).run(request, ctx).await
    }
}

impl kimi_core::Tool for AgentTool {
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
