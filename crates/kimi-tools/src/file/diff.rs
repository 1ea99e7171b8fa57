//! Diff display blocks for WriteFile and StrReplaceFile, shaped as the reference builds them
//! (`kimi_cli/utils/diff.py`): lines split as Python's `str.splitlines`, one block per hunk with three
//! lines of context (difflib's `get_grouped_opcodes(3)`), and a single summary block instead of a diff
//! when either side has more than 10 000 lines.
//!
//! The line matching itself is Myers (from `similar`), not difflib's Ratcliff/Obershelp, so a hunk
//! can differ from the reference's on edits with several equally short alignments; the grouping, the
//! texts and the line numbers follow difflib exactly.

use std::ops::Range;
use std::time::{Duration, Instant};

use kimi_wire::message::DisplayBlock;
use similar::{Algorithm, DiffOp, capture_diff_slices_deadline};

use crate::output::split_lines;

/// Context lines around each change.
const CONTEXT_LINES: usize = 3;

/// Above this many lines on either side only a summary block is shown.
const HUGE_FILE_THRESHOLD: usize = 10_000;

/// A bound on the diff computation; past it `similar` settles for a coarser (still correct) diff.
const DIFF_DEADLINE: Duration = Duration::from_secs(2);

/// One difflib opcode: equal or not, with the old and new line ranges.
#[derive(Debug, Clone, PartialEq)]
struct Opcode {
    equal: bool,
    old: Range<usize>,
    new: Range<usize>,
}

/// The blocks showing how `old_text` becomes `new_text` in `path`; empty when they are equal.
pub(crate) fn build_diff_blocks(path: &str, old_text: &str, new_text: &str) -> Vec<DisplayBlock> {
    if old_text == new_text {
        return Vec::new();
    }
    let old_lines = split_lines(old_text, false);
    let new_lines = split_lines(new_text, false);
    if old_lines.len().max(new_lines.len()) > HUGE_FILE_THRESHOLD {
        let new_desc = if old_lines.len() == new_lines.len() {
            format!("({} lines, modified)", new_lines.len())
        } else {
            format!("({} lines)", new_lines.len())
        };
        return vec![DisplayBlock::Diff {
            path: path.to_owned(),
            old_text: format!("({} lines)", old_lines.len()),
            new_text: new_desc,
            old_start: 1,
            new_start: 1,
            is_summary: true,
        }];
    }
    let deadline = Instant::now() + DIFF_DEADLINE;
    let ops = capture_diff_slices_deadline(Algorithm::Myers, &old_lines, &new_lines, Some(deadline));
    let opcodes = to_opcodes(&ops);
    grouped_opcodes(opcodes, CONTEXT_LINES)
        .into_iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let (i1, i2, j1, j2) = (first.old.start, last.old.end, first.new.start, last.new.end);
            Some(DisplayBlock::Diff {
                path: path.to_owned(),
                old_text: old_lines[i1..i2].join("\n"),
                new_text: new_lines[j1..j2].join("\n"),
                old_start: line_number(i1),
                new_start: line_number(j1),
                is_summary: false,
            })
        })
        .collect()
}

fn line_number(index: usize) -> u32 {
    u32::try_from(index + 1).unwrap_or(u32::MAX)
}

/// Turns `similar`'s operations into difflib-style opcodes, merging neighbouring changes.
fn to_opcodes(ops: &[DiffOp]) -> Vec<Opcode> {
    let mut out: Vec<Opcode> = Vec::new();
    for op in ops {
        let (old, new) = (op.old_range(), op.new_range());
        if old.is_empty() && new.is_empty() {
            continue;
        }
        let equal = matches!(op, DiffOp::Equal { .. });
        match out.last_mut() {
            Some(prev) if prev.equal == equal => {
                prev.old.end = old.end;
                prev.new.end = new.end;
            }
            _ => out.push(Opcode { equal, old, new }),
        }
    }
    out
}

/// difflib's `SequenceMatcher.get_grouped_opcodes(n)`: hunks of changes with up to `n` lines of
/// context, split where more than `2n` unchanged lines separate two changes.
fn grouped_opcodes(mut codes: Vec<Opcode>, n: usize) -> Vec<Vec<Opcode>> {
    if codes.is_empty() {
        codes.push(Opcode {
            equal: true,
            old: 0..1,
            new: 0..1,
        });
    }
    if let Some(first) = codes.first_mut().filter(|c| c.equal) {
        first.old.start = first.old.start.max(first.old.end.saturating_sub(n));
        first.new.start = first.new.start.max(first.new.end.saturating_sub(n));
    }
    if let Some(last) = codes.last_mut().filter(|c| c.equal) {
        last.old.end = last.old.end.min(last.old.start + n);
        last.new.end = last.new.end.min(last.new.start + n);
    }
    let mut groups = Vec::new();
    let mut group: Vec<Opcode> = Vec::new();
    for code in codes {
        let Opcode {
            equal,
            mut old,
            mut new,
        } = code;
        if equal && old.len() > 2 * n {
            group.push(Opcode {
                equal,
                old: old.start..old.end.min(old.start + n),
                new: new.start..new.end.min(new.start + n),
            });
            groups.push(std::mem::take(&mut group));
            old.start = old.start.max(old.end.saturating_sub(n));
            new.start = new.start.max(new.end.saturating_sub(n));
        }
        group.push(Opcode { equal, old, new });
    }
    // A lone unchanged run is not a hunk.
    if group.len() > 1 || group.first().is_some_and(|c| !c.equal) {
        groups.push(group);
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn diff(path: &str, old_text: &str, new_text: &str, old_start: u32, new_start: u32) -> DisplayBlock {
        DisplayBlock::Diff {
            path: path.into(),
            old_text: old_text.into(),
            new_text: new_text.into(),
            old_start,
            new_start,
            is_summary: false,
        }
    }

    #[test]
    fn new_file_is_one_block() {
        assert_eq!(
            build_diff_blocks("/w/f.txt", "", "hello"),
            vec![diff("/w/f.txt", "", "hello", 1, 1)]
        );
    }

    #[test]
    fn single_line_change() {
        assert_eq!(
            build_diff_blocks("/w/f", "hello", "hi"),
            vec![diff("/w/f", "hello", "hi", 1, 1)]
        );
    }

    #[test]
    fn equal_lines_give_no_blocks() {
        assert_eq!(build_diff_blocks("p", "same", "same"), Vec::new());
        // Only the final newline differs: no line changed, so nothing to show (as difflib).
        assert_eq!(build_diff_blocks("p", "a", "a\n"), Vec::new());
    }

    #[test]
    fn distant_changes_make_separate_hunks_with_context() {
        let old: Vec<String> = (1..=20).map(|i| format!("l{i}")).collect();
        let mut new = old.clone();
        new[1] = "X2".into();
        new[17] = "X18".into();
        let blocks = build_diff_blocks("p", &old.join("\n"), &new.join("\n"));
        assert_eq!(
            blocks,
            vec![
                diff("p", "l1\nl2\nl3\nl4\nl5", "l1\nX2\nl3\nl4\nl5", 1, 1),
                diff(
                    "p",
                    "l15\nl16\nl17\nl18\nl19\nl20",
                    "l15\nl16\nl17\nX18\nl19\nl20",
                    15,
                    15
                ),
            ]
        );
    }

    #[test]
    fn close_changes_share_a_hunk() {
        let old = "a\nb\nc\nd\ne\nf\ng\nh\ni\nj";
        let new = "a\nB\nc\nd\ne\nf\nG\nh\ni\nj";
        assert_eq!(
            build_diff_blocks("p", old, new),
            vec![diff(
                "p",
                "a\nb\nc\nd\ne\nf\ng\nh\ni\nj",
                "a\nB\nc\nd\ne\nf\nG\nh\ni\nj",
                1,
                1
            )]
        );
    }

    #[test]
    fn insertion_in_the_middle() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8";
        let new = "1\n2\n3\n4\nnew\n5\n6\n7\n8";
        assert_eq!(
            build_diff_blocks("p", old, new),
            vec![diff("p", "2\n3\n4\n5\n6\n7", "2\n3\n4\nnew\n5\n6\n7", 2, 2)]
        );
    }

    #[test]
    fn huge_files_get_a_summary() {
        let old = "x\n".repeat(10_001);
        let new = format!("{old}y\n");
        assert_eq!(
            build_diff_blocks("p", &old, &new),
            vec![DisplayBlock::Diff {
                path: "p".into(),
                old_text: "(10001 lines)".into(),
                new_text: "(10002 lines)".into(),
                old_start: 1,
                new_start: 1,
                is_summary: true,
            }]
        );
        let modified = old.replacen('x', "z", 1);
        assert_eq!(
            build_diff_blocks("p", &old, &modified),
            vec![DisplayBlock::Diff {
                path: "p".into(),
                old_text: "(10001 lines)".into(),
                new_text: "(10001 lines, modified)".into(),
                old_start: 1,
                new_start: 1,
                is_summary: true,
            }]
        );
    }
}
