//! `ExitPlanMode` (seeds/002): the shared ExitPlanMode, with seeds/002's limits on `options`: one to
//! three, each label 1 to 80 characters (the shared tool's own checks, unique and unreserved labels,
//! still apply).

use std::sync::Arc;

use kimi_core::{Tool, parse_args};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::adapter::Adapted;
use crate::args;

/// Longest option label (seeds/002).
const MAX_LABEL_CHARS: usize = 80;

// Parameters of `ExitPlanMode` (field doc comments are the parameter descriptions).
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct ExitArgs {
    /// The plan's alternative approaches (one to three) for the user to pick from. Leave out when the plan has a single approach.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 3))]
    options: Option<Vec<PlanOption>>,
}

#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct PlanOption {
    /// The approach in a few words (at most 80 characters); add "(Recommended)" to the one you suggest.
    #[schemars(length(min = 1, max = 80))]
    label: String,
    /// What the approach involves and what it trades off.
    #[serde(default)]
    description: String,
}

/// seeds/002's `ExitPlanMode` over the shared one.
pub(crate) fn exit_plan_mode(inner: Arc<dyn Tool>) -> Adapted {
    let description = inner.spec().description.clone();
    let spec = crate::tool_spec::<ExitArgs>("ExitPlanMode", description);
    Adapted::new(inner, spec).args(|args: Value| {
        let args: ExitArgs = parse_args(args)?;
        if let Some(options) = &args.options {
            args::check_len("options", options.len(), 1, 3)?;
            for (i, option) in options.iter().enumerate() {
                let chars = option.label.chars().count();
                if chars == 0 {
                    return Err(args::string_too_short(&format!("options.{i}.label"), 1));
                }
                if chars > MAX_LABEL_CHARS {
                    return Err(args::string_too_long(
                        &format!("options.{i}.label"),
                        MAX_LABEL_CHARS,
                    ));
                }
            }
        }
        serde_json::to_value(&args).map_err(|e| args::value_error(&e.to_string()))
    })
}
