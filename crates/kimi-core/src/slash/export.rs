//! `/export [path]` writes the conversation to a Markdown file; `/import <file or session id>` brings a
//! text file or another session's conversation into the context (reference `utils/export.py`). The
//! texts the user sees are the reference's; the Markdown layout follows it too.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use kimi_llm::{Message, Role};
use kimi_wire::message::{ContentPart, ToolCall};
use serde_json::Value;

use crate::context::{Context, estimate_tokens};
use crate::soul::{CommandContext, TurnError, system};
use crate::text::shorten;

/// Largest file or session `/import` takes (reference: 10 MB).
const MAX_IMPORT_BYTES: u64 = 10 * 1024 * 1024;

/// Argument keys whose value makes a good one-line hint for a tool call.
const HINT_KEYS: [&str; 7] = ["path", "file_path", "command", "query", "url", "name", "pattern"];

/// Extensions `/import` reads (text only); a file without an extension is accepted too.
const IMPORTABLE: &[&str] = &[
    "md",
    "markdown",
    "txt",
    "text",
    "rst",
    "json",
    "jsonl",
    "yaml",
    "yml",
    "toml",
    "ini",
    "cfg",
    "conf",
    "csv",
    "tsv",
    "xml",
    "env",
    "properties",
    "py",
    "js",
    "ts",
    "jsx",
    "tsx",
    "java",
    "kt",
    "go",
    "rs",
    "c",
    "cpp",
    "h",
    "hpp",
    "cs",
    "rb",
    "php",
    "swift",
    "scala",
    "sh",
    "bash",
    "zsh",
    "fish",
    "ps1",
    "bat",
    "cmd",
    "r",
    "lua",
    "pl",
    "pm",
    "ex",
    "exs",
    "erl",
    "hs",
    "ml",
    "sql",
    "graphql",
    "proto",
    "html",
    "htm",
    "css",
    "scss",
    "sass",
    "less",
    "svg",
    "log",
    "tex",
    "bib",
    "org",
    "adoc",
    "wiki",
];

/// Name fragments of files that may hold secrets.
const SENSITIVE: [&str; 8] = [
    ".env",
    "credentials",
    "secrets",
    ".pem",
    ".key",
    ".p12",
    ".pfx",
    ".keystore",
];

/// Runs `/export`.
pub(super) async fn export_command(cx: &CommandContext<'_>, args: &str) {
    let Some(session) = cx.session() else {
        cx.say("No messages to export.").await;
        return;
    };
    let (markdown, count) = {
        let context = cx.conversation().await;
        if context.messages().is_empty() {
            drop(context);
            cx.say("No messages to export.").await;
            return;
        }
        let now = chrono::Local::now();
        let markdown = export_markdown(
            &session.id,
            &session.work_dir,
            context.messages(),
            context.token_count(),
            &now.to_rfc3339_opts(chrono::SecondsFormat::Secs, false),
        );
        (markdown, context.messages().len())
    };
    let short_id: String = session.id.chars().take(8).collect();
    let file_name = format!(
        "kimi-export-{short_id}-{}.md",
        chrono::Local::now().format("%Y%m%d-%H%M%S")
    );
    let output = export_target(unquote(args), &session.work_dir, &file_name);
    let written = output
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&output, markdown));
    if let Err(e) = written {
        cx.say(&format!("Failed to write export file: {e}")).await;
        return;
    }
    cx.say(&format!("Exported {count} messages to {}", shorten_home(&output)))
        .await;
    cx.say("  Note: The exported file may contain sensitive information. Please be cautious when sharing it externally.")
            .await;
}

/// Runs `/import`.
pub(super) async fn import_command(cx: &CommandContext<'_>, args: &str) -> Result<(), TurnError> {
    let target = unquote(args);
    if target.is_empty() {
        cx.say("Usage: /import <file_path or session_id>").await;
        return Ok(());
    }
    let Some(session) = cx.session() else {
        cx.say(&format!("'{target}' is not a valid file path or session ID."))
            .await;
        return Ok(());
    };
    let (content, source) =
        match import_source(target, &session.id, &session.work_dir, &session.share_dir).await {
            Ok(found) => found,
            Err(message) => {
                cx.say(&message).await;
                return Ok(());
            }
        };
    let message = Message::user(vec![
        system(&format!(
            "The user imported earlier conversation or notes from {source}. Treat it as background for this session and use what is relevant."
        )),
        ContentPart::text(format!(
            "<imported_context source=\"{source}\">\n{content}\n</imported_context>"
        )),
    ]);
    let estimated = estimate_tokens(std::slice::from_ref(&message));
    {
        let mut context = cx.conversation().await;
        let current = context.token_count();
        let limit = cx.max_context_size();
        if limit > 0 && current + estimated > limit {
            drop(context);
            cx.say(&format!(
                    "Imported content is too large for the current model context (~{} import tokens + {} existing = ~{} total > {} token limit). Please import a smaller file or session.",
                    thousands(estimated),
                    thousands(current),
                    thousands(current + estimated),
                    thousands(limit)
                ))
                .await;
            return Ok(());
        }
        context.append(message)?;
        context.update_token_count(current + estimated)?;
    }
    cx.say(&format!(
        "Imported context from {source} ({} chars).",
        content.chars().count()
    ))
    .await;
    let file_name = Path::new(target)
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    if source.starts_with("file") && SENSITIVE.iter().any(|s| file_name.contains(s)) {
        cx.say("Warning: This file may contain secrets (API keys, tokens, credentials). The content is now part of your session context.")
                .await;
    }
    Ok(())
}

/// Strips one pair of matching outer quotes (a path dragged into a terminal), and surrounding spaces.
pub(super) fn unquote(raw: &str) -> &str {
    let raw = raw.trim();
    let quoted = raw.len() >= 2
        && ((raw.starts_with('\'') && raw.ends_with('\'')) || (raw.starts_with('"') && raw.ends_with('"')));
    if quoted { &raw[1..raw.len() - 1] } else { raw }
}

pub(super) fn expand_home(raw: &str) -> PathBuf {
    match (raw, crate::paths::home_dir()) {
        ("~", Some(home)) => home,
        (r, Some(home)) if r.starts_with("~/") => home.join(&r[2..]),
        _ => PathBuf::from(raw),
    }
}

/// Where `/export` writes: the work dir by default; a given path, relative to the work dir; a
/// directory (existing, or written with a trailing slash) gets the default file name inside it.
fn export_target(arg: &str, work_dir: &Path, file_name: &str) -> PathBuf {
    if arg.is_empty() {
        return work_dir.join(file_name);
    }
    let mut output = expand_home(arg);
    if !output.is_absolute() {
        output = work_dir.join(output);
    }
    if arg.ends_with(['/', '\\']) || output.is_dir() {
        output.join(file_name)
    } else {
        output
    }
}

/// `~/...` for paths under the home directory.
fn shorten_home(path: &Path) -> String {
    match crate::paths::home_dir().and_then(|home| path.strip_prefix(&home).ok().map(Path::to_path_buf)) {
        Some(rest) => Path::new("~").join(rest).display().to_string(),
        None => path.display().to_string(),
    }
}

/// `1234567` → `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Whether a user message is bookkeeping (a system reminder, a notification, a checkpoint marker)
/// rather than something the user said.
fn is_internal(message: &Message) -> bool {
    if message.role != Role::User || message.content.len() != 1 {
        return false;
    }
    let ContentPart::Text(part) = &message.content[0] else {
        return false;
    };
    let text = part.text.trim_start();
    text.starts_with("<system-reminder>")
        || text.starts_with("<notification ")
        || text.starts_with("<system>CHECKPOINT")
}

/// A short hint for a tool call: a well-known argument, else the first short string argument.
fn call_hint(arguments: Option<&str>) -> String {
    let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments.unwrap_or("{}")) else {
        return String::new();
    };
    let known = HINT_KEYS
        .iter()
        .filter_map(|k| args.get(*k).and_then(Value::as_str))
        .find(|v| !v.trim().is_empty());
    let fallback = || {
        args.values()
            .filter_map(Value::as_str)
            .find(|v| !v.is_empty() && v.chars().count() <= 80)
    };
    known
        .or_else(fallback)
        .map(|v| shorten(v, 60))
        .unwrap_or_default()
}

/// One content part as Markdown.
fn part_markdown(part: &ContentPart) -> String {
    match part {
        ContentPart::Text(t) => t.text.clone(),
        ContentPart::Think(t) if t.think.trim().is_empty() => String::new(),
        ContentPart::Think(t) => format!(
            "<details><summary>Thinking</summary>\n\n{}\n\n</details>",
            t.think
        ),
        ContentPart::ImageUrl(_) => "[image]".to_owned(),
        ContentPart::AudioUrl(_) => "[audio]".to_owned(),
        ContentPart::VideoUrl(_) => "[video]".to_owned(),
    }
}

fn call_markdown(call: &ToolCall) -> String {
    let raw = call.function.arguments.as_deref().unwrap_or("{}");
    let hint = call_hint(Some(raw));
    let mut title = format!("#### Tool Call: {}", call.function.name);
    if !hint.is_empty() {
        let _ = write!(title, " (`{hint}`)");
    }
    let pretty = serde_json::from_str::<Value>(raw)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| raw.to_owned());
    format!("{title}\n<!-- call_id: {} -->\n```json\n{pretty}\n```", call.id)
}

/// The export document: front matter, an overview, then one section per turn (a turn starts at each
/// real user message).
fn export_markdown(
    session_id: &str,
    work_dir: &Path,
    history: &[Message],
    token_count: u64,
    now: &str,
) -> String {
    let mut turns: Vec<Vec<&Message>> = Vec::new();
    for message in history.iter().filter(|m| !is_internal(m)) {
        if message.role == Role::User || turns.is_empty() {
            turns.push(Vec::new());
        }
        if let Some(turn) = turns.last_mut() {
            turn.push(message);
        }
    }
    let topic = history
        .iter()
        .find(|m| m.role == Role::User && !is_internal(m))
        .map(|m| shorten(&stringify_plain(m), 80))
        .unwrap_or_default();
    let calls: usize = history.iter().map(|m| m.tool_calls.len()).sum();
    let mut lines = vec![
        "---".to_owned(),
        format!("session_id: {session_id}"),
        format!("exported_at: {now}"),
        format!("work_dir: {}", work_dir.display()),
        format!("message_count: {}", history.len()),
        format!("token_count: {token_count}"),
        "---".to_owned(),
        String::new(),
        "# Kimi Session Export".to_owned(),
        String::new(),
        "## Overview".to_owned(),
        String::new(),
        if topic.is_empty() {
            "- **Topic**: (empty)".to_owned()
        } else {
            format!("- **Topic**: {topic}")
        },
        format!(
            "- **Conversation**: {} turns | {calls} tool calls | {} tokens",
            turns.len(),
            thousands(token_count)
        ),
        String::new(),
        "---".to_owned(),
        String::new(),
    ];
    for (index, turn) in turns.iter().enumerate() {
        lines.push(turn_markdown(turn, index + 1));
    }
    lines.join("\n")
}

fn turn_markdown(messages: &[&Message], number: usize) -> String {
    let mut lines = vec![format!("## Turn {number}"), String::new()];
    let mut calls: Vec<(&str, &str, String)> = Vec::new();
    let mut assistant_heading = false;
    let push_parts = |lines: &mut Vec<String>, message: &Message| {
        for part in &message.content {
            let text = part_markdown(part);
            if !text.trim().is_empty() {
                lines.push(text);
                lines.push(String::new());
            }
        }
    };
    for message in messages {
        match message.role {
            Role::User => {
                lines.push("### User".to_owned());
                lines.push(String::new());
                push_parts(&mut lines, message);
            }
            Role::Assistant => {
                if !assistant_heading {
                    lines.push("### Assistant".to_owned());
                    lines.push(String::new());
                    assistant_heading = true;
                }
                push_parts(&mut lines, message);
                for call in &message.tool_calls {
                    calls.push((
                        &call.id,
                        &call.function.name,
                        call_hint(call.function.arguments.as_deref()),
                    ));
                    lines.push(call_markdown(call));
                    lines.push(String::new());
                }
            }
            Role::Tool => {
                let id = message.tool_call_id.as_deref().unwrap_or("");
                let (name, hint) = calls
                    .iter()
                    .find(|(call_id, ..)| *call_id == id)
                    .map_or(("unknown", ""), |(_, name, hint)| (*name, hint.as_str()));
                let result: Vec<String> = message
                    .content
                    .iter()
                    .map(part_markdown)
                    .filter(|t| !t.trim().is_empty())
                    .collect();
                let mut summary = format!("Tool Result: {name}");
                if !hint.is_empty() {
                    let _ = write!(summary, " (`{hint}`)");
                }
                let call_id = message.tool_call_id.as_deref().unwrap_or("unknown");
                lines.push(format!(
                    "<details><summary>{summary}</summary>\n\n<!-- call_id: {call_id} -->\n{}\n\n</details>",
                    result.join("\n")
                ));
                lines.push(String::new());
            }
            Role::System => {
                lines.push("### System".to_owned());
                lines.push(String::new());
                push_parts(&mut lines, message);
            }
        }
    }
    lines.join("\n")
}

/// Text parts as they are, media as placeholders (reference `message_stringify`).
fn stringify_plain(message: &Message) -> String {
    message
        .content
        .iter()
        .map(|part| match part {
            ContentPart::Text(t) => t.text.clone(),
            ContentPart::Think(_) => "[think]".to_owned(),
            ContentPart::ImageUrl(_) => "[image]".to_owned(),
            ContentPart::AudioUrl(a) => match &a.audio_url.id {
                Some(id) => format!("[audio:{id}]"),
                None => "[audio]".to_owned(),
            },
            ContentPart::VideoUrl(_) => "[video]".to_owned(),
        })
        .collect()
}

/// A conversation as plain text for `/import`: role headers, thinking, tool calls and results.
fn transcript(history: &[Message]) -> String {
    let mut blocks = Vec::new();
    for message in history.iter().filter(|m| !is_internal(m)) {
        let mut segments = Vec::new();
        let content: Vec<String> = message
            .content
            .iter()
            .filter_map(|part| match part {
                ContentPart::Text(t) if t.text.trim().is_empty() => None,
                ContentPart::Text(t) => Some(t.text.clone()),
                ContentPart::Think(t) if t.think.trim().is_empty() => None,
                ContentPart::Think(t) => Some(format!("<thinking>\n{}\n</thinking>", t.think)),
                other => Some(part_markdown(other)),
            })
            .collect();
        if !content.is_empty() {
            segments.push(content.join("\n"));
        }
        if !message.tool_calls.is_empty() {
            let calls: Vec<String> = message
                .tool_calls
                .iter()
                .map(|call| {
                    let raw = call.function.arguments.as_deref().unwrap_or("{}");
                    let args =
                        serde_json::from_str::<Value>(raw).map_or_else(|_| raw.to_owned(), |v| v.to_string());
                    format!("Tool Call: {}({args})", call.function.name)
                })
                .collect();
            segments.push(calls.join("\n"));
        }
        if segments.is_empty() {
            continue;
        }
        let role = message.role.as_str().to_uppercase();
        let header = match (&message.role, &message.tool_call_id) {
            (Role::Tool, Some(id)) => format!("[{role}] (call_id: {id})"),
            _ => format!("[{role}]"),
        };
        blocks.push(format!("{header}\n{}", segments.join("\n")));
    }
    blocks.join("\n\n")
}

fn megabytes(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1024.0 / 1024.0)
}

/// What `/import` reads: a text file (relative to the work dir) or, failing that, a session of this
/// work dir by id. `Err` carries the message for the user.
async fn import_source(
    target: &str,
    current_session: &str,
    work_dir: &Path,
    share_dir: &Path,
) -> Result<(String, String), String> {
    let mut path = expand_home(target);
    if !path.is_absolute() {
        path = work_dir.join(path);
    }
    if path.is_dir() {
        return Err("The specified path is a directory; please provide a file to import.".to_owned());
    }
    if path.is_file() {
        return read_import_file(&path);
    }
    if target == current_session {
        return Err("Cannot import the current session into itself.".to_owned());
    }
    let plain_id =
        !target.is_empty() && target != "." && target != ".." && !target.contains(['/', '\\', '\0']);
    let context_file = crate::paths::work_dir_sessions_dir(share_dir, work_dir)
        .join(target)
        .join("context.jsonl");
    if !plain_id || !context_file.is_file() {
        return Err(format!("'{target}' is not a valid file path or session ID."));
    }
    let context = match Context::read_only(&context_file).await {
        Ok(Some(context)) if !context.messages().is_empty() => context,
        Ok(_) => return Err("The source session has no messages.".to_owned()),
        Err(e) => return Err(format!("Failed to load source session: {e}")),
    };
    let content = transcript(context.messages());
    let bytes = content.len() as u64;
    if bytes > MAX_IMPORT_BYTES {
        return Err(format!(
            "Session content is too large ({} MB). Maximum import size is {} MB.",
            megabytes(bytes),
            MAX_IMPORT_BYTES / 1024 / 1024
        ));
    }
    Ok((content, format!("session '{target}'")))
}

fn read_import_file(path: &Path) -> Result<(String, String), String> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Python's `suffix`: the text after the last dot of the name, unless the name starts with it.
    let suffix = match name.rfind('.') {
        Some(dot) if dot > 0 => &name[dot..],
        _ => "",
    };
    let extension = suffix.trim_start_matches('.');
    let importable = extension.is_empty() || IMPORTABLE.contains(&extension.to_lowercase().as_str());
    if !importable {
        return Err(format!(
            "Unsupported file type '{suffix}'. /import only supports text-based files (e.g. .md, .txt, .json, .py, .log, \u{2026})."
        ));
    }
    let size = std::fs::metadata(path)
        .map_err(|e| format!("Failed to read file: {e}"))?
        .len();
    if size > MAX_IMPORT_BYTES {
        return Err(format!(
            "File is too large ({} MB). Maximum import size is {} MB.",
            megabytes(size),
            MAX_IMPORT_BYTES / 1024 / 1024
        ));
    }
    let bytes = std::fs::read(path).map_err(|e| format!("Failed to read file: {e}"))?;
    let Ok(content) = String::from_utf8(bytes) else {
        return Err(format!(
            "Cannot import '{name}': the file does not appear to be valid UTF-8 text."
        ));
    };
    if content.trim().is_empty() {
        return Err("The file is empty, nothing to import.".to_owned());
    }
    Ok((content, format!("file '{name}'")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kimi_wire::message::FunctionBody;
    use pretty_assertions::assert_eq;

    fn call(id: &str, name: &str, args: &str) -> ToolCall {
        ToolCall {
            r#type: "function".into(),
            id: id.into(),
            function: FunctionBody {
                name: name.into(),
                arguments: Some(args.into()),
            },
            extras: None,
        }
    }

    fn history() -> Vec<Message> {
        vec![
            Message::user_text("List   the\nfiles"),
            Message::assistant(
                vec![ContentPart::think("hmm"), ContentPart::text("Looking.")],
                vec![call("tc-1", "Shell", "{\"command\":\"ls\"}")],
            ),
            Message::tool("tc-1", vec![ContentPart::text("a.txt")]),
            Message::user_text("<system-reminder>internal</system-reminder>"),
            Message::assistant(vec![ContentPart::text("One file.")], Vec::new()),
        ]
    }

    #[test]
    fn export_markdown_has_front_matter_overview_and_turns() {
        let md = export_markdown(
            "abc",
            Path::new("/w"),
            &history(),
            1234,
            "2026-01-02T03:04:05+00:00",
        );
        let expected = "---\nsession_id: abc\nexported_at: 2026-01-02T03:04:05+00:00\nwork_dir: /w\nmessage_count: 5\ntoken_count: 1234\n---\n\n# Kimi Session Export\n\n## Overview\n\n- **Topic**: List the files\n- **Conversation**: 1 turns | 1 tool calls | 1,234 tokens\n\n---\n\n## Turn 1\n\n### User\n\nList   the\nfiles\n\n### Assistant\n\n<details><summary>Thinking</summary>\n\nhmm\n\n</details>\n\nLooking.\n\n#### Tool Call: Shell (`ls`)\n<!-- call_id: tc-1 -->\n```json\n{\n  \"command\": \"ls\"\n}\n```\n\n<details><summary>Tool Result: Shell (`ls`)</summary>\n\n<!-- call_id: tc-1 -->\na.txt\n\n</details>\n\nOne file.\n";
        assert_eq!(md, expected);
    }

    #[test]
    fn transcripts_keep_roles_calls_and_thinking() {
        assert_eq!(
            transcript(&history()),
            "[USER]\nList   the\nfiles\n\n[ASSISTANT]\n<thinking>\nhmm\n</thinking>\nLooking.\nTool Call: Shell({\"command\":\"ls\"})\n\n[TOOL] (call_id: tc-1)\na.txt\n\n[ASSISTANT]\nOne file."
        );
    }

    #[test]
    fn helpers() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(unquote(" '/a b/c' "), "/a b/c");
        assert_eq!(unquote("\"x"), "\"x");
        assert_eq!(call_hint(Some("{\"flag\": true, \"text\": \"hi\"}")), "hi");
        assert_eq!(call_hint(Some("not json")), "");
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(export_target("", dir.path(), "f.md"), dir.path().join("f.md"));
        assert_eq!(
            export_target("out/", dir.path(), "f.md"),
            dir.path().join("out/f.md")
        );
        assert_eq!(export_target("x.md", dir.path(), "f.md"), dir.path().join("x.md"));
        assert_eq!(
            export_target(".", dir.path(), "f.md"),
            dir.path().join(".").join("f.md")
        );
    }

    #[test]
    fn import_files_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            p
        };
        assert_eq!(
            read_import_file(&write("a.png", b"x")).unwrap_err(),
            "Unsupported file type '.png'. /import only supports text-based files (e.g. .md, .txt, .json, .py, .log, \u{2026})."
        );
        assert_eq!(
            read_import_file(&write("empty.md", b" \n")).unwrap_err(),
            "The file is empty, nothing to import."
        );
        assert_eq!(
            read_import_file(&write("bin.txt", b"\xff\xfe")).unwrap_err(),
            "Cannot import 'bin.txt': the file does not appear to be valid UTF-8 text."
        );
        assert_eq!(
            read_import_file(&write("Makefile", b"all:\n")).unwrap(),
            ("all:\n".to_owned(), "file 'Makefile'".to_owned())
        );
        assert_eq!(read_import_file(&write(".env", b"K=v")).unwrap().1, "file '.env'");
    }
}
