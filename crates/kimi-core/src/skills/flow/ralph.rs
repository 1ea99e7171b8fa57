//! The Ralph loop (`loop_control.max_ralph_iterations`) as a flow built in code (reference
//! `FlowRunner.ralph_loop`): the user's prompt once as a task, then the same prompt as a decision that
//! loops on `CONTINUE` and ends on `STOP`.

use std::collections::HashMap;

use kimi_wire::message::ContentPart;

use super::{Flow, FlowEdge, FlowNode, NodeKind};

/// The branch that feeds the prompt again.
pub const CONTINUE: &str = "CONTINUE";
/// The branch that ends the loop.
pub const STOP: &str = "STOP";

impl Flow {
    /// `BEGIN → task(prompt) → decision(prompt + loop note)`, the decision going back to itself on
    /// [`CONTINUE`] and to `END` on [`STOP`]. The task carries the user's parts as they are (images
    /// included); the decision repeats their text.
    pub fn ralph_loop(prompt: Vec<ContentPart>) -> Self {
        let text = prompt
            .iter()
            .filter_map(ContentPart::as_text)
            .collect::<Vec<_>>()
            .join(" ");
        let text = text.trim();
        let decision = format!(
            "{text}\n\n(This prompt runs in an automated loop: after each answer you are given it again. \
             Choose {STOP} only once the task is completely done, which ends the loop; if you are not \
             certain it is, choose {CONTINUE}.)"
        );
        let node = |id: &str, label: String, kind, content| {
            (
                id.to_owned(),
                FlowNode {
                    id: id.to_owned(),
                    label,
                    kind,
                    content,
                },
            )
        };
        let edge = |src: &str, dst: &str, label: Option<&str>| FlowEdge {
            src: src.to_owned(),
            dst: dst.to_owned(),
            label: label.map(str::to_owned),
        };
        let nodes = HashMap::from([
            node("BEGIN", "BEGIN".to_owned(), NodeKind::Begin, None),
            node("R1", text.to_owned(), NodeKind::Task, Some(prompt)),
            node("R2", decision, NodeKind::Decision, None),
            node("END", "END".to_owned(), NodeKind::End, None),
        ]);
        let outgoing = HashMap::from([
            ("BEGIN".to_owned(), vec![edge("BEGIN", "R1", None)]),
            ("R1".to_owned(), vec![edge("R1", "R2", None)]),
            (
                "R2".to_owned(),
                vec![edge("R2", "R2", Some(CONTINUE)), edge("R2", "END", Some(STOP))],
            ),
            ("END".to_owned(), Vec::new()),
        ]);
        Self {
            nodes,
            outgoing,
            begin: "BEGIN".to_owned(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::{ImageUrlPart, MediaUrl};
    use pretty_assertions::assert_eq;

    #[test]
    fn the_task_runs_once_then_the_decision_loops_until_stop() {
        let image = ContentPart::ImageUrl(ImageUrlPart {
            image_url: MediaUrl::new("data:image/png;base64,AA=="),
        });
        let prompt = vec![ContentPart::text("fix"), image, ContentPart::text("the bug ")];
        let flow = Flow::ralph_loop(prompt.clone());

        let begin = flow.begin();
        assert_eq!(begin.kind, NodeKind::Begin);
        let [to_task] = flow.outgoing(&begin.id) else {
            panic!("BEGIN has one edge")
        };
        let task = flow.node(&to_task.dst).unwrap();
        assert_eq!(task.kind, NodeKind::Task);
        assert_eq!(task.label, "fix the bug");
        assert_eq!(task.content.as_ref(), Some(&prompt));

        let [to_decision] = flow.outgoing(&task.id) else {
            panic!("the task has one edge")
        };
        let decision = flow.node(&to_decision.dst).unwrap();
        assert_eq!(decision.kind, NodeKind::Decision);
        assert_eq!(decision.content, None);
        assert!(
            decision.label.starts_with("fix the bug\n\n("),
            "{}",
            decision.label
        );
        assert!(decision.label.contains("automated loop"), "{}", decision.label);

        let branches: Vec<(Option<&str>, NodeKind)> = flow
            .outgoing(&decision.id)
            .iter()
            .map(|e| (e.label.as_deref(), flow.node(&e.dst).unwrap().kind))
            .collect();
        assert_eq!(
            branches,
            [(Some(CONTINUE), NodeKind::Decision), (Some(STOP), NodeKind::End)]
        );
        assert_eq!(flow.outgoing(&decision.id)[0].dst, decision.id);
    }
}
