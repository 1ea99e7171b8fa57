//! D2 diagrams as flow diagrams (reference `skill/flow/d2.py`).
//!
//! Top-level statements only (anything inside `{ ... }` is skipped with the line that opened it);
//! `#` comments; `a -> b -> c: label` edges (the label belongs to the last arrow); `a: Label` nodes;
//! `a.shape: circle` style paths are ignored; `a: |md ... |` blocks become multi-line labels.

use super::{Flow, FlowEdge, FlowError, NodeTable, Outgoing, build, push_edge};

/// Property names that make `node.prop` a style path rather than a node.
const PROPERTY_SEGMENTS: &[&str] = &[
    "shape",
    "style",
    "label",
    "link",
    "icon",
    "near",
    "width",
    "height",
    "direction",
    "grid-rows",
    "grid-columns",
    "grid-gap",
    "font-size",
    "font-family",
    "font-color",
    "stroke",
    "fill",
    "opacity",
    "padding",
    "border-radius",
    "shadow",
    "sketch",
    "animated",
    "multiple",
    "constraint",
    "tooltip",
];

/// Parses a D2 diagram.
pub fn parse(text: &str) -> Result<Flow, FlowError> {
    let text = normalize_markdown_blocks(text)?;
    let mut nodes = NodeTable::default();
    let mut outgoing = Outgoing::new();
    for (line_no, statement) in top_level_statements(&text)? {
        if split_on_arrow(&statement)?.len() > 1 {
            edge_statement(&statement, line_no, &mut nodes, &mut outgoing)?;
        } else {
            node_statement(&statement, line_no, &mut nodes)?;
        }
    }
    build(nodes, outgoing)
}

/// Quote tracking shared by the scanners: single and double quotes, backslash escapes inside them.
#[derive(Debug, Default, Clone, Copy)]
struct Quotes {
    single: bool,
    double: bool,
    escape: bool,
}

impl Quotes {
    fn inside(self) -> bool {
        self.single || self.double
    }

    /// Feeds one character; returns whether it was consumed as quoting (an escape or a quote mark).
    fn feed(&mut self, c: char) -> bool {
        if self.escape {
            self.escape = false;
            return true;
        }
        match c {
            '\\' if self.inside() => {
                self.escape = true;
                true
            }
            '\'' if !self.double => {
                self.single = !self.single;
                true
            }
            '"' if !self.single => {
                self.double = !self.double;
                true
            }
            _ => false,
        }
    }
}

/// Splits at the first unquoted `token`: `(before, Some(after))`, both trimmed, or `(text, None)`.
fn split_unquoted_once(text: &str, token: char) -> (&str, Option<&str>) {
    let mut quotes = Quotes::default();
    for (idx, c) in text.char_indices() {
        if quotes.feed(c) {
            continue;
        }
        if c == token && !quotes.inside() {
            return (text[..idx].trim(), Some(text[idx + 1..].trim()));
        }
    }
    (text.trim(), None)
}

/// Splits at every unquoted `->`.
fn split_on_arrow(text: &str) -> Result<Vec<String>, FlowError> {
    let mut parts = Vec::new();
    let mut buf = String::new();
    let mut quotes = Quotes::default();
    let mut chars = text.char_indices().peekable();
    while let Some((idx, c)) = chars.next() {
        if !quotes.inside() && text[idx..].starts_with("->") {
            parts.push(buf.trim().to_owned());
            buf.clear();
            chars.next();
            continue;
        }
        quotes.feed(c);
        buf.push(c);
    }
    if quotes.inside() {
        return Err(FlowError("Unclosed string in statement".into()));
    }
    parts.push(buf.trim().to_owned());
    Ok(parts)
}

/// Drops an unquoted `#` comment.
fn strip_comment(text: &str) -> &str {
    let mut quotes = Quotes::default();
    for (idx, c) in text.char_indices() {
        if quotes.feed(c) {
            continue;
        }
        if c == '#' && !quotes.inside() {
            return &text[..idx];
        }
    }
    text
}

/// Rewrites `key: |md` ... `|` blocks as one quoted (multi-line) label so statements stay line based.
fn normalize_markdown_blocks(text: &str) -> Result<String, FlowError> {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let (prefix, suffix) = split_unquoted_once(line, ':');
        let is_block = suffix.is_some_and(|s| strip_comment(s).trim() == "|md");
        if !is_block {
            out.push(line.to_owned());
            i += 1;
            continue;
        }
        let start_line = i + 1;
        let mut block = Vec::new();
        i += 1;
        while i < lines.len() && lines[i].trim() != "|" {
            block.push(lines[i]);
            i += 1;
        }
        if i >= lines.len() {
            return Err(FlowError::at(start_line, "Unclosed markdown block"));
        }
        let dedented = dedent(&block);
        if dedented.is_empty() {
            out.push(format!("{prefix}: \"\""));
            out.push(String::new());
        } else {
            let escaped: Vec<String> = dedented
                .iter()
                .map(|l| l.replace('\\', "\\\\").replace('"', "\\\""))
                .collect();
            let last = escaped.len() - 1;
            for (n, l) in escaped.into_iter().enumerate() {
                let mut piece = if n == 0 { format!("{prefix}: \"{l}") } else { l };
                if n == last {
                    piece.push('"');
                }
                out.push(piece);
            }
            // Keep later line numbers roughly in step with the source (the block's fences).
            out.push(String::new());
            out.push(String::new());
        }
        i += 1;
    }
    Ok(out.join("\n"))
}

/// Removes the common leading indentation of the non-blank lines; blank when all are blank.
fn dedent(lines: &[&str]) -> Vec<String> {
    let indent = lines
        .iter()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start_matches([' ', '\t']).len())
        .min();
    match indent {
        None if lines.is_empty() => Vec::new(),
        None => lines.iter().map(|_| String::new()).collect(),
        Some(n) => lines
            .iter()
            .map(|l| l.get(n..).unwrap_or("").to_owned())
            .collect(),
    }
}

/// Statements at brace depth 0 with the line each starts on; a line that opens a `{` block is dropped
/// up to the end of the line that closes it.
fn top_level_statements(text: &str) -> Result<Vec<(usize, String)>, FlowError> {
    let mut statements = Vec::new();
    let mut depth = 0usize;
    let mut quotes = Quotes::default();
    let mut drop_line = false;
    let mut buf = String::new();
    let mut line_no = 1;
    let mut stmt_line = 1;
    let mut chars = text.chars().peekable();
    let flush = |buf: &mut String, statements: &mut Vec<(usize, String)>, at: usize| {
        let statement = buf.trim();
        if !statement.is_empty() {
            statements.push((at, statement.to_owned()));
        }
        buf.clear();
    };
    while let Some(c) = chars.next() {
        if c == '\\' && chars.peek() == Some(&'\n') {
            chars.next();
            line_no += 1;
            continue;
        }
        if c == '\n' {
            if quotes.inside() && depth == 0 && !drop_line {
                buf.push('\n');
                line_no += 1;
                continue;
            }
            if depth == 0 && !quotes.inside() && !drop_line {
                flush(&mut buf, &mut statements, stmt_line);
            }
            buf.clear();
            drop_line = false;
            line_no += 1;
            stmt_line = line_no;
            continue;
        }
        if !quotes.inside() {
            match c {
                '#' => {
                    while chars.peek().is_some_and(|n| *n != '\n') {
                        chars.next();
                    }
                    continue;
                }
                '{' => {
                    if depth == 0 {
                        flush(&mut buf, &mut statements, stmt_line);
                        drop_line = true;
                    }
                    depth += 1;
                    continue;
                }
                '}' if depth > 0 => {
                    depth -= 1;
                    continue;
                }
                '}' => return Err(FlowError::at(line_no, "Unmatched '}'")),
                _ => {}
            }
        }
        quotes.feed(c);
        if depth == 0 && !drop_line {
            buf.push(c);
        }
    }
    if depth != 0 {
        return Err(FlowError::at(line_no, "Unclosed '{' block"));
    }
    if quotes.inside() {
        return Err(FlowError::at(line_no, "Unclosed string"));
    }
    flush(&mut buf, &mut statements, stmt_line);
    Ok(statements)
}

fn edge_statement(
    statement: &str,
    line_no: usize,
    nodes: &mut NodeTable,
    outgoing: &mut Outgoing,
) -> Result<(), FlowError> {
    let mut parts = split_on_arrow(statement)?;
    if parts.len() < 2 {
        return Err(FlowError::at(line_no, "Expected edge arrow"));
    }
    let last = parts.len() - 1;
    let (target, edge_label) = split_unquoted_once(&parts[last], ':');
    let edge_label = edge_label.map(str::to_owned);
    parts[last] = target.to_owned();
    let mut ids = Vec::with_capacity(parts.len());
    for (idx, part) in parts.iter().enumerate() {
        ids.push(node_id(part, line_no, idx < last)?);
    }
    if ids.iter().any(|id| is_property_path(id)) {
        return Ok(());
    }
    let label = edge_label.map(|l| label(&l, line_no)).transpose()?;
    for (idx, pair) in ids.windows(2).enumerate() {
        push_edge(
            outgoing,
            FlowEdge {
                src: pair[0].clone(),
                dst: pair[1].clone(),
                label: if idx == ids.len() - 2 { label.clone() } else { None },
            },
        );
    }
    for id in &ids {
        nodes.add(id, None, line_no)?;
    }
    Ok(())
}

fn node_statement(statement: &str, line_no: usize, nodes: &mut NodeTable) -> Result<(), FlowError> {
    let (node_text, label_text) = split_unquoted_once(statement, ':');
    if label_text.is_some() && is_property_path(node_text) {
        return Ok(());
    }
    let id = node_id(node_text, line_no, false)?;
    match label_text {
        Some(text) if text.trim().is_empty() => Ok(()),
        Some(text) => {
            let label = label(text, line_no)?;
            nodes.add(&id, Some(&label), line_no)
        }
        None => nodes.add(&id, None, line_no),
    }
}

/// A node id (`[A-Za-z0-9_][A-Za-z0-9_./-]*`); inner parts of a chain may carry `: label`.
fn node_id(text: &str, line_no: usize, allow_inline_label: bool) -> Result<String, FlowError> {
    let mut cleaned = text.trim();
    if allow_inline_label && cleaned.contains(':') {
        cleaned = split_unquoted_once(cleaned, ':').0;
    }
    if cleaned.is_empty() {
        return Err(FlowError::at(line_no, "Expected node id"));
    }
    let valid = cleaned
        .bytes()
        .enumerate()
        .all(|(i, b)| b.is_ascii_alphanumeric() || b == b'_' || (i > 0 && matches!(b, b'.' | b'/' | b'-')));
    if !valid {
        return Err(FlowError::at(line_no, format!("Invalid node id \"{cleaned}\"")));
    }
    Ok(cleaned.to_owned())
}

fn is_property_path(id: &str) -> bool {
    if !id.contains('.') {
        return false;
    }
    let parts: Vec<&str> = id.split('.').filter(|p| !p.is_empty()).collect();
    let is_property = |p: &&str| PROPERTY_SEGMENTS.contains(p) || p.starts_with("style");
    parts.iter().skip(1).any(is_property) || parts.last().is_some_and(|p| PROPERTY_SEGMENTS.contains(p))
}

/// A label: plain text, or a quoted string with backslash escapes and nothing after it.
fn label(text: &str, line_no: usize) -> Result<String, FlowError> {
    let text = text.trim();
    let Some(quote) = text.chars().next() else {
        return Err(FlowError::at(line_no, "Label cannot be empty"));
    };
    if quote != '"' && quote != '\'' {
        return Ok(text.to_owned());
    }
    let mut out = String::new();
    let mut chars = text[1..].char_indices();
    while let Some((offset, c)) = chars.next() {
        match c {
            '\\' => {
                if let Some((_, escaped)) = chars.next() {
                    out.push(escaped);
                }
            }
            c if c == quote => {
                if !text[1 + offset + c.len_utf8()..].trim().is_empty() {
                    return Err(FlowError::at(line_no, "Unexpected trailing content"));
                }
                return Ok(out);
            }
            other => out.push(other),
        }
    }
    Err(FlowError::at(line_no, "Unclosed quoted label"))
}

#[cfg(test)]
mod tests {
    use super::super::NodeKind;
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_flow_with_a_decision() {
        let text = "# review flow\nbegin: BEGIN\nend: END\nreview: \"Review the diff\"\nreview.shape: diamond\nbegin -> review\nreview -> end: ok\nreview -> fix: needs work\nfix -> review\nlegend: {\n  near: top-left\n}\n";
        let flow = parse(text).unwrap();
        assert_eq!(flow.begin().id, "begin");
        let review = flow.node("review").unwrap();
        assert_eq!(
            (review.label.as_str(), review.kind),
            ("Review the diff", NodeKind::Decision)
        );
        let labels: Vec<_> = flow
            .outgoing("review")
            .iter()
            .map(|e| e.label.clone().unwrap())
            .collect();
        assert_eq!(labels, ["ok", "needs work"]);
        assert_eq!(flow.node("fix").unwrap().label, "fix");
        // `legend: {` opened a block: the whole line is dropped, so no `legend` node.
        assert!(flow.node("legend").is_none());
    }

    #[test]
    fn chains_and_markdown_labels() {
        let text = "a: BEGIN\nz: END\nt: |md\n  # Step\n  Do \"it\"\n|\na -> t -> z\n";
        let flow = parse(text).unwrap();
        assert_eq!(flow.node("t").unwrap().label, "# Step\nDo \"it\"");
        assert_eq!(flow.outgoing("a")[0].dst, "t");
        assert_eq!(flow.outgoing("t")[0].dst, "z");
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(parse("a: BEGIN\n}\n").unwrap_err().0, "Line 2: Unmatched '}'");
        assert_eq!(parse("a: {\n").unwrap_err().0, "Line 2: Unclosed '{' block");
        assert_eq!(
            parse("x: |md\nno end\n").unwrap_err().0,
            "Line 1: Unclosed markdown block"
        );
        assert_eq!(
            parse("a b -> c\n").unwrap_err().0,
            "Line 1: Invalid node id \"a b\""
        );
        assert_eq!(
            parse("a: \"x\" y\n").unwrap_err().0,
            "Line 1: Unexpected trailing content"
        );
    }
}
