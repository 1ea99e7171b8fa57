//! `/flow:<name>`: walks a flow skill node by node (reference `FlowRunner`), through the soul's flow
//! walker (`soul/walk.rs`, shared with the Ralph loop), bounded by [`MAX_FLOW_TURNS`] node turns.

use crate::skills::Skill;
use crate::skills::flow::Flow;
use crate::soul::{CommandContext, TurnError, TurnOutcome};

/// Node turns one walk may take (reference: 1000 moves). Unlike the reference, repeated questions at a
/// decision count too, so a model that never answers with a valid choice cannot keep the walk going.
const MAX_FLOW_TURNS: u64 = 1000;

/// Walks `flow` of `skill`; a flow takes no arguments.
pub(super) async fn walk_flow(
    cx: &CommandContext<'_>,
    skill: &Skill,
    flow: &Flow,
    args: &str,
) -> Result<TurnOutcome, TurnError> {
    if !args.trim().is_empty() {
        // Reference: a flow takes no arguments, and the command does nothing when given some.
        tracing::warn!(flow = %skill.name, args, "flow commands take no arguments; ignored the command");
        return Ok(TurnOutcome::Finished);
    }
    cx.walk(flow, Some(MAX_FLOW_TURNS)).await
}
