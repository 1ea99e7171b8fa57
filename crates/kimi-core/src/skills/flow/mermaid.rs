//! Mermaid flowcharts as flow diagrams (reference `skill/flow/mermaid.py`).
//!
//! Line based: `flowchart`/`graph` headers, `%%` comments, styling statements and `:::class` tokens are
//! ignored; a line is an edge (`A -->|label| B`, `A -- label --> B`, `A --- B`) or a node
//! (`A[Label]`, `A(Label)`, `A{Label}`, `A([Label])`, `A["quoted"]`). Like the reference, a chain
//! `A --> B --> C` keeps only its first and last node.

use super::{Flow, FlowEdge, FlowError, NodeTable, Outgoing, build, push_edge};

/// A node as written on a line: its id and the label, when one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NodeSpec {
    id: String,
    label: Option<String>,
}

/// Statements that only style the chart.
const STYLE_PREFIXES: &[&str] = &[
    "classdef ",
    "class ",
    "style ",
    "linkstyle ",
    "click ",
    "subgraph ",
    "direction ",
];

/// Parses a Mermaid flowchart.
pub fn parse(text: &str) -> Result<Flow, FlowError> {
    let mut nodes = NodeTable::default();
    let mut outgoing = Outgoing::new();
    for (index, raw) in text.lines().enumerate() {
        let line_no = index + 1;
        let line = raw.split_once("%%").map_or(raw, |(code, _)| code).trim();
        if line.is_empty() || is_header(line) || is_style(line) {
            continue;
        }
        let line = strip_class_tokens(line);
        if let Some((src, label, dst)) = parse_edge(&line, line_no) {
            nodes.add(&src.id, src.label.as_deref(), line_no)?;
            nodes.add(&dst.id, dst.label.as_deref(), line_no)?;
            push_edge(
                &mut outgoing,
                FlowEdge {
                    src: src.id,
                    dst: dst.id,
                    label,
                },
            );
        } else if let Ok((spec, _)) = node_token(&line, 0, line_no) {
            nodes.add(&spec.id, spec.label.as_deref(), line_no)?;
        }
    }
    build(nodes, outgoing)
}

/// `flowchart TD`, `graph LR`, ... (any case, as a whole word).
fn is_header(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    ["flowchart", "graph"].iter().any(|word| {
        lower.strip_prefix(word).is_some_and(|rest| {
            !rest
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    })
}

fn is_style(line: &str) -> bool {
    let lower = line.to_lowercase();
    lower == "end" || STYLE_PREFIXES.iter().any(|p| lower.starts_with(p))
}

/// Removes `:::className` tokens.
fn strip_class_tokens(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(start) = rest.find(":::") {
        let after = &rest[start + 3..];
        let len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(after.len());
        if len == 0 {
            out.push_str(&rest[..start + 3]);
        } else {
            out.push_str(&rest[..start]);
        }
        rest = &after[len..];
    }
    out.push_str(rest);
    out
}

/// Length of the node id starting at `idx` (`[A-Za-z0-9_][A-Za-z0-9_-]*`), 0 when there is none.
fn id_len(line: &str, idx: usize) -> usize {
    let bytes = &line.as_bytes()[idx.min(line.len())..];
    match bytes.first() {
        Some(b) if b.is_ascii_alphanumeric() || *b == b'_' => {}
        _ => return 0,
    }
    bytes
        .iter()
        .position(|b| !(b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-'))
        .unwrap_or(bytes.len())
}

fn closing(open: u8) -> Option<u8> {
    match open {
        b'[' => Some(b']'),
        b'(' => Some(b')'),
        b'{' => Some(b'}'),
        _ => None,
    }
}

/// A node id at `idx`, with its shape-delimited label when one follows; returns where it ends.
fn node_token(line: &str, idx: usize, line_no: usize) -> Result<(NodeSpec, usize), FlowError> {
    let len = id_len(line, idx);
    if len == 0 {
        return Err(FlowError::at(line_no, "Expected node id"));
    }
    let id = line[idx..idx + len].to_owned();
    let end = idx + len;
    let Some(close) = line.as_bytes().get(end).copied().and_then(closing) else {
        return Ok((NodeSpec { id, label: None }, end));
    };
    let (label, end) = label_at(line, end + 1, close, line_no)?;
    Ok((
        NodeSpec {
            id,
            label: Some(label),
        },
        end,
    ))
}

/// The label starting at `idx` and closed by `close`: `([stadium])`, `"quoted \" text"`, or plain.
fn label_at(line: &str, idx: usize, close: u8, line_no: usize) -> Result<(String, usize), FlowError> {
    let bytes = line.as_bytes();
    let Some(&first) = bytes.get(idx) else {
        return Err(FlowError::at(line_no, "Expected node label"));
    };
    if close == b')' && first == b'[' {
        let (label, end) = label_at(line, idx + 1, b']', line_no)?;
        let end = skip_ws(line, end);
        if bytes.get(end) != Some(&b')') {
            return Err(FlowError::at(line_no, "Unclosed node label"));
        }
        return Ok((label, end + 1));
    }
    if first == b'"' {
        let mut label = String::new();
        let mut chars = line[idx + 1..].char_indices();
        while let Some((offset, c)) = chars.next() {
            match c {
                '"' => {
                    let end = skip_ws(line, idx + 1 + offset + 1);
                    if bytes.get(end) != Some(&close) {
                        return Err(FlowError::at(line_no, "Unclosed node label"));
                    }
                    return Ok((label, end + 1));
                }
                '\\' => match chars.next() {
                    Some((_, escaped)) => label.push(escaped),
                    None => label.push('\\'),
                },
                other => label.push(other),
            }
        }
        return Err(FlowError::at(line_no, "Unclosed quoted label"));
    }
    let Some(len) = line[idx..].find(close as char) else {
        return Err(FlowError::at(line_no, "Unclosed node label"));
    };
    let label = line[idx..idx + len].trim();
    if label.is_empty() {
        return Err(FlowError::at(line_no, "Node label cannot be empty"));
    }
    Ok((label.to_owned(), idx + len + 1))
}

fn skip_ws(line: &str, idx: usize) -> usize {
    idx + line
        .get(idx..)
        .map_or(0, |rest| rest.len() - rest.trim_start().len())
}

/// The edge a line describes, or `None` when it is not an edge (reference `_try_parse_edge_line`).
fn parse_edge(line: &str, line_no: usize) -> Option<(NodeSpec, Option<String>, NodeSpec)> {
    let (src, idx) = node_token(line, 0, line_no).ok()?;
    let (normalized, label) = take_edge_label(line);
    let idx = skip_ws(&normalized, idx.min(normalized.len()));
    let tail = normalized.get(idx..)?;
    let normalized = if tail.contains('>') {
        normalized.clone()
    } else if tail.contains("---") {
        format!("{}{}", &normalized[..idx], tail.replacen("---", "-->", 1))
    } else {
        return None;
    };
    let normalized = unify_arrows(&normalized);
    let arrow = normalized.rfind('>')?;
    let dst_start = skip_ws(&normalized, arrow + 1);
    let (dst, _) = node_token(&normalized, dst_start, line_no).ok()?;
    Some((src, label, dst))
}

/// Takes the edge label out of the line: `|label|` first, else `-- label -->`.
fn take_edge_label(line: &str) -> (String, Option<String>) {
    if let Some(open) = line.find('|')
        && let Some(len) = line[open + 1..].find('|')
    {
        let label = line[open + 1..open + 1 + len].trim();
        let rest = format!("{}{}", &line[..open], &line[open + 1 + len + 1..]);
        if !label.is_empty() {
            return (rest, Some(label.to_owned()));
        }
        return text_edge_label(rest);
    }
    text_edge_label(line.to_owned())
}

/// `--\s*([^>-][^>]*)\s*-->`: a label written between `--` and `-->`.
fn text_edge_label(line: String) -> (String, Option<String>) {
    let mut search = 0;
    while let Some(found) = line[search..].find("--") {
        let start = search + found;
        let after = &line[start + 2..];
        let body_start = after.len() - after.trim_start().len();
        let body = &after[body_start..];
        let first_ok = body.chars().next().is_some_and(|c| c != '>' && c != '-');
        if first_ok {
            // `[^>]*` then `\s*-->`: the greedy body runs to the last `-->` before the first `>`.
            let until_gt = body.find('>').unwrap_or(body.len());
            if let Some(arrow) = body[..until_gt + usize::from(until_gt < body.len())].rfind("-->")
                && arrow > 0
            {
                let label = body[..arrow].trim();
                let end = start + 2 + body_start + arrow + 3;
                let rest = format!("{}-->{}", &line[..start], &line[end..]);
                let label = (!label.is_empty()).then(|| label.to_owned());
                return (rest, label);
            }
        }
        search = start + 1;
    }
    (line, None)
}

/// Every run of `-`, `.` or `=` ending in `>` becomes `-->`.
fn unify_arrows(line: &str) -> String {
    let bytes = line.as_bytes();
    let mut out = String::with_capacity(line.len());
    let mut i = 0;
    while i < bytes.len() {
        if matches!(bytes[i], b'-' | b'.' | b'=') {
            let run = bytes[i..]
                .iter()
                .position(|b| !matches!(b, b'-' | b'.' | b'='))
                .unwrap_or(bytes.len() - i);
            if bytes.get(i + run) == Some(&b'>') {
                out.push_str("-->");
                i += run + 1;
                continue;
            }
            out.push_str(&line[i..i + run]);
            i += run;
            continue;
        }
        let c = line[i..].chars().next().unwrap_or_default();
        out.push(c);
        i += c.len_utf8().max(1);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::NodeKind;
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_straight_flow() {
        let flow = parse("flowchart TD\nA([BEGIN]) --> B[Say hello]\nB --> C([END])").unwrap();
        assert_eq!(flow.begin().id, "A");
        let edge = &flow.outgoing("A")[0];
        assert_eq!(edge.dst, "B");
        let b = flow.node("B").unwrap();
        assert_eq!((b.label.as_str(), b.kind), ("Say hello", NodeKind::Task));
        assert_eq!(flow.outgoing("B")[0].dst, "C");
        assert_eq!(flow.node("C").unwrap().kind, NodeKind::End);
    }

    #[test]
    fn decisions_with_pipe_and_text_labels() {
        let text = "graph LR\n%% a comment\nS([begin]) --> Q{Is it done?}\nQ -->|yes| E([END])\nQ -- no --> W[Work more]\nW --> Q\nclassDef x fill:#f00\nW:::x\n";
        let flow = parse(text).unwrap();
        let q = flow.node("Q").unwrap();
        assert_eq!((q.label.as_str(), q.kind), ("Is it done?", NodeKind::Decision));
        let labels: Vec<_> = flow
            .outgoing("Q")
            .iter()
            .map(|e| (e.label.clone().unwrap(), e.dst.clone()))
            .collect();
        assert_eq!(
            labels,
            [
                ("yes".to_owned(), "E".to_owned()),
                ("no".to_owned(), "W".to_owned())
            ]
        );
    }

    #[test]
    fn other_arrows_and_quoted_labels() {
        let flow = parse("A([BEGIN]) ==> B[\"Say \\\"hi\\\"\"]\nB -.-> C\nC --- D([END])").unwrap();
        assert_eq!(flow.node("B").unwrap().label, "Say \"hi\"");
        assert_eq!(flow.outgoing("B")[0].dst, "C");
        assert_eq!(flow.outgoing("C")[0].dst, "D");
    }

    #[test]
    fn broken_diagrams_are_errors() {
        assert_eq!(
            parse("A([BEGIN]) --> B[Say]\nB --> C([END])\nB[Other]")
                .unwrap_err()
                .0,
            "Line 3: Conflicting definition for node \"B\""
        );
        assert_eq!(
            parse("A[BEGIN] --> B[x]").unwrap_err().0,
            "Expected exactly one END node, found 0"
        );
    }

    #[test]
    fn label_helpers() {
        assert_eq!(
            take_edge_label("A -- some words --> B"),
            ("A --> B".to_owned(), Some("some words".to_owned()))
        );
        assert_eq!(take_edge_label("A --> B"), ("A --> B".to_owned(), None));
        assert_eq!(unify_arrows("A -.-> B ==> C"), "A --> B --> C");
        assert_eq!(strip_class_tokens("A:::big --> B:::x-y"), "A --> B");
        assert!(is_header("flowchart TD") && is_header("GRAPH") && !is_header("graphs"));
    }
}
