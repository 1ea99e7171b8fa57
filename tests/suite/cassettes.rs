//! Model-traffic cassettes (issue 18): `--record-llm` records every model call, a `_cassette`
//! provider replays them with the model server gone, a replay that asks something else fails with
//! -32003 naming the first difference, and `cassette from-session` turns a session into a cassette.
//! The worked example of docs/testing-with-cassettes.md is `the_worked_example_of_the_docs`.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use anyhow::{Context as _, Result, bail};
use pretty_assertions::assert_eq;
use regex::Regex;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply};
use crate::common::{TestHome, WireProcess, approval_answer, init_with_error_data, kinds};

const PROMPT: &str = "Write the shopping list to notes.txt";

/// The model of the worked example: writes `notes.txt` (by its absolute path in the work dir, so a
/// replay elsewhere must move it), then says it is done.
async fn shopping_model(work: &Path) -> MockModel {
    let path = work.join("notes.txt").to_string_lossy().into_owned();
    MockModel::start(move |_, messages| {
        if messages.iter().any(|m| m["role"] == "tool") {
            Reply::Text("Done: notes.txt has the list.".into())
        } else {
            Reply::call(
                "w1",
                "WriteFile",
                json!({"path": path, "content": "eggs\nmilk\n"}),
            )
        }
    })
    .await
}

/// A config whose only model answers from `cassette`.
fn replay_config(cassette: &Path, strict: bool) -> Value {
    let mut provider = json!({"type": "_cassette", "base_url": cassette, "api_key": ""});
    if !strict {
        provider["strict"] = json!(false);
    }
    json!({
        "default_model": "mock",
        "models": {"mock": {"provider": "tape", "model": "mock-model", "max_context_size": 100000}},
        "providers": {"tape": provider},
    })
}

/// One turn of the example: the prompt, the approval of the write, the prompt's answer. Returns the
/// answer and every event and request, in order.
async fn shopping_turn(wire: &mut WireProcess) -> Result<(Value, Vec<Value>)> {
    let id = wire.start_prompt(json!(PROMPT)).await?;
    let approval = wire.peek_request("ApprovalRequest").await?;
    wire.send(&approval_answer(&approval, "approve")).await?;
    wire.read_response(&id).await
}

fn session_dir(home: &TestHome) -> Result<PathBuf> {
    match home.session_dirs().as_slice() {
        [dir] => Ok(dir.clone()),
        dirs => bail!("expected one session, found {dirs:?}"),
    }
}

#[expect(
    clippy::unwrap_used,
    reason = "a constant pattern: a mistake fails every test using it"
)]
static VARIABLE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{32}",
        r"|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+(?:Z|[+-][0-9]{2}:[0-9]{2})?",
    ))
    .unwrap()
});

/// `value` with `root` (the run's temp dir), ids and times taken out, and `wire.jsonl`'s
/// `timestamp`s dropped: what legitimately differs between two runs of the same conversation.
pub(super) fn comparable(value: &Value, root: &Path) -> Value {
    let root = root.to_string_lossy();
    match value {
        Value::String(text) => Value::String(
            VARIABLE
                .replace_all(&text.replace(root.as_ref(), "<root>"), "<x>")
                .into_owned(),
        ),
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| comparable(v, Path::new(root.as_ref())))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(k, _)| *k != "timestamp")
                .map(|(k, v)| (k.clone(), comparable(v, Path::new(root.as_ref()))))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// A session file's records, comparable.
pub(super) fn records(path: &Path, root: &Path) -> Result<Vec<Value>> {
    std::fs::read_to_string(path)
        .with_context(|| path.display().to_string())?
        .lines()
        .map(|line| Ok(comparable(&serde_json::from_str(line)?, root)))
        .collect()
}

/// Records the example's turn in a fresh home; returns the home, the cassette, the answer and
/// the transcript. The model server is stopped before returning.
async fn record_shopping_turn() -> Result<(TestHome, PathBuf, Value, Vec<Value>)> {
    let home = TestHome::new()?;
    let model = shopping_model(&home.work()).await;
    let cassette = home.root.path().join("calls.jsonl");
    let home = home
        .with_config(&model.config(json!({})))?
        .arg("--record-llm")
        .arg(&cassette.to_string_lossy());
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (answer, transcript) = shopping_turn(&mut wire).await?;
    wire.wait_exit().await?;
    assert_eq!(model.requests().await.len(), 2);
    drop(model);
    Ok((home, cassette, answer, transcript))
}

#[tokio::test]
async fn a_recorded_turn_replays_with_the_server_gone_with_identical_events_and_files() -> Result<()> {
    let (recorded, cassette, answer, transcript) = record_shopping_turn().await?;
    assert_eq!(answer["result"], json!({"status": "finished"}));
    assert_eq!(
        kinds(&transcript),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:ToolCall",
            "event:StatusUpdate",
            "request:ApprovalRequest",
            "event:ApprovalResponse",
            "event:ToolResult",
            "event:StepBegin",
            "event:ContentPart",
            "event:StatusUpdate",
            "event:TurnEnd"
        ]
    );
    // One line per model call: the request as sent, the assembled answer, no key.
    let text = std::fs::read_to_string(&cassette)?;
    assert!(!text.contains("sk-test"), "{text}");
    let lines: Vec<Value> = text.lines().map(serde_json::from_str).collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["provider"], "openai_legacy");
    assert_eq!(lines[0]["model"], "mock-model");
    assert_eq!(lines[0]["request"]["messages"][0]["content"][0]["text"], PROMPT);
    assert!(
        lines[0]["request"]["tools"]
            .as_array()
            .is_some_and(|t| !t.is_empty())
    );
    assert_eq!(lines[0]["answer"]["id"], "chatcmpl-mock");
    assert_eq!(lines[0]["answer"]["finish_reason"], "tool_calls");
    assert_eq!(
        lines[0]["answer"]["tool_calls"][0]["function"]["name"],
        "WriteFile"
    );
    assert_eq!(
        lines[1]["answer"]["content"],
        json!([{"type": "text", "text": "Done: notes.txt has the list."}])
    );
    assert_eq!(lines[0]["paths"]["work_dir"], json!(recorded.work()));

    // Another checkout, no server: the same conversation, the same events, the same files.
    let replayed = TestHome::new()?.with_config(&replay_config(&cassette, true))?;
    let mut wire = WireProcess::spawn(&replayed).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (again, replay_transcript) = shopping_turn(&mut wire).await?;
    wire.wait_exit().await?;
    assert_eq!(again["result"], answer["result"]);
    let recorded_root = recorded.root.path();
    let replayed_root = replayed.root.path();
    let of =
        |messages: &[Value], root: &Path| messages.iter().map(|m| comparable(m, root)).collect::<Vec<_>>();
    assert_eq!(
        of(&replay_transcript, replayed_root),
        of(&transcript, recorded_root)
    );
    assert_eq!(
        std::fs::read_to_string(replayed.work().join("notes.txt"))?,
        "eggs\nmilk\n",
        "the write went to this checkout's work dir"
    );
    for file in ["context.jsonl", "wire.jsonl"] {
        assert_eq!(
            records(&session_dir(&replayed)?.join(file), replayed_root)?,
            records(&session_dir(&recorded)?.join(file), recorded_root)?,
            "{file}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_replay_that_asks_something_else_fails_with_the_difference_named() -> Result<()> {
    let (_recorded, cassette, _, _) = record_shopping_turn().await?;
    let home = TestHome::new()?.with_config(&replay_config(&cassette, true))?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_error_data()).await?;
    let (answer, transcript) = wire.prompt(json!("Write the shopping list to list.txt")).await?;
    let error = &answer["error"];
    assert_eq!(error["code"], -32003, "{answer}");
    let message = error["message"].as_str().unwrap_or_default();
    let expected = format!(
        "Cassette mismatch at model call 1 ({} line 1): at $.messages[0].content[0].text: \
         recorded \"Write the shopping list to notes.txt\", got \"Write the shopping list to list.txt\"",
        cassette.display()
    );
    assert_eq!(message, expected);
    assert_eq!(
        error["data"],
        json!({"kind": "cassette_mismatch", "call": 1, "path": "$.messages[0].content[0].text"})
    );
    // The step failed at once: no retry, nothing of it in the context.
    assert!(
        !kinds(&transcript).contains(&"event:StepRetry".to_owned()),
        "{transcript:?}"
    );
    wire.assert_alive_with_data().await?;

    // Not strict: the answers come by order, whatever is asked.
    let home = TestHome::new()?.with_config(&replay_config(&cassette, false))?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_error_data()).await?;
    let id = wire.start_prompt(json!("Something else entirely")).await?;
    let approval = wire.peek_request("ApprovalRequest").await?;
    wire.send(&approval_answer(&approval, "approve")).await?;
    let (answer, _) = wire.read_response(&id).await?;
    assert_eq!(answer["result"], json!({"status": "finished"}));
    // And with the cassette used up, the next call has nothing to play.
    let (answer, _) = wire.prompt(json!("more")).await?;
    assert_eq!(answer["error"]["code"], -32003, "{answer}");
    assert_eq!(
        answer["error"]["data"],
        json!({"kind": "cassette_exhausted", "call": 3})
    );
    Ok(())
}

#[tokio::test]
async fn the_worked_example_of_the_docs() -> Result<()> {
    // 1. Record (docs: "Record a turn").
    // The recording's home holds the cassette: it lives until the end.
    let (_recorded, cassette, answer, transcript) = record_shopping_turn().await?;
    assert_eq!(answer["result"], json!({"status": "finished"}));
    // 2. Replay with the server gone (docs: "Replay it").
    let home = TestHome::new()?.with_config(&replay_config(&cassette, true))?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (again, replayed) = shopping_turn(&mut wire).await?;
    assert_eq!(again["result"], json!({"status": "finished"}));
    assert_eq!(kinds(&replayed), kinds(&transcript));
    // 3. Change a tool: an agent file without FetchURL (docs: "Change a tool").
    let agent_file = home.root.path().join("no-fetch.yaml");
    std::fs::write(
        &agent_file,
        "version: 1\nagent:\n  extend: default\n  exclude_tools:\n    - \"kimi_cli.tools.web:FetchURL\"\n",
    )?;
    let changed = TestHome::new()?
        .with_config(&replay_config(&cassette, true))?
        .arg("--agent-file")
        .arg(&agent_file.to_string_lossy());
    let mut wire = WireProcess::spawn(&changed).await?;
    wire.initialize(init_with_error_data()).await?;
    let (answer, _) = wire.prompt(json!(PROMPT)).await?;
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(answer["error"]["code"], -32003, "{answer}");
    assert!(
        message.contains(": at $.tools[") && message.contains(".name: recorded \"FetchURL\", got "),
        "{message}"
    );
    assert_eq!(answer["error"]["data"]["kind"], "cassette_mismatch");
    Ok(())
}

#[tokio::test]
async fn a_session_becomes_a_cassette_that_replays_it() -> Result<()> {
    // A session written earlier (by a run like the other tests'), with no cassette recorded.
    let written = TestHome::new()?;
    let model = shopping_model(&written.work()).await;
    let written = written.with_config(&model.config(json!({})))?;
    let mut wire = WireProcess::spawn(&written).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (answer, transcript) = shopping_turn(&mut wire).await?;
    assert_eq!(answer["result"], json!({"status": "finished"}));
    wire.wait_exit().await?;
    drop(model);

    let session = session_dir(&written)?;
    let cassette = written.root.path().join("from-session.jsonl");
    let output = written
        .run_cli(&[
            "cassette",
            "from-session",
            &session.to_string_lossy(),
            "--output",
            &cassette.to_string_lossy(),
        ])
        .await?;
    assert!(output.status.success(), "{output:?}");
    let report = String::from_utf8(output.stderr)?;
    assert!(report.starts_with("2 model call(s) written\n"), "{report}");
    let lines: Vec<Value> = std::fs::read_to_string(&cassette)?
        .lines()
        .map(serde_json::from_str)
        .collect::<Result<_, _>>()?;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0]["provider"], "session");
    assert_eq!(lines[0]["request"]["tools"], Value::Null);
    assert_eq!(lines[0]["answer"]["id"], "chatcmpl-mock", "from wire.jsonl");
    assert_eq!(lines[1]["request"]["messages"][2]["role"], "tool");

    // Replayed elsewhere, strictly: the same turn again.
    let home = TestHome::new()?.with_config(&replay_config(&cassette, true))?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (again, replayed) = shopping_turn(&mut wire).await?;
    assert_eq!(again["result"], json!({"status": "finished"}));
    let of =
        |messages: &[Value], root: &Path| messages.iter().map(|m| comparable(m, root)).collect::<Vec<_>>();
    assert_eq!(
        of(&replayed, home.root.path()),
        of(&transcript, written.root.path())
    );
    assert_eq!(
        std::fs::read_to_string(home.work().join("notes.txt"))?,
        "eggs\nmilk\n"
    );

    // Not a session: a clear error.
    let output = written
        .run_cli(&["cassette", "from-session", &written.work().to_string_lossy()])
        .await?;
    assert!(!output.status.success());
    assert!(String::from_utf8(output.stderr)?.contains("is not a session directory"));
    Ok(())
}
