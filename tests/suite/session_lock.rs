//! One writer per session (issue 16): two processes on one session. The first holds it; the second
//! starts, answers `initialize` (naming the holder) and `replay`, refuses every method that would write,
//! and takes the session over at its next write once the holder is gone, however it went.
//!
//! The race test at the end makes the reliability figure of docs/reliability.md: `KIMI_LOCK_ATTEMPTS`
//! sets its number of attempts (default [`DEFAULT_ATTEMPTS`]).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail, ensure};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::background::{notification_messages, output_of, runtime, task_id_in, wait_for_status};
use crate::common::mock_model::{MockModel, Reply, message_text};
use crate::common::{TestHome, WireProcess, context_roles, external_tool, payloads};

const DEFAULT_ATTEMPTS: u64 = 10;
const LOCK_FILE: &str = "kimi-agent.lock";

/// The context.jsonl roles of `turns` one-step text turns.
fn roles_of_turns(turns: usize) -> Vec<String> {
    let mut roles = vec!["_system_prompt".to_owned()];
    for _ in 0..turns {
        roles.extend(["_checkpoint", "user", "_checkpoint", "assistant"].map(str::to_owned));
    }
    roles
}

/// A process on session `id`, initialized; returns it with its `initialize` result.
async fn start(home: &TestHome, id: &str, init: Value) -> Result<(WireProcess, Value)> {
    let mut args = home.args();
    args.extend(["--session".to_owned(), id.to_owned()]);
    let mut wire = WireProcess::spawn_with(home, args).await?;
    let result = wire.initialize(init).await?;
    Ok((wire, result))
}

fn plain_init() -> Value {
    json!({"protocol_version": "1.10"})
}

fn pid_of(wire: &WireProcess) -> Result<u32> {
    wire.child.id().context("the process has no pid")
}

/// The refusal a writing method gets while `holder` holds session `id`.
fn in_use(id: &str, holder: u32) -> Value {
    json!({
        "code": -32000,
        "message": format!("Session {id} is in use by another kimi-agent process (pid {holder})"),
        "data": {"session_id": id, "pid": holder},
    })
}

/// Sends `method` and returns the whole response.
async fn call(wire: &mut WireProcess, method: &str, params: Value) -> Result<Value> {
    let id = wire.request(method, params).await?;
    Ok(wire.read_response(&id).await?.0)
}

/// The `user_input` of every TurnBegin recorded in wire.jsonl, in order, after checking that turns
/// never overlap (each TurnBegin is closed by a TurnEnd before the next).
fn recorded_turns(dir: &Path) -> Result<Vec<Value>> {
    let text = std::fs::read_to_string(dir.join("wire.jsonl"))?;
    let mut inputs = Vec::new();
    let mut open = false;
    for line in text.lines() {
        let record: Value = serde_json::from_str(line)?;
        match record["message"]["type"].as_str() {
            Some("TurnBegin") => {
                ensure!(!open, "a TurnBegin inside an open turn: {text}");
                open = true;
                inputs.push(record["message"]["payload"]["user_input"].clone());
            }
            Some("TurnEnd") => {
                ensure!(open, "a TurnEnd without its TurnBegin: {text}");
                open = false;
            }
            _ => {}
        }
    }
    ensure!(!open, "the last turn was never closed: {text}");
    Ok(inputs)
}

fn session_dir(home: &TestHome, id: &str) -> PathBuf {
    home.sessions_of_work_dir().join(id)
}

#[tokio::test]
async fn a_second_process_reads_a_held_session_but_never_writes_it() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: first answer", "text: second answer"])?;
    let (mut first, first_init) = start(&home, "shared", plain_init()).await?;
    assert_eq!(first_init.get("session_held_by"), None, "{first_init}");
    let holder = pid_of(&first)?;
    let (done, _) = first.prompt(json!("one")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");
    let dir = session_dir(&home, "shared");
    assert_eq!(
        std::fs::read_to_string(dir.join(LOCK_FILE))?,
        format!("{holder}\n")
    );

    let (mut second, second_init) = start(&home, "shared", plain_init()).await?;
    assert_eq!(second_init["session_held_by"], json!({"pid": holder}));
    // Everything else of the handshake is what the holder reported.
    let mut same = second_init.clone();
    same.as_object_mut().context("object")?.remove("session_held_by");
    assert_eq!(same, first_init);

    for (method, params) in [
        ("prompt", json!({"user_input": "two"})),
        // No turn can run here, so the holder is named rather than "No agent turn is in progress".
        ("steer", json!({"user_input": "more"})),
        ("set_plan_mode", json!({"enabled": true})),
    ] {
        let refused = call(&mut second, method, params).await?;
        assert_eq!(refused["error"], in_use("shared", holder), "{method}");
    }
    let replay = call(&mut second, "replay", json!({})).await?;
    assert_eq!(
        replay["result"],
        json!({"status": "finished", "events": 5, "requests": 0}),
        "{replay}"
    );
    second.assert_alive().await?;

    // The holder goes on as if nobody else were there.
    let (done, _) = first.prompt(json!("three")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");
    let refused = call(&mut second, "prompt", json!({"user_input": "four"})).await?;
    assert_eq!(refused["error"], in_use("shared", holder));

    // The refused process leaves without a trace; the holder removes its lock file when it leaves.
    let before = std::fs::read_to_string(dir.join("context.jsonl"))?;
    assert!(second.wait_exit().await?.success());
    assert!(first.wait_exit().await?.success());
    assert_eq!(std::fs::read_to_string(dir.join("context.jsonl"))?, before);
    assert_eq!(context_roles(&dir.join("context.jsonl"))?, roles_of_turns(2));
    assert_eq!(recorded_turns(&dir)?, [json!("one"), json!("three")]);
    let state: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("state.json"))?)?;
    assert_eq!(
        state["plan_mode"],
        json!(false),
        "the refused set_plan_mode was written: {state}"
    );
    assert!(!dir.join(LOCK_FILE).exists());
    Ok(())
}

#[tokio::test]
async fn once_the_holder_is_killed_the_next_prompt_takes_the_session_over() -> Result<()> {
    let model = MockModel::start(|n, _| Reply::Text(format!("answer {n}"))).await;
    let home = TestHome::new()?.with_config(&model.config(json!({})))?;
    let (mut first, _) = start(&home, "taken", plain_init()).await?;
    let holder = pid_of(&first)?;
    let (done, _) = first.prompt(json!("from the first")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");

    // The second process offers a tool of its own while it cannot write yet.
    let init = json!({"protocol_version": "1.10", "external_tools": [external_tool("Mine")]});
    let (mut second, held) = start(&home, "taken", init).await?;
    assert_eq!(held["session_held_by"], json!({"pid": holder}));
    assert_eq!(
        held["external_tools"],
        json!({"accepted": ["Mine"], "rejected": []})
    );
    let refused = call(&mut second, "prompt", json!({"user_input": "too early"})).await?;
    assert_eq!(refused["error"], in_use("taken", holder));

    first.child.kill().await?;
    let (done, messages) = second.prompt(json!("from the second")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");
    assert_eq!(
        payloads(&messages, "TurnBegin")[0]["user_input"],
        "from the second"
    );

    // The model saw the first process's turn (read at the takeover) and the second's own tool.
    let requests = model.server.received_requests().await.context("requests")?;
    let last: Value = serde_json::from_slice(&requests.last().context("no request")?.body)?;
    let said: Vec<String> = last["messages"]
        .as_array()
        .context("messages")?
        .iter()
        .filter(|m| m["role"] != "system")
        .map(|m| format!("{}: {}", m["role"].as_str().unwrap_or("?"), message_text(m)))
        .collect();
    assert_eq!(
        said,
        [
            "user: from the first",
            "assistant: answer 0",
            "user: from the second"
        ]
    );
    let tools: Vec<&str> = last["tools"]
        .as_array()
        .context("tools")?
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(tools.contains(&"Mine"), "{tools:?}");

    // The session is this process's now.
    let again = second.initialize(plain_init()).await?;
    assert_eq!(again.get("session_held_by"), None, "{again}");
    let dir = session_dir(&home, "taken");
    let pid = pid_of(&second)?;
    assert_eq!(std::fs::read_to_string(dir.join(LOCK_FILE))?, format!("{pid}\n"));
    assert!(second.wait_exit().await?.success());
    assert_eq!(context_roles(&dir.join("context.jsonl"))?, roles_of_turns(2));
    assert_eq!(
        recorded_turns(&dir)?,
        [json!("from the first"), json!("from the second")]
    );
    Ok(())
}

#[tokio::test]
async fn a_lock_file_left_by_a_dead_process_does_not_block() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let dir = session_dir(&home, "stale");
    std::fs::create_dir_all(&dir)?;
    // The pid of a process that has exited, in the file it would have left after a SIGKILL.
    let gone = std::process::Command::new("true").spawn()?;
    let gone_pid = gone.id();
    gone.wait_with_output()?;
    std::fs::write(dir.join(LOCK_FILE), format!("{gone_pid}\n"))?;

    let (mut wire, init) = start(&home, "stale", plain_init()).await?;
    assert_eq!(init.get("session_held_by"), None, "{init}");
    let (done, _) = wire.prompt(json!("hi")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");
    assert!(wire.wait_exit().await?.success());
    assert_eq!(context_roles(&dir.join("context.jsonl"))?, roles_of_turns(1));
    assert!(!dir.join(LOCK_FILE).exists());
    Ok(())
}

#[tokio::test]
async fn a_session_that_cannot_be_locked_is_served_read_only_with_the_reason() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello"])?;
    let (mut wire, _) = start(&home, "unlockable", plain_init()).await?;
    wire.prompt(json!("hi")).await?;
    assert!(wire.wait_exit().await?.success());
    let dir = session_dir(&home, "unlockable");
    // A directory where the lock file belongs: no process can lock the session (root neither).
    std::fs::create_dir(dir.join(LOCK_FILE))?;
    let before = std::fs::read_to_string(dir.join("context.jsonl"))?;

    let (mut wire, init) = start(&home, "unlockable", plain_init()).await?;
    assert_eq!(init.get("session_held_by"), None, "{init}");
    let replay = call(&mut wire, "replay", json!({})).await?;
    assert_eq!(replay["result"]["events"], 5, "{replay}");
    let refused = call(&mut wire, "prompt", json!({"user_input": "no"})).await?;
    assert_eq!(refused["error"]["code"], -32603, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("cannot lock the session"), "{message}");
    assert!(message.contains(LOCK_FILE), "{message}");
    wire.assert_alive().await?;
    assert!(wire.wait_exit().await?.success());
    assert_eq!(std::fs::read_to_string(dir.join("context.jsonl"))?, before);
    Ok(())
}

#[tokio::test]
async fn continue_picks_the_latest_session_even_when_it_is_held() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: a", "text: b"])?;
    let mut args = home.args();
    let mut earlier = WireProcess::spawn_with(&home, args.clone()).await?;
    earlier.prompt(json!("remembered")).await?;
    assert!(earlier.wait_exit().await?.success());

    args.push("--continue".into());
    let mut holder = WireProcess::spawn_with(&home, args.clone()).await?;
    holder.initialize(plain_init()).await?;
    let holder_pid = pid_of(&holder)?;
    let mut second = WireProcess::spawn_with(&home, args).await?;
    let init = second.initialize(plain_init()).await?;
    assert_eq!(init["session_held_by"], json!({"pid": holder_pid}));
    let [dir] = home
        .session_dirs()
        .try_into()
        .map_err(|d| anyhow::anyhow!("{d:?}"))?;
    let id = dir.file_name().context("name")?.to_string_lossy().into_owned();
    let refused = call(&mut second, "prompt", json!({"user_input": "no"})).await?;
    assert_eq!(refused["error"], in_use(&id, holder_pid));
    Ok(())
}

#[tokio::test]
async fn clear_compact_export_and_import_in_the_holder_keep_the_session_held() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: a", "text: summary", "text: b"])?;
    std::fs::write(home.work().join("notes.md"), "remember this")?;
    let (mut first, _) = start(&home, "rotated", plain_init()).await?;
    let holder = pid_of(&first)?;
    let (mut second, _) = start(&home, "rotated", plain_init()).await?;
    let inputs = [
        "hi",
        "/compact",
        "/export exports/",
        "/import notes.md",
        "/clear",
        "again",
    ];
    for input in inputs {
        let (done, _) = first.prompt(json!(input)).await?;
        assert_eq!(done["result"], json!({"status": "finished"}), "{input}: {done}");
        // The same command from the other process is refused: it would write the session too.
        let refused = call(&mut second, "prompt", json!({"user_input": input})).await?;
        assert_eq!(refused["error"], in_use("rotated", holder), "after {input}");
        if input.starts_with("/import") {
            let context = std::fs::read_to_string(session_dir(&home, "rotated").join("context.jsonl"))?;
            assert!(
                context.contains("remember this"),
                "the holder's import: {context}"
            );
        }
    }
    let exports = std::fs::read_dir(home.work().join("exports"))?.count();
    assert_eq!(exports, 1, "the holder's export");
    assert!(first.wait_exit().await?.success());
    let (done, _) = second.prompt(json!("mine now")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");
    assert!(second.wait_exit().await?.success());
    Ok(())
}

/// A background task of the holder ends while a second process is attached: the holder records its
/// end (runtime.json, and the notification its next turn tells the model), the second process is
/// refused throughout, and its exit leaves the task and the files alone.
#[tokio::test]
async fn the_holders_background_task_ends_through_the_holder_while_another_process_is_refused() -> Result<()>
{
    let home = TestHome::new()?;
    let go = home.root.path().join("go");
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.02; done; echo finished",
        go.display()
    );
    let model = MockModel::start(move |n, _| match n {
        0 => Reply::call(
            "tc-bg",
            "Shell",
            json!({"command": command, "run_in_background": true, "description": "waits for go"}),
        ),
        _ => Reply::Text("ok".into()),
    })
    .await;
    let home = home.with_config(&model.config(json!({})))?.arg("--yolo");
    let (mut first, _) = start(&home, "tasks", plain_init()).await?;
    let holder = pid_of(&first)?;
    let (done, messages) = first.prompt(json!("start it")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");
    let task = task_id_in(&output_of(&messages, "tc-bg")?).context("no task id")?;
    let dir = session_dir(&home, "tasks");
    assert_eq!(runtime(&dir, &task)?["status"], "running");

    let (mut second, init) = start(&home, "tasks", plain_init()).await?;
    assert_eq!(init["session_held_by"], json!({"pid": holder}));
    let refused = call(&mut second, "prompt", json!({"user_input": "mine?"})).await?;
    assert_eq!(refused["error"], in_use("tasks", holder));

    // The task ends now, with both processes on the session.
    std::fs::write(&go, "")?;
    let ended = wait_for_status(&dir, &task, "completed").await?;
    let refused = call(&mut second, "prompt", json!({"user_input": "now?"})).await?;
    assert_eq!(refused["error"], in_use("tasks", holder));
    let context = std::fs::read_to_string(dir.join("context.jsonl"))?;
    assert!(second.wait_exit().await?.success());
    assert_eq!(
        runtime(&dir, &task)?,
        ended,
        "the refused process touched the task"
    );
    assert_eq!(std::fs::read_to_string(dir.join("context.jsonl"))?, context);

    // The holder tells its model at its next turn.
    let (done, _) = first.prompt(json!("anything new?")).await?;
    assert_eq!(done["result"], json!({"status": "finished"}), "{done}");
    let requests = model.requests().await;
    let told = notification_messages(requests.last().context("no request")?);
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].contains("finished"), "{}", told[0]);
    assert!(first.wait_exit().await?.success());
    Ok(())
}

/// What one race came to.
#[derive(Debug, Default)]
struct RaceOutcome {
    /// The files do not hold two whole turns one after the other.
    interleaved: Option<String>,
    /// Anything else that went against the rules: not exactly one writer, a refusal that does not
    /// name the holder, a takeover that failed.
    wrong: Option<String>,
}

/// One race: two processes start on a new session at once and both prompt at once. Exactly one turn
/// must run, the other be refused naming the winner; then the winner leaves (SIGKILL or EOF,
/// alternately), the loser's next prompt runs, and the files hold the two turns one after the other.
async fn race(home: &TestHome, attempt: u64) -> Result<RaceOutcome> {
    let id = format!("race-{attempt}");
    let (a, b) = tokio::try_join!(start(home, &id, plain_init()), start(home, &id, plain_init()))?;
    let (mut a, a_init) = a;
    let (mut b, b_init) = b;
    let (a_pid, b_pid) = (pid_of(&a)?, pid_of(&b)?);
    let (a_input, b_input) = (format!("a{attempt}"), format!("b{attempt}"));
    let (a_prompt, b_prompt) = (
        a.start_prompt(json!(a_input)).await?,
        b.start_prompt(json!(b_input)).await?,
    );
    let ((a_done, _), (b_done, _)) =
        tokio::try_join!(a.read_response(&a_prompt), b.read_response(&b_prompt))?;
    let finished = json!({"status": "finished"});
    let mut outcome = RaceOutcome::default();
    let mut expected_turns = Vec::new();
    match (a_done["result"] == finished, b_done["result"] == finished) {
        (true, true) => {
            outcome.wrong = Some("both processes ran a turn".into());
            a.wait_exit().await?;
            b.wait_exit().await?;
        }
        (false, false) => bail!("nobody ran a turn: {a_done} / {b_done}"),
        (a_won, _) => {
            let (mut winner, mut loser, winner_pid, refusal, loser_init, first, second) = if a_won {
                (a, b, a_pid, b_done, b_init, a_input, b_input)
            } else {
                (b, a, b_pid, a_done, a_init, b_input, a_input)
            };
            if refusal["error"] != in_use(&id, winner_pid)
                || loser_init["session_held_by"] != json!({"pid": winner_pid})
            {
                outcome.wrong = Some(format!(
                    "the refusal does not name the holder {winner_pid}: {} after {}",
                    refusal["error"], loser_init["session_held_by"]
                ));
            }
            if attempt.is_multiple_of(2) {
                winner.child.kill().await?;
            } else {
                ensure!(
                    winner.wait_exit().await?.success(),
                    "the winner did not exit cleanly"
                );
            }
            let (done, _) = loser.prompt(json!(second)).await?;
            if done["result"] != finished {
                outcome.wrong = Some(format!("the takeover prompt failed: {done}"));
            }
            ensure!(
                loser.wait_exit().await?.success(),
                "the loser did not exit cleanly"
            );
            expected_turns = vec![json!(first), json!(second)];
        }
    }
    let dir = session_dir(home, &id);
    let roles = context_roles(&dir.join("context.jsonl"))?;
    if roles != roles_of_turns(2) {
        outcome.interleaved = Some(format!("context.jsonl: {roles:?}"));
        return Ok(outcome);
    }
    match recorded_turns(&dir) {
        Err(e) => outcome.interleaved = Some(format!("wire.jsonl: {e:#}")),
        Ok(turns) if !expected_turns.is_empty() && turns != expected_turns => {
            outcome.wrong = Some(format!("wire.jsonl holds other turns: {turns:?}"));
        }
        Ok(_) => {}
    }
    Ok(outcome)
}

/// The reliability figure: N races of two writers on one session, zero interleaved records.
#[tokio::test]
async fn two_writers_racing_for_one_session_never_interleave() -> Result<()> {
    let attempts = match std::env::var("KIMI_LOCK_ATTEMPTS") {
        Ok(value) => value.parse().context("KIMI_LOCK_ATTEMPTS")?,
        Err(_) => DEFAULT_ATTEMPTS,
    };
    let home = TestHome::new()?.scripted(&["text: answer"])?;
    let (mut interleaved, mut wrong) = (Vec::new(), Vec::new());
    for attempt in 0..attempts {
        let outcome = race(&home, attempt).await?;
        interleaved.extend(outcome.interleaved.map(|why| format!("attempt {attempt}: {why}")));
        wrong.extend(outcome.wrong.map(|why| format!("attempt {attempt}: {why}")));
    }
    report(attempts, interleaved.len(), wrong.len());
    ensure!(
        interleaved.is_empty() && wrong.is_empty(),
        "interleaved: {interleaved:#?}\nagainst the rules: {wrong:#?}"
    );
    Ok(())
}

#[expect(clippy::print_stderr, reason = "the figure docs/reliability.md quotes")]
fn report(attempts: u64, interleaved: usize, wrong: usize) {
    eprintln!(
        "session lock race: {attempts} attempts, {interleaved} with interleaved records, \
         {wrong} with two writers or a wrong refusal"
    );
}
