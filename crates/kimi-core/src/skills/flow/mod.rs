//! Flow skills: a diagram of prompts the agent walks node by node (reference `skill/flow/`).
//!
//! A [`Flow`] has one `BEGIN` node, one `END` node, task nodes (one prompt, then the single outgoing
//! edge) and decision nodes (several labelled edges; the model picks one with `<choice>label</choice>`).
//! The diagrams are written in Mermaid ([`mermaid`]) or D2 ([`d2`]) inside the skill's SKILL.md.

pub mod d2;
pub mod mermaid;
mod ralph;

use std::collections::{HashMap, HashSet};

use kimi_wire::message::ContentPart;

/// What a node does when the walk reaches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeKind {
    /// Where the walk starts (label `BEGIN`, any case).
    Begin,
    /// Where the walk stops (label `END`, any case).
    End,
    /// One prompt, then the only outgoing edge.
    Task,
    /// One prompt whose answer picks an outgoing edge by its label.
    Decision,
}

/// A node of the diagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowNode {
    /// The id the diagram gives it.
    pub id: String,
    /// The prompt text (or `BEGIN` / `END`).
    pub label: String,
    /// Its role in the walk.
    pub kind: NodeKind,
    /// The prompt as content parts when it is more than the label's text (the Ralph loop's task is the
    /// user's own message, images included); `None` for diagram nodes.
    pub content: Option<Vec<ContentPart>>,
}

/// An arrow between two nodes, with the label a decision answers with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowEdge {
    /// Source node id.
    pub src: String,
    /// Destination node id.
    pub dst: String,
    /// The label (`None` when the arrow has none).
    pub label: Option<String>,
}

/// A validated diagram: exactly one BEGIN and one END, END reachable, and every branching node's
/// edges labelled with distinct labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Flow {
    nodes: HashMap<String, FlowNode>,
    outgoing: HashMap<String, Vec<FlowEdge>>,
    begin: String,
}

impl Flow {
    /// The node the walk starts at.
    pub fn begin(&self) -> &FlowNode {
        &self.nodes[&self.begin]
    }

    /// The node called `id`.
    pub fn node(&self, id: &str) -> Option<&FlowNode> {
        self.nodes.get(id)
    }

    /// The edges leaving `id`, in diagram order.
    pub fn outgoing(&self, id: &str) -> &[FlowEdge] {
        self.outgoing.get(id).map_or(&[], Vec::as_slice)
    }
}

/// Why a diagram was refused; the message says where (`Line n: ...`) when it can.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct FlowError(pub String);

impl FlowError {
    fn at(line_no: usize, message: impl std::fmt::Display) -> Self {
        Self(format!("Line {line_no}: {message}"))
    }
}

/// Nodes in first-seen order, remembering whether each one's label was written out.
#[derive(Debug, Default)]
struct NodeTable {
    order: Vec<String>,
    defs: HashMap<String, (FlowNode, bool)>,
}

impl NodeTable {
    /// Adds (or reconciles) a node: an explicit label wins over an implicit one, and two different
    /// explicit definitions conflict (reference `_add_node`).
    fn add(&mut self, id: &str, label: Option<&str>, line_no: usize) -> Result<(), FlowError> {
        let explicit = label.is_some();
        let label = label.unwrap_or(id);
        if label.is_empty() {
            return Err(FlowError::at(line_no, "Node label cannot be empty"));
        }
        let kind = match label.trim().to_lowercase().as_str() {
            "begin" => NodeKind::Begin,
            "end" => NodeKind::End,
            _ => NodeKind::Task,
        };
        let node = FlowNode {
            id: id.to_owned(),
            label: label.to_owned(),
            kind,
            content: None,
        };
        match self.defs.get(id) {
            None => {
                self.order.push(id.to_owned());
                self.defs.insert(id.to_owned(), (node, explicit));
                Ok(())
            }
            Some((existing, _)) if *existing == node => Ok(()),
            Some((_, true)) if !explicit => Ok(()),
            Some((_, false)) if explicit => {
                self.defs.insert(id.to_owned(), (node, true));
                Ok(())
            }
            Some(_) => Err(FlowError::at(
                line_no,
                format!("Conflicting definition for node \"{id}\""),
            )),
        }
    }
}

/// Edges by source node, every node present even without edges.
type Outgoing = HashMap<String, Vec<FlowEdge>>;

fn push_edge(outgoing: &mut Outgoing, edge: FlowEdge) {
    outgoing.entry(edge.dst.clone()).or_default();
    outgoing.entry(edge.src.clone()).or_default().push(edge);
}

/// Turns parsed nodes and edges into a [`Flow`]: tasks with several edges become decisions, then the
/// structure is checked (reference `validate_flow`).
fn build(table: NodeTable, mut outgoing: Outgoing) -> Result<Flow, FlowError> {
    let NodeTable { order, mut defs } = table;
    let mut nodes = HashMap::with_capacity(order.len());
    for id in &order {
        let Some((mut node, _)) = defs.remove(id) else {
            continue;
        };
        let edges = outgoing.entry(id.clone()).or_default();
        if node.kind == NodeKind::Task && edges.len() > 1 {
            node.kind = NodeKind::Decision;
        }
        nodes.insert(id.clone(), node);
    }
    let of_kind = |kind| {
        order
            .iter()
            .filter(|id| nodes.get(*id).is_some_and(|n: &FlowNode| n.kind == kind))
            .cloned()
            .collect::<Vec<_>>()
    };
    let begins = of_kind(NodeKind::Begin);
    let ends = of_kind(NodeKind::End);
    if begins.len() != 1 {
        return Err(FlowError(format!(
            "Expected exactly one BEGIN node, found {}",
            begins.len()
        )));
    }
    if ends.len() != 1 {
        return Err(FlowError(format!(
            "Expected exactly one END node, found {}",
            ends.len()
        )));
    }
    let (begin, end) = (begins[0].clone(), ends[0].clone());

    let mut reachable = HashSet::new();
    let mut queue = vec![begin.clone()];
    while let Some(id) = queue.pop() {
        if !reachable.insert(id.clone()) {
            continue;
        }
        for edge in outgoing.get(&id).into_iter().flatten() {
            if !reachable.contains(&edge.dst) {
                queue.push(edge.dst.clone());
            }
        }
    }
    for id in order.iter().filter(|id| reachable.contains(*id)) {
        let edges = outgoing.get(id).map_or(&[][..], Vec::as_slice);
        if edges.len() <= 1 {
            continue;
        }
        let mut seen = HashSet::new();
        for edge in edges {
            let label = edge.label.as_deref().filter(|l| !l.trim().is_empty());
            let Some(label) = label else {
                return Err(FlowError(format!("Node \"{id}\" has an unlabeled edge")));
            };
            if !seen.insert(label) {
                return Err(FlowError(format!("Node \"{id}\" has duplicate edge labels")));
            }
        }
    }
    if !reachable.contains(&end) {
        return Err(FlowError("END node is not reachable from BEGIN".into()));
    }
    Ok(Flow {
        nodes,
        outgoing,
        begin,
    })
}

/// The last `<choice>...</choice>` in `text`, trimmed (reference `parse_choice`).
pub fn parse_choice(text: &str) -> Option<String> {
    const OPEN: &str = "<choice>";
    const CLOSE: &str = "</choice>";
    let mut found = None;
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        let after = &rest[start + OPEN.len()..];
        // The choice text may not contain `<`; a `<` that does not start `</choice>` voids this match.
        match after.find('<') {
            Some(end) if after[end..].starts_with(CLOSE) => {
                found = Some(after[..end].trim().to_owned());
                rest = &after[end + CLOSE.len()..];
            }
            Some(end) => rest = &after[end..],
            None => break,
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_last_choice_wins() {
        assert_eq!(
            parse_choice("a <choice> yes </choice> b <choice>no</choice>"),
            Some("no".into())
        );
        assert_eq!(parse_choice("<choice></choice>"), Some(String::new()));
        assert_eq!(parse_choice("no choice here"), None);
        assert_eq!(parse_choice("<choice>a<b</choice>"), None);
        assert_eq!(
            parse_choice("<choice>x</choice><choice>unclosed"),
            Some("x".into())
        );
        assert_eq!(parse_choice("<choice><choice>y</choice>"), Some("y".into()));
    }

    fn table(nodes: &[(&str, &str)]) -> NodeTable {
        let mut t = NodeTable::default();
        for (id, label) in nodes {
            t.add(id, Some(label), 1).unwrap();
        }
        t
    }

    fn edges(list: &[(&str, &str, Option<&str>)]) -> Outgoing {
        let mut out = Outgoing::new();
        for (src, dst, label) in list {
            push_edge(
                &mut out,
                FlowEdge {
                    src: (*src).into(),
                    dst: (*dst).into(),
                    label: label.map(Into::into),
                },
            );
        }
        out
    }

    #[test]
    fn validation_errors_match_the_reference() {
        let err = |t, e| build(t, e).unwrap_err().0;
        assert_eq!(
            err(table(&[("a", "x")]), edges(&[])),
            "Expected exactly one BEGIN node, found 0"
        );
        assert_eq!(
            err(table(&[("a", "BEGIN"), ("b", "begin")]), edges(&[])),
            "Expected exactly one BEGIN node, found 2"
        );
        assert_eq!(
            err(table(&[("a", "BEGIN")]), edges(&[])),
            "Expected exactly one END node, found 0"
        );
        assert_eq!(
            err(table(&[("a", "BEGIN"), ("z", "END")]), edges(&[])),
            "END node is not reachable from BEGIN"
        );
        assert_eq!(
            err(
                table(&[("a", "BEGIN"), ("q", "Q"), ("z", "END")]),
                edges(&[("a", "q", None), ("q", "z", Some("y")), ("q", "a", None)])
            ),
            "Node \"q\" has an unlabeled edge"
        );
        assert_eq!(
            err(
                table(&[("a", "BEGIN"), ("q", "Q"), ("z", "END")]),
                edges(&[("a", "q", None), ("q", "z", Some("y")), ("q", "a", Some("y"))])
            ),
            "Node \"q\" has duplicate edge labels"
        );
    }

    #[test]
    fn branching_tasks_become_decisions() {
        let flow = build(
            table(&[("a", "BEGIN"), ("q", "Q"), ("t", "T"), ("z", "END")]),
            edges(&[
                ("a", "q", None),
                ("q", "t", Some("again")),
                ("q", "z", Some("done")),
                ("t", "q", None),
            ]),
        )
        .unwrap();
        assert_eq!(flow.begin().id, "a");
        assert_eq!(flow.node("q").unwrap().kind, NodeKind::Decision);
        assert_eq!(flow.node("t").unwrap().kind, NodeKind::Task);
        assert_eq!(flow.outgoing("q").len(), 2);
        assert!(flow.outgoing("z").is_empty());
    }

    #[test]
    fn explicit_labels_win_and_conflicts_are_errors() {
        let mut t = NodeTable::default();
        t.add("a", None, 1).unwrap();
        t.add("a", Some("Say hi"), 2).unwrap();
        t.add("a", None, 3).unwrap();
        assert_eq!(t.defs["a"].0.label, "Say hi");
        assert_eq!(
            t.add("a", Some("Other"), 4).unwrap_err().0,
            "Line 4: Conflicting definition for node \"a\""
        );
    }
}
