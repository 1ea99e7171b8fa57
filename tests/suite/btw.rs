//! Side questions (`/btw <question>`, issue 18): answered from the conversation as it stands, idle or
//! during a turn, in at most two model calls and without tools; never in the context, always in
//! wire.jsonl. What the model saw is read from the requests the mock server received.

use std::path::PathBuf;

use anyhow::{Result, bail};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply, message_text};
use crate::common::{
    TestHome, WireProcess, approval_answer, init_with_error_data, kinds, payloads, rpc_result,
};

const QUESTION: &str = "which file were we talking about?";
const ANSWER: &str = "notes.txt, the one with the shopping list.";

fn home_for(model: &MockModel) -> Result<TestHome> {
    TestHome::new()?.with_config(&model.config(json!({})))
}

fn session_dir(home: &TestHome) -> Result<PathBuf> {
    match home.session_dirs().as_slice() {
        [dir] => Ok(dir.clone()),
        dirs => bail!("expected one session, found {dirs:?}"),
    }
}

/// Whether a request's last message is the side question.
fn asks_the_question(messages: &[Value]) -> bool {
    messages
        .last()
        .is_some_and(|m| m["role"] == "user" && message_text(m).ends_with(QUESTION))
}

/// Every text the model was sent in one request.
fn all_text(messages: &[Value]) -> String {
    messages.iter().map(message_text).collect::<Vec<_>>().join("\n")
}

/// The events and requests between a `prompt`'s sending and its answer, without the answer.
fn btw_pair(messages: &[Value]) -> Result<(Value, Value)> {
    let begin = payloads(messages, "BtwBegin");
    let end = payloads(messages, "BtwEnd");
    match (begin.as_slice(), end.as_slice()) {
        ([begin], [end]) => Ok(((*begin).clone(), (*end).clone())),
        _ => bail!("expected one BtwBegin and one BtwEnd in {messages:?}"),
    }
}

#[tokio::test]
async fn a_side_question_while_idle_is_answered_from_the_conversation_and_kept_out_of_it() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        if asks_the_question(messages) {
            Reply::Text(ANSWER.into())
        } else if all_text(messages).contains("and then?") {
            Reply::Text("Then we are done.".into())
        } else {
            Reply::Text("Noted: notes.txt holds the shopping list.".into())
        }
    })
    .await;
    let home = home_for(&model)?;
    let mut wire = WireProcess::spawn(&home).await?;
    let init = wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let listed = init["slash_commands"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["name"] == "btw")
        .cloned();
    assert_eq!(
        listed,
        Some(
            json!({"name": "btw", "description": "Ask a side question without interrupting the main conversation", "aliases": []})
        )
    );
    let (response, _) = wire.prompt(json!("remember notes.txt")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let id = wire.start_prompt(json!(format!("/btw {QUESTION}"))).await?;
    let (response, messages) = wire.read_response(&id).await?;
    assert_eq!(response, rpc_result(&id, json!({"status": "finished"})));
    // No turn: only the side question's own pair.
    assert_eq!(kinds(&messages), ["event:BtwBegin", "event:BtwEnd"]);
    let (begin, end) = btw_pair(&messages)?;
    assert_eq!(begin["question"], QUESTION);
    assert_eq!(begin["id"].as_str().map(str::len), Some(12));
    assert_eq!(end, json!({"id": begin["id"], "response": ANSWER, "error": null}));

    let (response, _) = wire.prompt(json!("and then?")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));

    let requests = model.requests().await;
    assert_eq!(
        requests.len(),
        3,
        "one model call per turn and one for the side question"
    );
    // The side question saw the conversation so far, then itself in a system reminder.
    let side = &requests[1];
    let roles: Vec<&str> = side.iter().filter_map(|m| m["role"].as_str()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "user"]);
    assert_eq!(message_text(&side[1]), "remember notes.txt");
    let asked = message_text(&side[3]);
    assert!(asked.starts_with("<system-reminder>\n"), "{asked}");
    assert!(
        asked.ends_with(&format!("</system-reminder>\n\n{QUESTION}")),
        "{asked}"
    );
    // Offered the same tools as the main loop (so the prompt cache still matches).
    let bodies = model.server.received_requests().await.unwrap_or_default();
    let tools = |i: usize| serde_json::from_slice::<Value>(&bodies[i].body).map(|b| b["tools"].clone());
    assert_eq!(tools(1)?, tools(0)?);
    // The next turn knows nothing of it.
    let next = all_text(&requests[2]);
    assert!(!next.contains(QUESTION) && !next.contains(ANSWER), "{next}");

    // Recorded in wire.jsonl, so replay shows it; never in context.jsonl.
    let dir = session_dir(&home)?;
    let context = std::fs::read_to_string(dir.join("context.jsonl"))?;
    assert!(
        !context.contains(QUESTION) && !context.contains(ANSWER),
        "{context}"
    );
    let id = wire.request("replay", json!({})).await?;
    let (response, replayed) = wire.read_response(&id).await?;
    assert_eq!(response["result"]["status"], "finished");
    let (replayed_begin, replayed_end) = btw_pair(&replayed)?;
    assert_eq!((replayed_begin, replayed_end), (begin, end));
    Ok(())
}

#[tokio::test]
async fn a_side_question_during_a_turn_is_answered_before_the_turn_ends_and_leaves_it_untouched() -> Result<()>
{
    let model = MockModel::start(|_, messages| {
        let has_result = messages.iter().any(|m| m["role"] == "tool");
        if asks_the_question(messages) {
            Reply::Text(ANSWER.into())
        } else if all_text(messages).contains("one more thing") {
            Reply::Text("Sure.".into())
        } else if has_result {
            Reply::Text("Written.".into())
        } else {
            Reply::call(
                "w1",
                "WriteFile",
                json!({"path": "notes.txt", "content": "eggs\n"}),
            )
        }
    })
    .await;
    let home = home_for(&model)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let turn = wire
        .start_prompt(json!("write the shopping list to notes.txt"))
        .await?;
    // The turn waits for the user: it is running, and stays so until the approval is answered.
    let approval = wire.peek_request("ApprovalRequest").await?;

    // A normal prompt is refused, the side question is not.
    let refused = wire.start_prompt(json!("something else")).await?;
    let answer = wire.response_to(&refused).await?;
    assert_eq!(answer["error"]["code"], -32000, "{answer}");
    let side = wire.start_prompt(json!(format!("/btw {QUESTION}"))).await?;
    let answer = wire.response_to(&side).await?;
    assert_eq!(answer, rpc_result(&side, json!({"status": "finished"})));

    wire.send(&approval_answer(&approval, "approve")).await?;
    let (response, messages) = wire.read_response(&turn).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    // The pair went out while the turn ran: after its ApprovalRequest, before its TurnEnd.
    let order = kinds(&messages);
    let at = |kind: &str| order.iter().position(|k| k == kind);
    let (begin, end) = btw_pair(&messages)?;
    assert!(
        at("request:ApprovalRequest") < at("event:BtwBegin") && at("event:BtwEnd") < at("event:TurnEnd"),
        "{order:?}"
    );
    assert_eq!(end["response"], ANSWER);
    assert_eq!(begin["question"], QUESTION);
    assert_eq!(std::fs::read_to_string(home.work().join("notes.txt"))?, "eggs\n");

    let (response, _) = wire.prompt(json!("one more thing")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let requests = model.requests().await;
    assert_eq!(requests.len(), 4);
    // The side question saw the running turn's prompt, not the step still waiting for approval.
    let side = requests
        .iter()
        .find(|r| asks_the_question(r))
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        side.iter().filter_map(|m| m["role"].as_str()).collect::<Vec<_>>(),
        ["system", "user"],
        "{side:?}"
    );
    assert!(message_text(&side[1]).starts_with("write the shopping list to notes.txt"));
    // The turn's own next request and the next turn's know nothing of it.
    for request in requests.iter().filter(|r| !asks_the_question(r)) {
        let text = all_text(request);
        assert!(!text.contains(QUESTION) && !text.contains(ANSWER), "{text}");
    }
    Ok(())
}

/// A turn busy on its own (a command reading a FIFO nobody has opened yet, under `--yolo`): the side
/// question is answered while the command runs; only then is the FIFO opened and the turn let end.
#[tokio::test]
async fn a_side_question_is_answered_while_a_command_of_the_turn_runs() -> Result<()> {
    let model = MockModel::start(|_, messages| {
        if asks_the_question(messages) {
            Reply::Text(ANSWER.into())
        } else if messages.iter().any(|m| m["role"] == "tool") {
            Reply::Text("Read it.".into())
        } else {
            Reply::call("s1", "Shell", json!({"command": "cat gate"}))
        }
    })
    .await;
    let home = home_for(&model)?.arg("--yolo");
    let gate = home.work().join("gate");
    let made = std::process::Command::new("mkfifo").arg(&gate).status()?;
    assert!(made.success(), "mkfifo failed");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let turn = wire.start_prompt(json!("read the gate")).await?;
    wire.wait_event("ToolCall").await?;

    let side = wire.start_prompt(json!(format!("/btw {QUESTION}"))).await?;
    let (answer, during) = wire.read_response(&side).await?;
    assert_eq!(answer, rpc_result(&side, json!({"status": "finished"})));
    let (_, end) = btw_pair(&during)?;
    assert_eq!(end["response"], ANSWER);
    assert!(
        payloads(&during, "ToolResult").is_empty() && payloads(&during, "TurnEnd").is_empty(),
        "the command was still running: {during:?}"
    );

    // Let the command finish: the turn goes on and ends as it would have.
    let writer = tokio::task::spawn_blocking(move || std::fs::write(gate, "opened\n"));
    let (response, rest) = wire.read_response(&turn).await?;
    writer.await??;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let result = payloads(&rest, "ToolResult");
    assert_eq!(result.len(), 1, "{rest:?}");
    assert_eq!(result[0]["return_value"]["output"], "opened\n");
    // The turn's next request knows nothing of the side question.
    let requests = model.requests().await;
    let after = requests.last().cloned().unwrap_or_default();
    let text = all_text(&after);
    assert!(
        text.contains("opened") && !text.contains(QUESTION) && !text.contains(ANSWER),
        "{text}"
    );
    Ok(())
}

#[tokio::test]
async fn a_side_question_that_calls_tools_gets_one_more_chance_then_fails() -> Result<()> {
    // Second chance taken: the refused call is answered and the model answers in text.
    let model = MockModel::start(|_, messages| {
        if messages.iter().any(|m| m["role"] == "tool") {
            Reply::Text(ANSWER.into())
        } else {
            Reply::call("r1", "ReadFile", json!({"path": "notes.txt"}))
        }
    })
    .await;
    let home = home_for(&model)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!(format!("/btw {QUESTION}"))).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(btw_pair(&messages)?.1["response"], ANSWER);
    assert_eq!(
        kinds(&messages),
        ["event:BtwBegin", "event:BtwEnd"],
        "no tool ran"
    );
    let requests = model.requests().await;
    assert_eq!(requests.len(), 2);
    let refusal = requests[1].last().cloned().unwrap_or_default();
    assert_eq!(refusal["role"], "tool");
    assert_eq!(refusal["tool_call_id"], "r1");
    assert_eq!(
        message_text(&refusal),
        "Tool calls are disabled for side questions. Answer with text only."
    );

    // A model that insists: two calls, then the failure names the tools.
    let model = MockModel::start(|_, _| Reply::call("s1", "Shell", json!({"command": "ls"}))).await;
    let home = home_for(&model)?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!(format!("/btw {QUESTION}"))).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let (_, end) = btw_pair(&messages)?;
    assert_eq!(end["response"], Value::Null);
    assert_eq!(
        end["error"],
        "Side question tried to call tools (Shell) instead of answering directly. Try rephrasing or ask in the main conversation."
    );
    assert_eq!(model.requests().await.len(), 2, "at most two model calls");
    assert!(!home.work().join("ls").exists());
    Ok(())
}

#[tokio::test]
async fn side_question_failures_end_the_pair_and_the_server_goes_on() -> Result<()> {
    // One scripted answer: the first side question uses it, the second finds the script exhausted.
    let home = TestHome::new()?.scripted(&["text: It is Tuesday."])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_error_data()).await?;
    let (_, messages) = wire.prompt(json!("/btw what day is it?")).await?;
    assert_eq!(btw_pair(&messages)?.1["response"], "It is Tuesday.");
    let (response, messages) = wire.prompt(json!("/btw and tomorrow?")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let (_, end) = btw_pair(&messages)?;
    assert_eq!(end["response"], Value::Null);
    assert_eq!(end["error"], "ScriptedEchoChatProvider exhausted at turn 2.");
    // Without a question: the usage, and no model call.
    let (response, messages) = wire.prompt(json!("/btw   ")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let (begin, end) = btw_pair(&messages)?;
    assert_eq!(begin["question"], "");
    assert_eq!(end["error"], "Usage: /btw <question>");
    wire.assert_alive_with_data().await?;

    // No model: refused before anything starts, as a prompt would be.
    let home = TestHome::new()?.with_config(&json!({}))?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(init_with_error_data()).await?;
    let (response, messages) = wire.prompt(json!("/btw anything?")).await?;
    assert_eq!(
        response["error"],
        json!({"code": -32001, "message": "LLM is not set", "data": {"kind": "llm_not_set"}})
    );
    assert_eq!(kinds(&messages), Vec::<String>::new());
    Ok(())
}
