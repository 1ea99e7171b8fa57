//! Crash safety (issue 4): the binary is killed with SIGKILL at random points of a running turn, over and
//! over, and each time the next start with `--session` must open the session, `replay` exactly what the
//! files hold, find both files whole (every line one JSON object), and have lost at most the record that
//! was being written when the kill came.
//!
//! A SIGKILL cannot tear a write, so between some kills the test also damages the files the way a power
//! loss or a dying writer would (a record cut short, a half-written record appended, NUL padding) and
//! checks that the restart repairs them instead of gluing its next record onto the damage.
//!
//! `KIMI_CRASH_ITERATIONS` sets the number of kills (default [`DEFAULT_ITERATIONS`]: about 30 s in a debug
//! build on the project's loaded 2-core machine; seeds 1, 2, 3 and the default each passed 200 kills),
//! `KIMI_CRASH_SEED` the seed of the random kill points and damage (in every failure message, so a
//! failure can be replayed). A new session is started every [`KILLS_PER_SESSION`] kills, so each check,
//! which parses both files whole, stays cheap.

use anyhow::{Context, Result, bail, ensure};
use serde_json::{Value, json};

use crate::common::{Rng, TestHome, WireProcess, tool_call_line};

const DEFAULT_ITERATIONS: u64 = 200;
const DEFAULT_SEED: u64 = 0x5eed_4b1d;
/// Kills per session before the test moves on to a new one.
const KILLS_PER_SESSION: u64 = 10;

fn env_u64(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .with_context(|| format!("{name}={value} is not a number")),
        Err(_) => Ok(default),
    }
}

/// A three-step turn: streamed text and thinking, SetTodoList, a Shell call whose arguments arrive in
/// parts, and a closing text.
fn turn_scripts() -> Vec<String> {
    let todos =
        json!({"todos": [{"title": "look", "status": "done"}, {"title": "fix", "status": "in_progress"}]});
    vec![
        format!(
            "text: Let me\ntext:  plan this.\nthink: first the list\nthink: , then the shell\n{}",
            tool_call_line("tc-todo", "SetTodoList", Some(&todos.to_string()))
        ),
        format!(
            "text: Running it.\n{}\ntool_call_part: {{\"arguments_part\": \"{{\\\"command\\\": \"}}\n\
             tool_call_part: {{\"arguments_part\": \"\\\"true\\\"}}\"}}",
            tool_call_line("tc-shell", "Shell", None)
        ),
        "text: All\ntext:  done\ntext: .".to_owned(),
    ]
}

/// The complete lines of a session file, each parsed; fails on a line that is not one JSON object.
fn whole_lines(path: &std::path::Path) -> Result<Vec<(String, Value)>> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let text = String::from_utf8(bytes).with_context(|| format!("{} is not UTF-8", path.display()))?;
    ensure!(
        text.is_empty() || text.ends_with('\n'),
        "{} does not end with a newline: {:?}",
        path.display(),
        &text[text.len().saturating_sub(200)..]
    );
    text.lines()
        .map(|line| {
            let value: Value = serde_json::from_str(line)
                .with_context(|| format!("{}: a line is not JSON: {line:?}", path.display()))?;
            ensure!(value.is_object(), "{}: not an object: {line}", path.display());
            Ok((line.to_owned(), value))
        })
        .collect()
}

/// The `message`s of wire.jsonl records (the header and any other line without one left out).
fn messages_of(lines: &[(String, Value)]) -> Vec<Value> {
    lines
        .iter()
        .filter_map(|(_, value)| value.get("message").cloned())
        .collect()
}

/// Merges streamed messages the way the recorder stores them: consecutive text parts joined, think
/// parts joined until one carries `encrypted`, tool-call parts folded into their call's arguments.
fn merge(messages: &[Value]) -> Vec<Value> {
    let mut merged: Vec<Value> = Vec::new();
    for message in messages {
        if let Some(last) = merged.last_mut() {
            let (a, b) = (&last["payload"], &message["payload"]);
            let kinds = (last["type"].as_str(), message["type"].as_str());
            match kinds {
                (Some("ContentPart"), Some("ContentPart")) if a["type"] == "text" && b["type"] == "text" => {
                    let text = format!(
                        "{}{}",
                        a["text"].as_str().unwrap_or(""),
                        b["text"].as_str().unwrap_or("")
                    );
                    last["payload"]["text"] = json!(text);
                    continue;
                }
                (Some("ContentPart"), Some("ContentPart"))
                    if a["type"] == "think" && b["type"] == "think" && a["encrypted"].is_null() =>
                {
                    let think = format!(
                        "{}{}",
                        a["think"].as_str().unwrap_or(""),
                        b["think"].as_str().unwrap_or("")
                    );
                    last["payload"]["think"] = json!(think);
                    last["payload"]["encrypted"] = b["encrypted"].clone();
                    continue;
                }
                (Some("ToolCall"), Some("ToolCallPart")) => {
                    if let Some(piece) = b["arguments_part"].as_str() {
                        let args = format!("{}{piece}", a["function"]["arguments"].as_str().unwrap_or(""));
                        last["payload"]["function"]["arguments"] = json!(args);
                    }
                    continue;
                }
                _ => {}
            }
        }
        merged.push(message.clone());
    }
    merged
}

/// Whether `recorded` is `seen` or a later state of it (more text or arguments merged in).
fn extends(recorded: &Value, seen: &Value) -> bool {
    if recorded == seen {
        return true;
    }
    let starts = |field: &[&str]| {
        let get = |v: &Value| {
            field
                .iter()
                .fold(v.get("payload"), |v, key| v.and_then(|v| v.get(key)))
                .and_then(Value::as_str)
                .map(str::to_owned)
        };
        match (get(recorded), get(seen)) {
            (Some(r), Some(s)) => r.starts_with(&s),
            (Some(_), None) => true,
            _ => false,
        }
    };
    recorded["type"] == seen["type"]
        && match seen["type"].as_str() {
            Some("ContentPart") => starts(&["text"]) || starts(&["think"]),
            Some("ToolCall") => {
                recorded["payload"]["id"] == seen["payload"]["id"] && starts(&["function", "arguments"])
            }
            _ => false,
        }
}

/// Damage a crash of another kind could leave at the end of a file.
#[derive(Debug, Clone, Copy)]
enum Damage {
    None,
    /// The last line is cut short (its newline and some bytes gone).
    CutLast,
    /// Half a record is appended, without newline.
    TornAppend,
    /// A run of NUL bytes is appended.
    NulPadding,
}

impl Damage {
    fn pick(rng: &mut Rng) -> Self {
        match rng.below(6) {
            0 => Self::CutLast,
            1 => Self::TornAppend,
            2 => Self::NulPadding,
            _ => Self::None,
        }
    }

    /// Applies the damage; returns how many whole lines at the end are lost by it (0 or 1).
    fn apply(self, path: &std::path::Path, rng: &mut Rng) -> Result<usize> {
        use std::io::Write;
        let len = match std::fs::metadata(path) {
            Ok(meta) => meta.len(),
            Err(_) => return Ok(0),
        };
        match self {
            Self::None => Ok(0),
            Self::CutLast => {
                let bytes = std::fs::read(path)?;
                if bytes.len() < 2 {
                    return Ok(0);
                }
                // Somewhere inside the last line: at least its newline goes, at most all but one byte.
                let start = bytes[..bytes.len() - 1]
                    .iter()
                    .rposition(|&b| b == b'\n')
                    .map_or(0, |i| i + 1) as u64;
                let keep = start + 1 + rng.below((len - start - 1).max(1));
                std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)?
                    .set_len(keep)?;
                // A record that lost only its newline is still whole: the restart completes it.
                Ok(usize::from(keep + 1 < len))
            }
            Self::TornAppend => {
                let record = r#"{"timestamp": 1.0, "message": {"type": "ContentPart", "payload": {"type": "text", "te"#;
                let cut = 1 + rng.below(record.len() as u64 - 1) as usize;
                let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
                file.write_all(&record.as_bytes()[..cut])?;
                Ok(0)
            }
            Self::NulPadding => {
                let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
                file.write_all(&vec![0u8; 1 + rng.below(8192) as usize])?;
                Ok(0)
            }
        }
    }
}

/// What the files held after the last kill, minus what the injected damage destroyed: the next start
/// must replay exactly `wire` and keep `context` as the start of its context.jsonl.
struct Expected {
    wire_messages: Vec<Value>,
    context_lines: Vec<String>,
}

#[tokio::test]
async fn sigkill_at_random_points_of_a_turn_loses_at_most_the_record_being_written() -> Result<()> {
    let iterations = env_u64("KIMI_CRASH_ITERATIONS", DEFAULT_ITERATIONS)?;
    let seed = env_u64("KIMI_CRASH_SEED", DEFAULT_SEED)?;
    let scripts = turn_scripts();
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let home = TestHome::new()?.scripted(&scripts)?;
    let mut rng = Rng(seed);
    let mut damaged = 0;
    let mut done = 0;
    // A fresh session every few kills keeps each restart's checks (which parse whole files) cheap.
    for group in 0.. {
        if done >= iterations {
            break;
        }
        let kills = KILLS_PER_SESSION.min(iterations - done);
        let session = format!("crash-{group}");
        damaged += crash_one_session(&home, &session, kills, &mut rng)
            .await
            .with_context(|| format!("session {session}, KIMI_CRASH_SEED={seed}"))?;
        done += kills;
    }
    note(&format!(
        "crash test: {iterations} kills (seed {seed}), {damaged} followed by injected wire.jsonl damage"
    ));
    Ok(())
}

/// Runs one whole turn in `session`, then `kills` turns each killed at a random point, checking every
/// restart; at the end the session must still replay and run a whole turn. Returns how many kills were
/// followed by injected wire.jsonl damage.
async fn crash_one_session(home: &TestHome, session: &str, kills: u64, rng: &mut Rng) -> Result<usize> {
    let mut args = home.args();
    args.extend(["--yolo", "--session", session].map(str::to_owned));
    let dir = home.sessions_of_work_dir().join(session);
    let (wire_path, context_path) = (dir.join("wire.jsonl"), dir.join("context.jsonl"));

    // One whole turn first: how many lines a turn prints, and a session to resume.
    let mut wire = WireProcess::spawn_with(home, args.clone()).await?;
    let (response, messages) = wire.prompt(json!("calibrate")).await?;
    ensure!(response["result"]["status"] == "finished", "{response}");
    let turn_lines = messages.len() as u64 + 1;
    wire.wait_exit().await?;

    let mut expected = Expected {
        wire_messages: messages_of(&whole_lines(&wire_path)?),
        context_lines: whole_lines(&context_path)?.into_iter().map(|(l, _)| l).collect(),
    };
    let mut damaged = 0;
    for kill in 0..kills {
        let at = format!("kill {kill}");
        let mut wire = WireProcess::spawn_with(home, args.clone()).await?;
        check_restart(&mut wire, &expected, &wire_path, &context_path)
            .await
            .with_context(|| format!("restart check before {at}"))?;

        // A new turn, killed after the client has read `kill_after` lines of it.
        let kill_after = rng.below(turn_lines);
        let at = format!("{at}, after {kill_after} lines");
        let prompt = wire.start_prompt(json!(format!("turn {kill}"))).await?;
        let mut seen = Vec::new();
        for _ in 0..kill_after {
            let message = wire.next().await.with_context(|| at.clone())?;
            if message.get("id").and_then(Value::as_str) == Some(prompt.as_str()) {
                break;
            }
            if matches!(message["method"].as_str(), Some("event" | "request")) {
                seen.push(message["params"].clone());
            }
        }
        wire.child.kill().await?;

        // Both files are whole (a SIGKILL cannot tear one write), and the client's view is in them.
        let wire_lines = whole_lines(&wire_path).with_context(|| at.clone())?;
        let context_lines: Vec<String> = whole_lines(&context_path)
            .with_context(|| at.clone())?
            .into_iter()
            .map(|(l, _)| l)
            .collect();
        let recorded = messages_of(&wire_lines);
        ensure!(
            recorded.starts_with(&expected.wire_messages),
            "{at}: earlier records changed"
        );
        check_at_most_one_lost(&recorded[expected.wire_messages.len()..], &merge(&seen))
            .with_context(|| at.clone())?;
        ensure!(
            context_lines.starts_with(&expected.context_lines),
            "{at}: earlier context records changed"
        );

        // Sometimes, damage of the kind a power loss leaves; the next start must repair it.
        let (wire_damage, context_damage) = (Damage::pick(rng), Damage::pick(rng));
        let wire_lost = wire_damage.apply(&wire_path, rng)?;
        let context_lost = context_damage.apply(&context_path, rng)?;
        damaged += usize::from(!matches!(wire_damage, Damage::None));
        let mut wire_after = wire_lines;
        wire_after.truncate(wire_after.len() - wire_lost.min(wire_after.len()));
        let mut context_after = context_lines;
        context_after.truncate(context_after.len() - context_lost.min(context_after.len()));
        expected = Expected {
            wire_messages: messages_of(&wire_after),
            context_lines: context_after,
        };
    }

    // The session survived it all: it replays and runs a whole turn.
    let mut wire = WireProcess::spawn_with(home, args).await?;
    check_restart(&mut wire, &expected, &wire_path, &context_path).await?;
    let (response, _) = wire.prompt(json!("after the crashes")).await?;
    ensure!(response["result"]["status"] == "finished", "{response}");
    wire.wait_exit().await?;
    let lines = whole_lines(&wire_path)?;
    ensure!(messages_of(&lines).starts_with(&expected.wire_messages));
    ensure!(
        lines.last().map(|(_, v)| v["message"]["type"].clone()) == Some(json!("TurnEnd")),
        "the last turn ended"
    );
    Ok(damaged)
}

#[expect(
    clippy::print_stderr,
    reason = "a summary of what the randomized test covered"
)]
fn note(text: &str) {
    eprintln!("{text}");
}

/// A fresh start on the session: `replay` sends exactly the expected records, and afterwards both
/// files are whole and still begin with what was there.
async fn check_restart(
    wire: &mut WireProcess,
    expected: &Expected,
    wire_path: &std::path::Path,
    context_path: &std::path::Path,
) -> Result<()> {
    let replay = wire.request("replay", json!({})).await?;
    let (response, messages) = wire.read_response(&replay).await?;
    let count = expected.wire_messages.len();
    ensure!(
        response["result"] == json!({"status": "finished", "events": count, "requests": 0}),
        "replay answered {response}, expected {count} events"
    );
    let replayed: Vec<Value> = messages.iter().map(|m| m["params"].clone()).collect();
    if replayed != expected.wire_messages {
        let first = replayed
            .iter()
            .zip(&expected.wire_messages)
            .position(|(a, b)| a != b);
        bail!("replay differs from the file at {first:?}");
    }
    let wire_lines = whole_lines(wire_path).context("wire.jsonl after the restart")?;
    ensure!(
        messages_of(&wire_lines) == expected.wire_messages,
        "wire.jsonl after the restart holds other records"
    );
    ensure!(
        wire_lines.first().map(|(_, v)| v["type"].clone()) == Some(json!("metadata")),
        "wire.jsonl starts with its header"
    );
    let context_lines: Vec<String> = whole_lines(context_path)
        .context("context.jsonl after the restart")?
        .into_iter()
        .map(|(l, _)| l)
        .collect();
    ensure!(
        context_lines.starts_with(&expected.context_lines),
        "context.jsonl after the restart lost records"
    );
    Ok(())
}

/// `recorded` (this turn's records in the file) against `seen` (what the client read, merged the same
/// way): every seen message is recorded except at most the last, which may also have grown since.
fn check_at_most_one_lost(recorded: &[Value], seen: &[Value]) -> Result<()> {
    let common = recorded.len().min(seen.len());
    for i in 0..common {
        let is_last_seen = i + 1 == seen.len();
        let ok = if is_last_seen {
            extends(&recorded[i], &seen[i])
        } else {
            recorded[i] == seen[i]
        };
        ensure!(
            ok,
            "record {i} differs from what the client saw:\n  recorded {}\n  seen     {}",
            recorded[i],
            seen[i]
        );
    }
    ensure!(
        recorded.len() + 1 >= seen.len(),
        "{} messages seen but only {} recorded: {:?}",
        seen.len(),
        recorded.len(),
        seen.iter().map(|m| m["type"].clone()).collect::<Vec<_>>()
    );
    Ok(())
}

#[test]
fn merging_joins_streamed_parts_like_the_recorder() {
    let part = |kind: &str, payload: Value| json!({"type": kind, "payload": payload});
    let seen = [
        part("ContentPart", json!({"type": "text", "text": "a"})),
        part("ContentPart", json!({"type": "text", "text": "b"})),
        part(
            "ToolCall",
            json!({"id": "t", "function": {"name": "S", "arguments": null}}),
        ),
        part("ToolCallPart", json!({"arguments_part": "{}"})),
        part("StatusUpdate", json!({})),
    ];
    pretty_assertions::assert_eq!(
        merge(&seen),
        vec![
            part("ContentPart", json!({"type": "text", "text": "ab"})),
            part(
                "ToolCall",
                json!({"id": "t", "function": {"name": "S", "arguments": "{}"}})
            ),
            part("StatusUpdate", json!({})),
        ]
    );
    let grown = part("ContentPart", json!({"type": "text", "text": "abc"}));
    assert!(extends(&grown, &merge(&seen)[0]));
    assert!(!extends(&merge(&seen)[0], &grown));
}
