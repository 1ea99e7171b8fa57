//! 100 000 adversarial lines to one `kimi-agent --wire` (issue 8, point 3): garbage bytes, invalid UTF-8,
//! 10 000-deep nesting, a wrong type in every field of every method, numeric / null / object ids,
//! batches, answers to unknown ids, a line over the size cap. Every line's answer is known in advance
//! (or its set of legal answers, where a `replay` may race a `cancel`), and every answer must be the
//! reference's error with its exact code and message. Afterwards the server must still run a normal turn,
//! and its resident memory, sampled all along, must have stayed bounded.
//!
//! Lines are generated from a fixed seed (`KIMI_ADVERSARIAL_SEED` overrides it, and the count
//! `KIMI_ADVERSARIAL_LINES`), written in batches by one task while another reads, so neither side blocks.

use std::collections::{BTreeMap, HashMap};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, Result, anyhow, bail, ensure};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::common::{Rng, RssSampler, TestHome, WireProcess, payloads, shell_call_line};

const DEFAULT_LINES: u64 = 100_000;
const DEFAULT_SEED: u64 = 0xad5e_5a11;
/// The line cap the server runs with; one line goes over it.
const LINE_CAP: usize = 256 * 1024;
/// Peak resident memory allowed during the run (a debug build peaks at ~30 MB).
const RSS_LIMIT_KIB: u64 = 200 * 1024;
/// Lines per write.
const BATCH: usize = 500;
/// How long the whole exchange may take.
const RUN_TIMEOUT: Duration = Duration::from_secs(120);

const PARSE: (i64, &str) = (-32700, "Invalid JSON format");
const INVALID_REQUEST: (i64, &str) = (-32600, "Invalid request");
const INVALID_RESPONSE: (i64, &str) = (-32600, "Invalid response");

/// The answer a line must get.
#[derive(Debug, Clone, PartialEq)]
enum Reply {
    /// An error with `id: null`.
    Null(i64, &'static str),
    /// An error for the line's id.
    Error(i64, String),
    /// `cancel` outside a turn: -32000, or `{}` when it lands while a `replay` runs.
    Cancel,
    /// `replay` of a session without records: a result (finished, or cancelled by a racing `cancel`),
    /// or -32000 while another `replay` runs.
    Replay,
    /// Nothing: a notification, or an answer to a request nobody sent.
    Silence,
}

struct Line {
    bytes: Vec<u8>,
    /// The id the answer carries, for [`Reply::Error`], [`Reply::Cancel`] and [`Reply::Replay`].
    id: Option<String>,
    reply: Reply,
}

impl Line {
    fn null(bytes: impl Into<Vec<u8>>, (code, message): (i64, &'static str)) -> Self {
        Self {
            bytes: bytes.into(),
            id: None,
            reply: Reply::Null(code, message),
        }
    }

    fn silent(bytes: impl Into<Vec<u8>>) -> Self {
        Self {
            bytes: bytes.into(),
            id: None,
            reply: Reply::Silence,
        }
    }

    fn with_id(bytes: impl Into<Vec<u8>>, id: &str, reply: Reply) -> Self {
        Self {
            bytes: bytes.into(),
            id: Some(id.to_owned()),
            reply,
        }
    }
}

/// JSON types a field accepts.
#[derive(Clone, Copy)]
struct Accepts(&'static str);

impl Accepts {
    /// Whether a value of this kind fits: `s`tring, `n`ull, `b`ool, `i`nteger >= 0, `o`bject, `a`rray.
    fn fits(self, value: &Value) -> bool {
        let kind = match value {
            Value::String(_) => 's',
            Value::Null => 'n',
            Value::Bool(_) => 'b',
            Value::Number(n) if n.is_u64() => 'i',
            Value::Number(_) => '-',
            Value::Object(_) => 'o',
            Value::Array(_) => 'a',
        };
        self.0.contains(kind)
    }
}

/// A method with params: a valid params object and each field's JSON pointer with what it accepts.
struct MethodSpec {
    method: &'static str,
    valid: Value,
    fields: Vec<(&'static str, Accepts)>,
}

impl MethodSpec {
    fn new(method: &'static str, valid: Value, fields: Vec<(&'static str, Accepts)>) -> Self {
        Self {
            method,
            valid,
            fields,
        }
    }
}

/// Every method with params.
fn methods_with_params() -> Vec<MethodSpec> {
    let input_fields = vec![
        ("", Accepts("o")),
        ("/user_input", Accepts("sa")),
        ("/user_input/0", Accepts("o")),
        ("/user_input/0/type", Accepts("s")),
        ("/user_input/0/text", Accepts("s")),
        ("/user_input/1", Accepts("o")),
        ("/user_input/1/think", Accepts("s")),
        ("/user_input/1/encrypted", Accepts("sn")),
        ("/user_input/2", Accepts("o")),
        ("/user_input/2/image_url", Accepts("o")),
        ("/user_input/2/image_url/url", Accepts("s")),
        ("/user_input/2/image_url/id", Accepts("sn")),
        ("/user_input/3", Accepts("o")),
        ("/user_input/3/audio_url", Accepts("o")),
        ("/user_input/3/audio_url/url", Accepts("s")),
        ("/user_input/4", Accepts("o")),
        ("/user_input/4/video_url", Accepts("o")),
        ("/user_input/4/video_url/url", Accepts("s")),
    ];
    let input = json!({"user_input": [
        {"type": "text", "text": "hi"},
        {"type": "think", "think": "hmm", "encrypted": null},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA==", "id": null}},
        {"type": "audio_url", "audio_url": {"url": "https://example.invalid/a.mp3", "id": "a"}},
        {"type": "video_url", "video_url": {"url": "https://example.invalid/v.mp4", "id": null}},
    ]});
    vec![
        MethodSpec::new(
            "initialize",
            json!({
                "protocol_version": "1.10",
                "client": {"name": "adversary", "version": "1"},
                "external_tools": [{"name": "t", "description": "d", "parameters": {"type": "object"}}],
                "hooks": [{"id": "h", "event": "PreToolUse", "matcher": "", "timeout": 30}],
                "capabilities": {"supports_question": true, "supports_plan_mode": false},
            }),
            vec![
                ("", Accepts("o")),
                ("/protocol_version", Accepts("s")),
                ("/client", Accepts("on")),
                ("/client/name", Accepts("s")),
                ("/client/version", Accepts("sn")),
                ("/external_tools", Accepts("an")),
                ("/external_tools/0", Accepts("o")),
                ("/external_tools/0/name", Accepts("s")),
                ("/external_tools/0/description", Accepts("s")),
                ("/external_tools/0/parameters", Accepts("o")),
                ("/hooks", Accepts("an")),
                ("/hooks/0", Accepts("o")),
                ("/hooks/0/id", Accepts("s")),
                ("/hooks/0/event", Accepts("s")),
                ("/hooks/0/matcher", Accepts("s")),
                ("/hooks/0/timeout", Accepts("i")),
                ("/capabilities", Accepts("on")),
                ("/capabilities/supports_question", Accepts("b")),
                ("/capabilities/supports_plan_mode", Accepts("b")),
            ],
        ),
        MethodSpec::new("prompt", input.clone(), input_fields.clone()),
        MethodSpec::new("steer", input, input_fields),
        MethodSpec::new(
            "set_plan_mode",
            json!({"enabled": true}),
            vec![("", Accepts("o")), ("/enabled", Accepts("b"))],
        ),
    ]
}

/// Values of every JSON type, and `original` given positionally when it is an object.
fn wrong_values(original: &Value, accepts: Accepts) -> Vec<Value> {
    let mut values = vec![
        json!("x"),
        json!(null),
        json!(true),
        json!(7),
        json!(-1),
        json!(1.5),
        json!({"k": 1}),
        json!([1]),
    ];
    if let Value::Object(map) = original {
        // What serde's derive would read as the struct's fields in order; the reference refuses it.
        values.push(Value::Array(map.values().cloned().collect()));
    }
    values.retain(|v| !accepts.fits(v));
    values
}

/// One line per wrong value per field per method: -32602 each.
fn wrong_type_lines(ids: &mut IdSource) -> Vec<Line> {
    let mut lines = Vec::new();
    for MethodSpec {
        method,
        valid,
        fields,
    } in methods_with_params()
    {
        for (pointer, accepts) in fields {
            let original = valid
                .pointer(pointer)
                .cloned()
                .unwrap_or_else(|| panic!("{method}: no field {pointer}"));
            for wrong in wrong_values(&original, accepts) {
                let mut params = valid.clone();
                match params.pointer_mut(pointer) {
                    Some(slot) => *slot = wrong,
                    None => unreachable!("checked above"),
                }
                let id = ids.next();
                let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
                let reply = Reply::Error(-32602, format!("Invalid parameters for method `{method}`"));
                lines.push(Line::with_id(line.to_string(), &id, reply));
            }
        }
        // Params left out.
        let id = ids.next();
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method});
        let reply = Reply::Error(-32602, format!("Invalid parameters for method `{method}`"));
        lines.push(Line::with_id(line.to_string(), &id, reply));
    }
    lines
}

struct IdSource(u64);

impl IdSource {
    fn next(&mut self) -> String {
        self.0 += 1;
        format!("adv-{}", self.0)
    }
}

/// `depth` levels of arrays, objects or a mix.
fn nested(rng: &mut Rng, depth: usize) -> String {
    let mut open = String::with_capacity(depth * 6);
    let mut close = String::with_capacity(depth * 2);
    for _ in 0..depth {
        if rng.below(2) == 0 {
            open.push('[');
            close.insert(0, ']');
        } else {
            open.push_str("{\"a\":");
            close.insert(0, '}');
        }
    }
    format!("{open}1{close}")
}

/// Bytes that are neither JSON nor whitespace at the start, and hold no newline.
fn garbage(rng: &mut Rng) -> Vec<u8> {
    let len = 1 + rng.below(120) as usize;
    let mut bytes = vec![0x01];
    bytes.extend((0..len).map(|_| match rng.below(256) as u8 {
        b'\n' => b'?',
        b => b,
    }));
    bytes
}

/// One randomly chosen adversarial line.
fn random_line(rng: &mut Rng, ids: &mut IdSource, wrong: &[Line]) -> Line {
    let method = [
        "initialize",
        "prompt",
        "steer",
        "replay",
        "cancel",
        "set_plan_mode",
    ][rng.below(6) as usize];
    match rng.below(20) {
        0 | 1 => Line::null(garbage(rng), PARSE),
        2 => {
            // Invalid UTF-8 inside a string is replaced (U+FFFD) and the message still understood.
            let n = ids.next();
            let mut bytes = format!(r#"{{"jsonrpc":"2.0","id":"{n}"#).into_bytes();
            bytes.extend_from_slice(b"\xff\xfe");
            bytes.extend_from_slice(br#"","method":"cancel"}"#);
            Line::with_id(bytes, &format!("{n}\u{fffd}\u{fffd}"), Reply::Cancel)
        }
        3 => {
            // Invalid UTF-8 outside a string is not JSON.
            Line::null(b"{\"jsonrpc\":\xc3\x28\"2.0\"}".to_vec(), PARSE)
        }
        4 => {
            // Nested past serde_json's depth limit (128), up to 10 000: not parsed, not a crash.
            let depth = if rng.below(50) == 0 {
                10_000
            } else {
                129 + rng.below(400) as usize
            };
            let value = nested(rng, depth);
            if rng.below(2) == 0 {
                Line::null(value, PARSE)
            } else {
                let id = ids.next();
                let line = format!(
                    r#"{{"jsonrpc":"2.0","id":"{id}","method":"prompt","params":{{"user_input":{value}}}}}"#
                );
                Line::null(line, PARSE)
            }
        }
        5 => {
            // Nested within the limit, where the params want text or parts: -32602.
            let depth = 1 + rng.below(100) as usize;
            let value = nested(rng, depth);
            let id = ids.next();
            let method = ["prompt", "steer"][rng.below(2) as usize];
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"{id}","method":"{method}","params":{{"user_input":{value}}}}}"#
            );
            Line::with_id(
                line,
                &id,
                Reply::Error(-32602, format!("Invalid parameters for method `{method}`")),
            )
        }
        6..=9 => {
            let pick = &wrong[rng.below(wrong.len() as u64) as usize];
            // A fresh id for each use, so every answer is counted once.
            let id = ids.next();
            let old = pick.id.as_deref().unwrap_or_default();
            let text =
                String::from_utf8_lossy(&pick.bytes).replacen(&format!("\"{old}\""), &format!("\"{id}\""), 1);
            Line::with_id(text, &id, pick.reply.clone())
        }
        10 => {
            // Ids that are not strings: the message is invalid; a null id makes a notification.
            let id = [
                json!(7),
                json!(-1),
                json!(2.5),
                json!({"id": "x"}),
                json!(["x"]),
                json!(true),
                json!(null),
            ][rng.below(7) as usize]
                .clone();
            let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {}});
            if id.is_null() {
                Line::silent(line.to_string())
            } else {
                Line::null(line.to_string(), INVALID_REQUEST)
            }
        }
        11 => {
            // Batches are not part of the protocol.
            let n = rng.below(4) as usize;
            let batch: Vec<Value> = (0..n)
                .map(|_| json!({"jsonrpc": "2.0", "id": ids.next(), "method": "cancel"}))
                .collect();
            Line::null(Value::Array(batch).to_string(), INVALID_REQUEST)
        }
        12 => {
            // Answers to requests nobody sent are dropped; malformed answers are refused.
            let id = ids.next();
            match rng.below(7) {
                0 => Line::silent(
                    json!({"jsonrpc": "2.0", "id": id, "result": {"request_id": "x", "response": "approve"}})
                        .to_string(),
                ),
                1 => Line::silent(
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -1, "message": "no", "data": null}})
                        .to_string(),
                ),
                2 => Line::silent(json!({"jsonrpc": "2.0", "id": id, "result": null}).to_string()),
                // Neither result nor error: dropped (reference), unless `method` is given as null.
                3 => Line::silent(json!({"jsonrpc": "2.0", "id": id}).to_string()),
                4 => Line::null(
                    json!({"jsonrpc": "2.0", "id": id, "method": null}).to_string(),
                    INVALID_RESPONSE,
                ),
                // A malformed error object makes any message invalid.
                5 => Line::null(
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": "x"}}).to_string(),
                    INVALID_REQUEST,
                ),
                _ => Line::null(
                    json!({"jsonrpc": "2.0", "id": id, "method": method, "error": [1, "m"]}).to_string(),
                    INVALID_REQUEST,
                ),
            }
        }
        13 => {
            let id = ids.next();
            let name = format!("no_such_{}", rng.below(1000));
            if rng.below(4) == 0 {
                Line::silent(json!({"jsonrpc": "2.0", "method": name}).to_string())
            } else {
                let line = json!({"jsonrpc": "2.0", "id": id, "method": name});
                Line::with_id(
                    line.to_string(),
                    &id,
                    Reply::Error(-32601, format!("Unexpected method received: {name}")),
                )
            }
        }
        14 => {
            let id = ids.next();
            let line = match rng.below(5) {
                0 => json!({"jsonrpc": "2.1", "id": id, "method": method}),
                1 => json!({"jsonrpc": 2.0, "id": id, "method": method}),
                2 => json!({"jsonrpc": null, "id": id, "method": method}),
                3 => json!({"jsonrpc": "2.0", "id": id, "method": 5}),
                _ => json!({"jsonrpc": "2.0", "id": id, "method": ["cancel"]}),
            };
            Line::null(line.to_string(), INVALID_REQUEST)
        }
        15 => Line::null(
            ["42", "\"text\"", "null", "true", "[]", "-0.5e3"][rng.below(6) as usize],
            INVALID_REQUEST,
        ),
        16 => Line::null(["", " ", "\t", "\r", " \t \r"][rng.below(5) as usize], PARSE),
        17 => {
            // cancel and replay take anything as params.
            let id = ids.next();
            let params = [
                json!(null),
                json!([1, 2]),
                json!("x"),
                json!({"a": [{}]}),
                json!(3),
            ][rng.below(5) as usize]
                .clone();
            let (method, reply) = if rng.below(2) == 0 {
                ("cancel", Reply::Cancel)
            } else {
                ("replay", Reply::Replay)
            };
            Line::with_id(
                json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string(),
                &id,
                reply,
            )
        }
        18 => {
            // Truncated messages.
            let id = ids.next();
            let full = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": {"user_input": "x"}})
                .to_string();
            let cut = 1 + rng.below(full.len() as u64 - 1) as usize;
            Line::null(full[..cut].to_owned(), PARSE)
        }
        _ => {
            // JSON that is not an object where the envelope's keys hold the wrong things.
            let id = ids.next();
            let line = json!({"jsonrpc": "2.0", "id": id, "method": null, "params": {"user_input": "x"}});
            // No method and no result/error: an invalid response.
            Line::null(line.to_string(), INVALID_RESPONSE)
        }
    }
}

/// The whole input: every wrong-type line once, a line over the cap, then random lines up to `count`.
fn generate(seed: u64, count: usize) -> Vec<Line> {
    let mut rng = Rng(seed);
    let mut ids = IdSource(0);
    let wrong = wrong_type_lines(&mut ids);
    let mut lines: Vec<Line> = Vec::with_capacity(count);
    // Ten 10 000-deep lines of each shape for sure, whatever the seed.
    for _ in 0..10 {
        lines.push(Line::null("[".repeat(10_000) + &"]".repeat(10_000), PARSE));
        lines.push(Line::null(
            "{\"a\":".repeat(10_000) + "1" + &"}".repeat(10_000),
            PARSE,
        ));
    }
    lines.push(Line::null(vec![b'x'; LINE_CAP + 1], PARSE));
    let wrong_count = wrong.len();
    let mut random = Vec::new();
    while lines.len() + wrong_count + random.len() < count {
        random.push(random_line(&mut rng, &mut ids, &wrong));
    }
    lines.extend(wrong);
    lines.extend(random);
    // A second oversized line in the middle of the random ones.
    let middle = lines.len() / 2;
    lines.insert(
        middle,
        Line::null(format!("{{\"pad\":\"{}\"}}", "y".repeat(LINE_CAP)), PARSE),
    );
    lines
}

/// What came back, counted the way [`Reply`]s are expected.
#[derive(Default)]
struct Tally {
    null_errors: BTreeMap<(i64, String), u64>,
    by_id: HashMap<String, Vec<Value>>,
    /// Lines that are not answers at all (events, requests) or not JSON-RPC.
    stray: Vec<String>,
    total: u64,
}

fn tally_line(tally: &mut Tally, line: &str) -> Result<()> {
    tally.total += 1;
    let value: Value =
        serde_json::from_str(line).with_context(|| format!("stdout is not JSON: {line:.300}"))?;
    if value.get("method").is_some() || value.get("jsonrpc") != Some(&json!("2.0")) {
        tally.stray.push(line.chars().take(300).collect());
        return Ok(());
    }
    match value.get("id") {
        Some(Value::Null) => {
            let error = value
                .get("error")
                .ok_or_else(|| anyhow!("id null without error: {line}"))?;
            check_error_shape(error, line)?;
            let key = (
                error["code"].as_i64().unwrap_or_default(),
                error["message"].as_str().unwrap_or_default().to_owned(),
            );
            if !error["data"].is_null() {
                // Only the oversized line carries data.
                ensure!(key.0 == PARSE.0, "data on a non-parse error: {line}");
                ensure!(error["data"]["reason"] == "line too long", "bad data: {line}");
                ensure!(error["data"]["limit"] == LINE_CAP, "bad limit: {line}");
            }
            *tally.null_errors.entry(key).or_default() += 1;
        }
        Some(Value::String(id)) => {
            if let Some(error) = value.get("error") {
                check_error_shape(error, line)?;
            } else {
                ensure!(
                    value.get("result").is_some_and(Value::is_object),
                    "neither result nor error: {line}"
                );
            }
            tally.by_id.entry(id.clone()).or_default().push(value);
        }
        _ => bail!("bad id: {line}"),
    }
    Ok(())
}

fn check_error_shape(error: &Value, line: &str) -> Result<()> {
    let keys: Vec<&str> = error
        .as_object()
        .map(|o| o.keys().map(String::as_str).collect())
        .unwrap_or_default();
    ensure!(
        keys == ["code", "message", "data"],
        "error object keys {keys:?}: {line}"
    );
    ensure!(
        error["code"].is_i64() && error["message"].is_string(),
        "error types: {line}"
    );
    Ok(())
}

/// Checks the answers for one id against what its line must get.
fn check_answer(id: &str, reply: &Reply, answers: &[Value]) -> Result<()> {
    let [answer] = answers else {
        bail!("{id}: expected one answer, got {}: {answers:?}", answers.len());
    };
    let error = |code: i64, message: &str| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, "data": null}});
    let ok = match reply {
        Reply::Error(code, message) => *answer == error(*code, message),
        Reply::Cancel => {
            *answer == error(-32000, "No agent turn is in progress")
                || *answer == json!({"jsonrpc": "2.0", "id": id, "result": {}})
        }
        Reply::Replay => {
            *answer == error(-32000, "An agent turn is already in progress")
                || ["finished", "cancelled"].iter().any(|status| {
                    *answer
                        == json!({"jsonrpc": "2.0", "id": id, "result": {"status": status, "events": 0, "requests": 0}})
                })
        }
        Reply::Null(..) | Reply::Silence => false,
    };
    ensure!(ok, "{id}: expected {reply:?}, got {answer}");
    Ok(())
}

fn env_u64(name: &str, default: u64) -> Result<u64> {
    match std::env::var(name) {
        Ok(value) => value
            .parse()
            .with_context(|| format!("{name}={value} is not a number")),
        Err(_) => Ok(default),
    }
}

#[tokio::test]
async fn a_hundred_thousand_adversarial_lines_leave_the_server_answering() -> Result<()> {
    let seed = env_u64("KIMI_ADVERSARIAL_SEED", DEFAULT_SEED)?;
    let count = usize::try_from(env_u64("KIMI_ADVERSARIAL_LINES", DEFAULT_LINES)?)?;
    let lines = generate(seed, count);
    let line_count = lines.len();
    ensure!(lines.len() >= count, "generated {} lines", lines.len());

    let mut expected_null: BTreeMap<(i64, String), u64> = BTreeMap::new();
    let mut expected_by_id: HashMap<String, Reply> = HashMap::new();
    for line in &lines {
        match (&line.reply, &line.id) {
            (Reply::Null(code, message), _) => {
                *expected_null.entry((*code, (*message).to_owned())).or_default() += 1
            }
            (Reply::Silence, _) => {}
            (reply, Some(id)) => {
                ensure!(
                    expected_by_id.insert(id.clone(), reply.clone()).is_none(),
                    "duplicate id {id}"
                );
            }
            (reply, None) => bail!("{reply:?} without an id"),
        }
    }
    let expected_total = expected_null.values().sum::<u64>() + expected_by_id.len() as u64;

    let home = TestHome::new()?.scripted(&["text: still here"])?;
    let mut child = home
        .command(&home.args())
        .env("KIMI_AGENT_MAX_LINE_BYTES", LINE_CAP.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("spawning kimi-agent")?;
    let pid = child.id().context("no pid")?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let sampler = RssSampler::start(pid);

    let writer = tokio::spawn(async move {
        for chunk in lines.chunks(BATCH) {
            let mut batch = Vec::new();
            for line in chunk {
                batch.extend_from_slice(&line.bytes);
                batch.push(b'\n');
            }
            stdin.write_all(&batch).await?;
        }
        stdin.flush().await?;
        anyhow::Ok(stdin)
    });
    let reader = async {
        let mut tally = Tally::default();
        while tally.total < expected_total {
            let line = stdout
                .next_line()
                .await?
                .ok_or_else(|| anyhow!("stdout closed after {} answers", tally.total))?;
            tally_line(&mut tally, &line)?;
        }
        anyhow::Ok(tally)
    };
    let tally = tokio::time::timeout(RUN_TIMEOUT, reader)
        .await
        .map_err(|_| anyhow!("the answers did not all arrive within {RUN_TIMEOUT:?}"))??;
    let mut stdin = writer.await??;
    let peak_kib = sampler.peak_kib().await?;

    ensure!(
        tally.stray.is_empty(),
        "unexpected messages: {:?}",
        &tally.stray[..tally.stray.len().min(5)]
    );
    assert_eq!(
        tally.null_errors, expected_null,
        "id-null errors by code and message"
    );
    ensure!(
        tally.by_id.len() == expected_by_id.len(),
        "answered {} ids, expected {}",
        tally.by_id.len(),
        expected_by_id.len()
    );
    for (id, reply) in &expected_by_id {
        let answers = tally.by_id.get(id).map(Vec::as_slice).unwrap_or_default();
        check_answer(id, reply, answers)?;
    }
    eprintln!(
        "adversarial: {} lines, {} id-null errors, {} answers by id, peak resident memory {peak_kib} KiB",
        line_count,
        expected_null.values().sum::<u64>(),
        expected_by_id.len()
    );
    ensure!(
        peak_kib <= RSS_LIMIT_KIB,
        "resident memory peaked at {peak_kib} KiB (limit {RSS_LIMIT_KIB} KiB)"
    );

    // Still a working server: a normal turn runs and is answered.
    let prompt =
        json!({"jsonrpc": "2.0", "id": "final", "method": "prompt", "params": {"user_input": "hello"}});
    stdin.write_all(format!("{prompt}\n").as_bytes()).await?;
    stdin.flush().await?;
    let mut texts = String::new();
    let response = loop {
        let line = tokio::time::timeout(Duration::from_secs(15), stdout.next_line())
            .await
            .map_err(|_| anyhow!("no answer to the final prompt"))??
            .ok_or_else(|| anyhow!("stdout closed before the final prompt's answer"))?;
        let value: Value = serde_json::from_str(&line)?;
        if value["params"]["type"] == "ContentPart" {
            texts.push_str(value["params"]["payload"]["text"].as_str().unwrap_or_default());
        }
        if value.get("id") == Some(&json!("final")) && value.get("method").is_none() {
            break value;
        }
    };
    assert_eq!(
        response,
        json!({"jsonrpc": "2.0", "id": "final", "result": {"status": "finished"}})
    );
    assert_eq!(texts, "still here");
    drop(stdin);
    let status = tokio::time::timeout(Duration::from_secs(15), child.wait()).await??;
    ensure!(status.success(), "exit status {status}");
    Ok(())
}

/// Client answers are read by field name too: an approval given as `[request_id, "approve"]` (which
/// serde's derive would read as an approval) is malformed, and a malformed approval is a rejection.
#[tokio::test]
async fn an_approval_answer_given_positionally_is_a_rejection() -> Result<()> {
    let home = TestHome::new()?.scripted(&[&shell_call_line("tc-1", "touch ran"), "text: after"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    let prompt = wire.start_prompt(json!("run it")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    let payload_id = request["params"]["payload"]["id"].clone();
    wire.send(&json!({"jsonrpc": "2.0", "id": request["id"], "result": [payload_id, "approve"]}))
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let approvals = payloads(&messages, "ApprovalResponse");
    assert_eq!(approvals.len(), 1, "{messages:?}");
    assert_eq!(approvals[0]["response"], "reject");
    ensure!(
        !home.work().join("ran").exists(),
        "the command ran without approval"
    );
    Ok(())
}
