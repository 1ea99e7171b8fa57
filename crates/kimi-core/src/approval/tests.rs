//! Approval runtime tests against a real wire server on an in-memory pipe, the test playing the client.

use std::sync::Arc;
use std::time::Duration;

use kimi_wire::message::DisplayBlock;
use kimi_wire::testing::FakeClient;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::*;

/// How long a test waits for a request to be decided.
const READ_TIMEOUT: Duration = Duration::from_secs(10);

fn runtime(client: &FakeClient, state: ApprovalState) -> Arc<ApprovalRuntime> {
    Arc::new(ApprovalRuntime::new(client.handle.clone(), state))
}

fn ask(action: &str, command: &str) -> ApprovalAsk {
    ApprovalAsk {
        action: action.to_owned(),
        description: format!("Run command `{command}`"),
        display: vec![DisplayBlock::Shell {
            language: "bash".to_owned(),
            command: command.to_owned(),
        }],
        detail_display: Vec::new(),
        writes: Vec::new(),
    }
}

fn source(id: &str) -> ApprovalSource {
    ApprovalSource {
        kind: ApprovalSourceKind::ForegroundTurn,
        id: id.to_owned(),
        agent_id: None,
        subagent_type: None,
    }
}

/// Starts a request in the background, as a tool call would.
fn spawn_request(
    runtime: &Arc<ApprovalRuntime>,
    source: ApprovalSource,
    tool_call_id: &str,
    ask: ApprovalAsk,
) -> JoinHandle<Verdict> {
    let runtime = Arc::clone(runtime);
    let tool_call_id = tool_call_id.to_owned();
    tokio::spawn(async move { runtime.request(&source, &tool_call_id, "Shell", &ask).await })
}

async fn verdict(task: JoinHandle<Verdict>) -> Verdict {
    tokio::time::timeout(READ_TIMEOUT, task)
        .await
        .expect("the request did not finish in time")
        .expect("the request task panicked")
}

fn response_event(request_id: &Value, response: &str, feedback: &str) -> Value {
    json!({
        "type": "ApprovalResponse",
        "payload": {"request_id": request_id, "response": response, "feedback": feedback},
    })
}

#[tokio::test]
async fn yolo_and_afk_approve_without_asking() {
    let mut client = FakeClient::start();
    for state in [
        ApprovalState {
            yolo: true,
            ..ApprovalState::default()
        },
        ApprovalState {
            afk: true,
            ..ApprovalState::default()
        },
    ] {
        let runtime = runtime(&client, state);
        assert!(runtime.state().yolo || runtime.state().afk);
        let verdict = runtime
            .request(&source("turn-1"), "tc-1", "Shell", &ask("run command", "ls"))
            .await;
        assert_eq!(verdict, Verdict::Approved);
    }
    client.assert_quiet().await;
}

#[tokio::test]
async fn switching_yolo_on_and_off_takes_effect_at_once() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());
    assert!(!runtime.state().yolo && !runtime.state().afk);
    runtime.set_yolo(true);
    assert_eq!(
        runtime
            .request(&source("t"), "tc-1", "Shell", &ask("run command", "ls"))
            .await,
        Verdict::Approved
    );
    runtime.set_yolo(false);
    let task = spawn_request(&runtime, source("t"), "tc-2", ask("run command", "ls"));
    let (id, _) = client.next_request("ApprovalRequest").await;
    client
        .respond(&id, json!({"request_id": id, "response": "approve"}))
        .await;
    assert_eq!(verdict(task).await, Verdict::Approved);
}

#[tokio::test]
async fn approve_sends_the_request_then_reports_the_response() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());
    let task = spawn_request(&runtime, source("turn-1"), "tc-1", ask("run command", "touch x"));
    let (id, payload) = client.next_request("ApprovalRequest").await;
    assert_eq!(
        payload,
        json!({
            "id": id,
            "tool_call_id": "tc-1",
            "sender": "Shell",
            "action": "run command",
            "description": "Run command `touch x`",
            "source_kind": "foreground_turn",
            "source_id": "turn-1",
            "agent_id": null,
            "subagent_type": null,
            "source_description": null,
            "display": [{"type": "shell", "language": "bash", "command": "touch x"}],
        })
    );
    client
        .respond(&id, json!({"request_id": id, "response": "approve"}))
        .await;
    assert_eq!(verdict(task).await, Verdict::Approved);
    assert_eq!(client.next_event().await, response_event(&id, "approve", ""));
    // A plain approve is not remembered.
    assert_eq!(runtime.state().auto_approve_actions.len(), 0);
    let again = spawn_request(&runtime, source("turn-1"), "tc-2", ask("run command", "touch x"));
    let (id, _) = client.next_request("ApprovalRequest").await;
    client
        .respond(&id, json!({"request_id": id, "response": "approve"}))
        .await;
    assert_eq!(verdict(again).await, Verdict::Approved);
}

#[tokio::test]
async fn a_subagent_request_carries_its_source() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());
    let subagent = ApprovalSource {
        kind: ApprovalSourceKind::BackgroundAgent,
        id: "task-7".to_owned(),
        agent_id: Some("agent-1".to_owned()),
        subagent_type: Some("coder".to_owned()),
    };
    let task = spawn_request(&runtime, subagent, "tc-1", ask("run command", "ls"));
    let (id, payload) = client.next_request("ApprovalRequest").await;
    assert_eq!(payload["source_kind"], "background_agent");
    assert_eq!(payload["source_id"], "task-7");
    assert_eq!(payload["agent_id"], "agent-1");
    assert_eq!(payload["subagent_type"], "coder");
    client
        .respond(&id, json!({"request_id": id, "response": "reject"}))
        .await;
    assert_eq!(verdict(task).await, Verdict::Rejected { feedback: None });
}

#[tokio::test]
async fn approve_for_session_releases_waiting_requests_and_is_remembered() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());
    let first = spawn_request(&runtime, source("t"), "tc-1", ask("run command", "a"));
    let (first_id, _) = client.next_request("ApprovalRequest").await;
    let second = spawn_request(&runtime, source("t"), "tc-2", ask("run command", "b"));
    let (second_id, _) = client.next_request("ApprovalRequest").await;
    let other = spawn_request(&runtime, source("t"), "tc-3", ask("edit file", "c"));
    let (other_id, _) = client.next_request("ApprovalRequest").await;

    client
        .respond(
            &first_id,
            json!({"request_id": first_id, "response": "approve_for_session"}),
        )
        .await;
    assert_eq!(verdict(first).await, Verdict::Approved);
    assert_eq!(verdict(second).await, Verdict::Approved);
    let mut events = vec![client.next_event().await, client.next_event().await];
    events.sort_by_key(|e| e["payload"]["request_id"] != first_id);
    assert_eq!(
        events,
        vec![
            response_event(&first_id, "approve_for_session", ""),
            response_event(&second_id, "approve", ""),
        ]
    );
    assert_eq!(
        runtime.state().auto_approve_actions,
        ["run command".to_owned()].into()
    );

    // Later requests for the action pass without asking; other actions still ask.
    let later = runtime
        .request(&source("t2"), "tc-4", "Shell", &ask("run command", "d"))
        .await;
    assert_eq!(later, Verdict::Approved);
    client.assert_quiet().await;
    assert!(!other.is_finished());
    client
        .respond(&other_id, json!({"request_id": other_id, "response": "reject"}))
        .await;
    assert_eq!(verdict(other).await, Verdict::Rejected { feedback: None });
}

#[tokio::test]
async fn reject_with_and_without_feedback() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());

    let task = spawn_request(&runtime, source("t"), "tc-1", ask("run command", "rm -rf x"));
    let (id, _) = client.next_request("ApprovalRequest").await;
    client
        .respond(&id, json!({"request_id": id, "response": "reject"}))
        .await;
    assert_eq!(verdict(task).await, Verdict::Rejected { feedback: None });
    assert_eq!(client.next_event().await, response_event(&id, "reject", ""));

    let task = spawn_request(&runtime, source("t"), "tc-2", ask("run command", "rm -rf x"));
    let (id, _) = client.next_request("ApprovalRequest").await;
    client
        .respond(
            &id,
            json!({"request_id": id, "response": "reject", "feedback": "use the trash instead"}),
        )
        .await;
    assert_eq!(
        verdict(task).await,
        Verdict::Rejected {
            feedback: Some("use the trash instead".to_owned())
        }
    );
    assert_eq!(
        client.next_event().await,
        response_event(&id, "reject", "use the trash instead")
    );
    // An empty feedback counts as none.
    let task = spawn_request(&runtime, source("t"), "tc-3", ask("run command", "rm -rf x"));
    let (id, _) = client.next_request("ApprovalRequest").await;
    client
        .respond(
            &id,
            json!({"request_id": id, "response": "reject", "feedback": ""}),
        )
        .await;
    assert_eq!(verdict(task).await, Verdict::Rejected { feedback: None });
}

#[tokio::test]
async fn malformed_answers_and_client_errors_reject() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());
    for garbage in [
        json!({"request_id": "x", "response": "maybe"}),
        json!("approve"),
        json!(null),
        json!({"approved": true}),
    ] {
        let task = spawn_request(&runtime, source("t"), "tc-1", ask("run command", "ls"));
        let (id, _) = client.next_request("ApprovalRequest").await;
        client.respond(&id, garbage.clone()).await;
        assert_eq!(
            verdict(task).await,
            Verdict::Rejected { feedback: None },
            "{garbage}"
        );
        assert_eq!(client.next_event().await, response_event(&id, "reject", ""));
    }
    let task = spawn_request(&runtime, source("t"), "tc-2", ask("run command", "ls"));
    let (id, _) = client.next_request("ApprovalRequest").await;
    client.respond_error(&id, -32000, "nope").await;
    assert_eq!(verdict(task).await, Verdict::Rejected { feedback: None });
    assert!(runtime.state().auto_approve_actions.is_empty());
}

#[tokio::test]
async fn an_abandoned_request_rejects() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());
    let task = spawn_request(&runtime, source("t"), "tc-1", ask("run command", "ls"));
    let _ = client.next_request("ApprovalRequest").await;
    // The client goes away: the server abandons every pending request.
    drop(client);
    assert_eq!(verdict(task).await, Verdict::Rejected { feedback: None });
}

#[tokio::test]
async fn cancel_source_reports_rejections_for_that_source_only() {
    let mut client = FakeClient::start();
    let runtime = runtime(&client, ApprovalState::default());
    let mine = spawn_request(&runtime, source("turn-1"), "tc-1", ask("run command", "a"));
    let (mine_id, _) = client.next_request("ApprovalRequest").await;
    let theirs = spawn_request(&runtime, source("turn-2"), "tc-2", ask("run command", "b"));
    let (theirs_id, _) = client.next_request("ApprovalRequest").await;

    runtime.cancel_source("turn-1").await;
    assert_eq!(client.next_event().await, response_event(&mine_id, "reject", ""));
    client.assert_quiet().await;
    // Nothing more to reject for that source.
    runtime.cancel_source("turn-1").await;
    client.assert_quiet().await;

    // The other source's request is still answerable.
    client
        .respond(
            &theirs_id,
            json!({"request_id": theirs_id, "response": "approve"}),
        )
        .await;
    assert_eq!(verdict(theirs).await, Verdict::Approved);
    mine.abort();
}

#[test]
fn descriptions_say_what_approve_for_session_covers() {
    let ask = |action: &str| ApprovalAsk {
        action: action.to_owned(),
        description: "Do it".to_owned(),
        display: Vec::new(),
        detail_display: Vec::new(),
        writes: Vec::new(),
    };
    // Kinds the reference words keep its text unless the client gets details.
    for action in ["run command", "edit file", "mcp:ping"] {
        assert_eq!(describe(&ask(action), false), "Do it");
        assert_eq!(
            describe(&ask(action), true),
            format!("Do it (approve for session covers every \"{action}\" request)")
        );
    }
    assert_eq!(
        describe(&ask("fetch from example.com"), false),
        "Do it (approve for session covers every \"fetch from example.com\" request)"
    );
}

#[tokio::test]
async fn details_follow_the_client_that_initialized() {
    let mut client = FakeClient::start();
    let runtime = Arc::new(
        ApprovalRuntime::new(client.handle.clone(), ApprovalState::default())
            .with_details(ApprovalDetails::Auto),
    );
    let mut call = ask("mcp:echo", "x");
    call.detail_display = vec![DisplayBlock::Brief {
        text: "Arguments: {}".to_owned(),
    }];
    let shell = json!({"type": "shell", "language": "bash", "command": "x"});
    let brief = json!({"type": "brief", "text": "Arguments: {}"});
    let plain = (json!("Run command `x`"), json!([shell]));
    let detailed = (
        json!("Run command `x` (approve for session covers every \"mcp:echo\" request)"),
        json!([shell, brief]),
    );
    let named: InitializeParams =
        serde_json::from_value(json!({"protocol_version": "1.10", "client": {"name": "editor"}})).unwrap();
    let anonymous: InitializeParams = serde_json::from_value(json!({"protocol_version": "1.10"})).unwrap();
    // Before `initialize`, then for a named client, then for an anonymous one that initialized again.
    for (client_params, expected) in [
        (None, &plain),
        (Some(&named), &detailed),
        (Some(&anonymous), &plain),
    ] {
        if let Some(params) = client_params {
            runtime.set_client(params);
        }
        let task = spawn_request(&runtime, source("turn-1"), "tc-1", call.clone());
        let (id, payload) = client.next_request("ApprovalRequest").await;
        assert_eq!(
            (&payload["description"], &payload["display"]),
            (&expected.0, &expected.1),
            "{client_params:?}"
        );
        client
            .respond(&id, json!({"request_id": payload["id"], "response": "approve"}))
            .await;
        assert_eq!(verdict(task).await, Verdict::Approved);
        client.next_event().await;
    }
}
