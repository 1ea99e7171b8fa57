//! `Agent` (seeds/002): the shared Agent tool without its `model` parameter, and with `subagent_type`
//! and `resume` exclusive: a resumed agent is found by its id alone.

use std::sync::Arc;

use kimi_core::{Tool, parse_args};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::adapter::Adapted;
use crate::args;

// Parameters of `Agent` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct AgentArgs {
    /// The complete task for the subagent, with all the context it needs.
    prompt: String,
    /// A short (3 to 5 words) description of the task, shown to the user.
    description: String,
    /// Which subagent type runs the task (`coder` by default). Not with `resume`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    subagent_type: Option<String>,
    /// The agent_id of an earlier subagent to continue, with its conversation, instead of starting a new one. Not with `subagent_type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    resume: Option<String>,
    /// Run in the background and return at once; you are told when it finishes.
    #[serde(default)]
    run_in_background: bool,
    /// Stop the subagent after this many seconds (30 to 3600). No limit by default in the foreground; in the background `[background] agent_task_timeout_s`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 30, max = 3600))]
    timeout: Option<u64>,
}

/// seeds/002's `Agent` over the shared one.
pub(crate) fn agent(inner: Arc<dyn Tool>) -> Adapted {
    let description = inner.spec().description.clone();
    let spec = crate::tool_spec::<AgentArgs>("Agent", description);
    Adapted::new(inner, spec).args(|args: Value| {
        let args: AgentArgs = parse_args(args)?;
        if args.subagent_type.is_some() && args.resume.is_some() {
            return Err(args::value_error(
                "subagent_type and resume are mutually exclusive: a resumed agent is addressed by its id \
                 only, and keeps its type",
            ));
        }
        serde_json::to_value(&args).map_err(|e| args::value_error(&e.to_string()))
    })
}
