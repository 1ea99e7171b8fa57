//! What legitimately changes between two runs of the same conversation, taken out before requests
//! are compared.
//!
//! In every string of a request:
//! - the work dir, the share directory and the home directory (longest first, only where a whole
//!   path component ends) become `${WORK_DIR}`, `${SHARE_DIR}` and `${HOME}`;
//! - dates and times (`2026-11-30`, `2026-11-30T12:34:56.789+01:00`, `2026-11-30 12:34`) become
//!   `<date>` and `<time>`;
//! - ids the agent makes up become `<id>`: UUIDs (with or without dashes), background task ids
//!   (`bash-k3x9a0qz`), subagent and notification ids (`a1b2c3d4e`, `n1b2c3d4e`), eight hex digits
//!   mixing letters and digits (cron jobs), and plan file names (`plans/brave-otter-moon.md`).
//!
//! The ids are also returned in order, so that when two requests are equal once normalised, each id
//! of the recording can be paired with this run's (a task id the model repeats in a later call is
//! then replayed as this run's).

use std::sync::LazyLock;

use regex::{Captures, Regex};
use serde_json::Value;

use super::format::RunPaths;

/// Placeholders for the three directories, in the order they are tried (a share dir inside home).
const WORK_DIR: &str = "${WORK_DIR}";
const SHARE_DIR: &str = "${SHARE_DIR}";
const HOME: &str = "${HOME}";

#[expect(
    clippy::expect_used,
    reason = "a constant pattern: any mistake fails every cassette test"
)]
static PATTERNS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"(?P<uuid>\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b)",
        r"|(?P<time>\b[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(?::[0-9]{2}(?:\.[0-9]+)?)?(?:Z|[+-][0-9]{2}:?[0-9]{2})?)",
        r"|(?P<date>\b[0-9]{4}-[0-9]{2}-[0-9]{2}\b)",
        r"|(?P<hex32>\b[0-9a-f]{32}\b)",
        r"|(?P<task>\b(?:bash|agent)-[a-z0-9]{8}\b)",
        r"|/plans/(?P<plan>[a-z]+-[a-z]+-[a-z]+)\.md",
        r"|(?P<short>\b[an]?[0-9a-f]{8}\b)",
    ))
    .expect("valid pattern")
});

/// Normalises strings for one run's paths.
#[derive(Debug, Clone)]
pub struct Normalizer {
    /// `(path, placeholder)`, longest path first; empty paths left out.
    paths: Vec<(String, &'static str)>,
}

impl Normalizer {
    /// For a run in `paths`.
    pub fn new(paths: &RunPaths) -> Self {
        let mut list: Vec<(String, &'static str)> = [
            (&paths.work_dir, WORK_DIR),
            (&paths.share_dir, SHARE_DIR),
            (&paths.home, HOME),
        ]
        .into_iter()
        .filter(|(path, _)| path.len() > 1)
        .map(|(path, placeholder)| (path.trim_end_matches('/').to_owned(), placeholder))
        .collect();
        list.sort_by_key(|entry| std::cmp::Reverse(entry.0.len()));
        Self { paths: list }
    }

    /// A normalised copy of `value` and the made-up ids it held, in order of appearance.
    pub fn normalize(&self, value: &Value) -> (Value, Vec<String>) {
        let mut ids = Vec::new();
        let normalized = map_strings(value, &mut |text| self.normalize_text(text, &mut ids));
        (normalized, ids)
    }

    fn normalize_text(&self, text: &str, ids: &mut Vec<String>) -> String {
        let text = self.hide_paths(text);
        PATTERNS
            .replace_all(&text, |caps: &Captures<'_>| {
                let whole = &caps[0];
                if caps.name("time").is_some() {
                    return "<time>".to_owned();
                }
                if caps.name("date").is_some() {
                    return "<date>".to_owned();
                }
                if let Some(plan) = caps.name("plan") {
                    ids.push(plan.as_str().to_owned());
                    return "/plans/<id>.md".to_owned();
                }
                if caps.name("short").is_some() && !is_made_up(whole) {
                    return whole.to_owned();
                }
                ids.push(whole.to_owned());
                "<id>".to_owned()
            })
            .into_owned()
    }

    /// `text` with this run's directories replaced by their placeholders.
    pub fn hide_paths(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (path, placeholder) in &self.paths {
            text = replace_path(&text, path, placeholder);
        }
        text
    }

    /// `text` with the placeholders replaced by this run's directories.
    pub fn show_paths(&self, text: &str) -> String {
        let mut text = text.to_owned();
        for (path, placeholder) in &self.paths {
            text = text.replace(placeholder, path);
        }
        text
    }
}

/// Eight hex digits are an id only when they mix letters and digits (`1a2b3c4d`), so numbers and
/// words (`20261130`, `deadbeef`) stay; with an `a`/`n` prefix (subagents, notifications) always.
fn is_made_up(token: &str) -> bool {
    if token.len() == 9 {
        return true;
    }
    token.bytes().any(|b| b.is_ascii_digit()) && token.bytes().any(|b| b.is_ascii_alphabetic())
}

/// Replaces `path` where a whole path ends (the end, `/`, or a character no path name would
/// continue with), so `/tmp/work` is not found in `/tmp/workspace` or `/tmp/work.bak`.
fn replace_path(text: &str, path: &str, placeholder: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(path) {
        let after = &rest[at + path.len()..];
        let name_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-');
        let mut next = after.chars();
        let ends = match next.next() {
            None => true,
            // `/tmp/work.bak` goes on; `in /tmp/work.` ends a sentence.
            Some('.') => !next.next().is_some_and(name_char),
            Some(c) => !name_char(c),
        };
        out.push_str(&rest[..at]);
        out.push_str(if ends { placeholder } else { path });
        rest = after;
    }
    out.push_str(rest);
    out
}

/// A copy of `value` with `f` applied to every string (object keys left alone).
pub fn map_strings(value: &Value, f: &mut impl FnMut(&str) -> String) -> Value {
    match value {
        Value::String(text) => Value::String(f(text)),
        Value::Array(items) => Value::Array(items.iter().map(|v| map_strings(v, f)).collect()),
        Value::Object(map) => {
            Value::Object(map.iter().map(|(k, v)| (k.clone(), map_strings(v, f))).collect())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    fn here() -> Normalizer {
        Normalizer::new(&RunPaths {
            work_dir: "/tmp/a/work".into(),
            share_dir: "/tmp/a/home/.kimi".into(),
            home: "/tmp/a/home".into(),
        })
    }

    #[test]
    fn paths_times_and_made_up_ids_are_taken_out() {
        let text = "cwd /tmp/a/work/src, not /tmp/a/workspace nor /tmp/a/work.bak but /tmp/a/work. plan /tmp/a/home/.kimi/plans/brave-otter-moon.md; \
                    rc ~ /tmp/a/home/.bashrc; now 2026-11-30T12:34:56.123456789+01:00 (2026-11-30 12:34, on 2026-11-30); \
                    session 3f2b1c4e-5d6a-4b7c-8d9e-0f1a2b3c4d5e; task bash-k3x9a0qz; agent a1b2c3d4e; job 1a2b3c4d; \
                    kept: 20261130 deadbeef abcdefgh";
        let (normalized, ids) = here().normalize(&json!({"text": text, "n": 1}));
        assert_eq!(
            normalized,
            json!({"text": "cwd ${WORK_DIR}/src, not /tmp/a/workspace nor /tmp/a/work.bak but ${WORK_DIR}. plan ${SHARE_DIR}/plans/<id>.md; \
                    rc ~ ${HOME}/.bashrc; now <time> (<time>, on <date>); \
                    session <id>; task <id>; agent <id>; job <id>; \
                    kept: 20261130 deadbeef abcdefgh", "n": 1})
        );
        assert_eq!(
            ids,
            [
                "brave-otter-moon",
                "3f2b1c4e-5d6a-4b7c-8d9e-0f1a2b3c4d5e",
                "bash-k3x9a0qz",
                "a1b2c3d4e",
                "1a2b3c4d"
            ]
        );
    }

    #[test]
    fn paths_go_back_to_this_runs() {
        let there = Normalizer::new(&RunPaths {
            work_dir: "/srv/ci/checkout".into(),
            share_dir: String::new(),
            home: "/home/ci".into(),
        });
        let hidden = there.hide_paths("/srv/ci/checkout/notes.txt and /home/ci/x");
        assert_eq!(hidden, "${WORK_DIR}/notes.txt and ${HOME}/x");
        assert_eq!(
            here().show_paths(&hidden),
            "/tmp/a/work/notes.txt and /tmp/a/home/x"
        );
    }
}
