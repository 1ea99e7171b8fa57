//! Walking a flow (reference `FlowRunner`), for `/flow:<name>` and the Ralph loop.
//!
//! Each task or decision node is a nested turn (`TurnBegin{prompt}` ... `TurnEnd`) inside the current
//! turn. A task follows its only edge; a decision asks the model to pick a branch with
//! `<choice>label</choice>` and asks again, saying why, until it does. The walk ends at `END`, when the
//! user rejects a tool call, or past the walk's bound of node turns (reported as `max_steps_reached`
//! with the steps used).

use kimi_wire::message::UserInput;
use tokio_util::sync::CancellationToken;

use super::{Soul, TurnError, TurnOutcome};
use crate::approval::ApprovalSource;
use crate::skills::flow::{Flow, FlowEdge, FlowNode, NodeKind, parse_choice};

/// Where a node turn leads.
enum Next {
    /// Go on to this node.
    Node(String),
    /// The walk is over (`END`, a rejection, or a node without edges).
    Stop,
    /// A model turn ended otherwise (e.g. its step limit): the walk ends with that outcome.
    Outcome(TurnOutcome),
}

impl Soul {
    /// Walks `flow` from `BEGIN`. `max_turns` bounds the node turns, repeated questions at a decision
    /// included (`None`: no bound); past it the walk ends as `max_steps_reached`.
    pub(super) async fn walk(
        &self,
        flow: &Flow,
        max_turns: Option<u64>,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<TurnOutcome, TurnError> {
        let mut walk = Walk {
            max_turns,
            ..Walk::default()
        };
        let mut current = flow.begin().id.clone();
        loop {
            let Some(node) = flow.node(&current) else {
                return Ok(TurnOutcome::Finished);
            };
            let edges = flow.outgoing(&current);
            match node.kind {
                NodeKind::End => return Ok(TurnOutcome::Finished),
                NodeKind::Begin => match edges.first() {
                    Some(edge) => {
                        current = edge.dst.clone();
                        continue;
                    }
                    None => {
                        tracing::error!(node = %node.id, "flow BEGIN node has no outgoing edges; stopping");
                        return Ok(TurnOutcome::Finished);
                    }
                },
                NodeKind::Task | NodeKind::Decision => {}
            }
            match self.run_node(node, edges, &mut walk, source, cancel).await? {
                Next::Node(next) => current = next,
                Next::Stop => return Ok(TurnOutcome::Finished),
                Next::Outcome(outcome) => return Ok(outcome),
            }
        }
    }

    /// Runs one node: its prompt as a nested turn, again for a decision until a branch is chosen.
    async fn run_node(
        &self,
        node: &FlowNode,
        edges: &[FlowEdge],
        walk: &mut Walk,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<Next, TurnError> {
        let Some(first) = edges.first() else {
            tracing::error!(node = %node.id, "flow node has no outgoing edges; stopping");
            return Ok(Next::Stop);
        };
        let base = node_prompt(node, edges);
        let mut prompt = base.clone();
        loop {
            if walk.max_turns.is_some_and(|max| walk.turns >= max) {
                return Ok(Next::Outcome(TurnOutcome::MaxStepsReached(walk.steps)));
            }
            walk.turns += 1;
            let turn = self.model_turn(prompt.to_parts(), source, cancel);
            let report = self.nested_turn(prompt.clone(), turn).await?;
            walk.steps += report.steps;
            if report.rejected {
                tracing::warn!(node = %node.id, "flow stopped after a rejected tool call");
                return Ok(Next::Stop);
            }
            if report.outcome != TurnOutcome::Finished {
                return Ok(Next::Outcome(report.outcome));
            }
            if node.kind != NodeKind::Decision {
                return Ok(Next::Node(first.dst.clone()));
            }
            let choice = self.final_answer().await.and_then(|text| parse_choice(&text));
            let chosen = choice
                .as_deref()
                .and_then(|c| edges.iter().find(|e| e.label.as_deref() == Some(c)));
            if let Some(edge) = chosen {
                return Ok(Next::Node(edge.dst.clone()));
            }
            tracing::warn!(node = %node.id, choice = ?choice, "flow decision without a valid choice; asking again");
            prompt = UserInput::Text(format!(
                "{}\n\nYour last answer did not name one of the branches. Answer again and put exactly one branch name inside <choice>...</choice>.",
                base.text_summary()
            ));
        }
    }
}

/// Counters of one walk.
#[derive(Debug, Default)]
struct Walk {
    turns: u64,
    max_turns: Option<u64>,
    steps: u32,
}

/// A task's prompt is its content, else its label; a decision's adds its branches and how to answer.
fn node_prompt(node: &FlowNode, edges: &[FlowEdge]) -> UserInput {
    if node.kind != NodeKind::Decision {
        return match &node.content {
            Some(parts) => UserInput::Parts(parts.clone()),
            None => UserInput::Text(node.label.clone()),
        };
    }
    let branches: Vec<String> = edges
        .iter()
        .filter_map(|e| e.label.as_deref())
        .map(|label| format!("- {label}"))
        .collect();
    UserInput::Text(format!(
        "{}\n\nBranches you can take:\n{}\n\nEnd your answer with the branch you choose, as <choice>branch name</choice>.",
        node.label,
        branches.join("\n")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::flow::mermaid;
    use pretty_assertions::assert_eq;

    #[test]
    fn decision_prompts_list_the_branches() {
        let flow = mermaid::parse("A([BEGIN]) --> Q{Tests pass?}\nQ -->|yes| Z([END])\nQ -->|no| A").unwrap();
        let q = flow.node("Q").unwrap();
        assert_eq!(
            node_prompt(q, flow.outgoing("Q")),
            UserInput::Text(
                "Tests pass?\n\nBranches you can take:\n- yes\n- no\n\nEnd your answer with the branch you choose, as <choice>branch name</choice>.".into()
            )
        );
        let a = flow.begin();
        assert_eq!(
            node_prompt(a, flow.outgoing("A")),
            UserInput::Text("BEGIN".into())
        );
    }
}
