//! seeds/002 "状态管理" and "协作类": TodoList, Agent, AskUserQuestion and Skill.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::{calling, kimi_code, not_found, step, turn};
use crate::common::{TestHome, WireProcess, payloads};

#[tokio::test]
async fn todo_list_sets_reads_and_clears_without_asking() -> Result<()> {
    let todos = json!([{"title": "write", "status": "done"}, {"title": "test", "status": "in_progress"}]);
    let set = step(&[("t-1", "TodoList", json!({"todos": todos}))]);
    let read = step(&[("t-2", "TodoList", json!({}))]);
    let clear = step(&[("t-3", "TodoList", json!({"todos": []}))]);
    let again = step(&[("t-4", "TodoList", json!({})), ("t-5", "SetTodoList", json!({}))]);
    let home = TestHome::new()?.scripted(&[&set, &read, &clear, &again, "text: done"])?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "plan").await?;
    assert_eq!(turn.actions(), Vec::<String>::new());
    assert_eq!(turn.message("t-1")?, "Todo list updated");
    assert_eq!(
        turn.result("t-1")?["display"],
        json!([{"type": "todo", "items": todos}])
    );
    assert_eq!(
        turn.output("t-2")?,
        "Current todo list:\n- [done] write\n- [in_progress] test"
    );
    assert_eq!(turn.output("t-4")?, "Todo list is empty.");
    assert_eq!(turn.message("t-5")?, not_found("SetTodoList"));
    Ok(())
}

/// A report long enough that the subagent is not asked for more detail.
fn long_report() -> String {
    format!(
        "text: {}",
        "The notes say hello and nothing else matters. "
            .repeat(6)
            .trim_end()
    )
}

#[tokio::test]
async fn agent_runs_a_coder_with_the_kimi_code_tools_and_checks_its_arguments() -> Result<()> {
    let root = step(&[
        (
            "a-1",
            "Agent",
            json!({"prompt": "p", "description": "d", "subagent_type": "coder", "resume": "a1234abcd"}),
        ),
        (
            "a-2",
            "Agent",
            json!({"prompt": "p", "description": "d", "timeout": 10}),
        ),
        (
            "a-3",
            "Agent",
            json!({"prompt": "Read notes.txt", "description": "read notes"}),
        ),
        (
            "a-4",
            "Agent",
            json!({"prompt": "p", "description": "d", "timeout": 3601}),
        ),
    ]);
    let sub = step(&[("r-1", "Read", json!({"path": "notes.txt"}))]);
    let report = long_report();
    let home = TestHome::new()?.scripted(&[&root, &sub, &report, "text: done"])?;
    std::fs::write(home.work().join("notes.txt"), "hello\n")?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "delegate").await?;
    assert_eq!(
        turn.message("a-1")?,
        "Error validating JSON arguments: 1 validation error for Params\n  Value error, subagent_type and \
         resume are mutually exclusive: a resumed agent is addressed by its id only, and keeps its type"
    );
    assert_eq!(
        turn.message("a-2")?,
        "Error validating JSON arguments: 1 validation error for Params\ntimeout\n  Input should be greater \
         than or equal to 30"
    );
    assert_eq!(
        turn.message("a-4")?,
        "Error validating JSON arguments: 1 validation error for Params\ntimeout\n  Input should be less than \
         or equal to 3600"
    );
    let output = turn.output("a-3")?;
    assert!(
        output.contains("actual_subagent_type: coder\nstatus: completed"),
        "{output}"
    );
    // The subagent used the kimi-code `Read`, and nothing needed approval.
    let inner: Vec<&Value> = payloads(&turn.messages, "SubagentEvent")
        .into_iter()
        .map(|e| &e["event"])
        .collect();
    let call = inner
        .iter()
        .find(|e| e["type"] == "ToolCall")
        .context("the subagent made no call")?;
    assert_eq!(call["payload"]["function"]["name"], json!("Read"));
    let result = inner
        .iter()
        .find(|e| e["type"] == "ToolResult")
        .context("no subagent result")?;
    assert_eq!(
        result["payload"]["return_value"]["output"],
        json!("     1\thello\n")
    );
    assert_eq!(turn.actions(), Vec::<String>::new());
    Ok(())
}

#[tokio::test]
async fn ask_user_question_asks_a_client_that_can_answer_and_fails_clearly_otherwise() -> Result<()> {
    let question = json!({"questions": [{
        "question": "Which database?", "header": "Storage",
        "options": [{"label": "SQLite", "description": "simple"}, {"label": "Postgres", "description": "big"}]
    }]});
    let home = calling(&[("q-1", "AskUserQuestion", question.clone())])?;
    let (_home, mut wire) = kimi_code(home).await?;
    let prompt = wire.start_prompt(json!("choose")).await?;
    let request = wire.wait_request("QuestionRequest").await?;
    let payload = &request["params"]["payload"];
    assert_eq!(payload["questions"][0]["header"], json!("Storage"));
    wire.respond(
        request["id"].as_str().unwrap_or_default(),
        json!({"request_id": payload["id"], "answers": {"Which database?": "SQLite"}}),
    )
    .await?;
    let (_, events) = wire.read_response(&prompt).await?;
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(result["is_error"], json!(false));
    assert!(
        result["output"].as_str().unwrap_or_default().contains("SQLite"),
        "{result}"
    );
    drop(wire);

    // A client that cannot answer questions gets a tool error telling the model to ask in text.
    let home = calling(&[("q-2", "AskUserQuestion", question)])?
        .arg("--agent")
        .arg("kimi-code");
    let mut plain = WireProcess::spawn(&home).await?;
    plain.initialize(json!({"protocol_version": "1.10"})).await?;
    let (_, events) = plain.prompt(json!("choose")).await?;
    let result = &payloads(&events, "ToolResult")[0]["return_value"];
    assert_eq!(
        result["message"],
        json!(
            "The connected client does not support interactive questions. Do NOT call this tool again. Ask \
             the user directly in your text response instead."
        )
    );
    Ok(())
}

#[tokio::test]
async fn ask_user_question_holds_seeds_limits_before_asking() -> Result<()> {
    let option = |label: &str| json!({"label": label, "description": ""});
    let asked = |header: &str, options: Vec<Value>| json!({"question": "Which one?", "header": header, "options": options});
    let two = || vec![option("a"), option("b")];
    let home = calling(&[
        ("q-1", "AskUserQuestion", json!({"questions": []})),
        (
            "q-2",
            "AskUserQuestion",
            json!({"questions": vec![asked("", two()); 5]}),
        ),
        (
            "q-3",
            "AskUserQuestion",
            json!({"questions": [asked("", vec![option("a")])]}),
        ),
        (
            "q-4",
            "AskUserQuestion",
            json!({"questions": [asked("", vec![option("a"), option("b"), option("c"), option("d"), option("e")])]}),
        ),
        (
            "q-5",
            "AskUserQuestion",
            json!({"questions": [asked("Twelve chars", two()), asked("Thirteen char", two())]}),
        ),
    ])?;
    let (_home, mut wire) = kimi_code(home).await?;
    // Every call is refused before a question reaches the client (`turn` answers no questions).
    let turn = turn(&mut wire, "ask").await?;
    let invalid =
        |detail: &str| format!("Error validating JSON arguments: 1 validation error for Params\n{detail}");
    assert_eq!(
        turn.message("q-1")?,
        invalid("questions\n  List should have at least 1 item after validation, not 0")
    );
    assert_eq!(
        turn.message("q-2")?,
        invalid("questions\n  List should have at most 4 items after validation, not 5")
    );
    assert_eq!(
        turn.message("q-3")?,
        invalid("questions.0.options\n  List should have at least 2 items after validation, not 1")
    );
    assert_eq!(
        turn.message("q-4")?,
        invalid("questions.0.options\n  List should have at most 4 items after validation, not 5")
    );
    // seeds/002: a header of at most 12 characters (the reference only suggests it).
    assert_eq!(
        turn.message("q-5")?,
        invalid("questions.1.header\n  String should have at most 12 characters")
    );
    assert!(
        !turn
            .messages
            .iter()
            .any(|m| m["params"]["type"] == "QuestionRequest"),
        "nothing was asked"
    );
    Ok(())
}

#[tokio::test]
async fn skill_loads_inline_skills_only() -> Result<()> {
    let first = step(&[
        ("k-1", "Skill", json!({"skill": "helper", "args": "on main.rs"})),
        ("k-2", "Skill", json!({"skill": "plain"})),
        ("k-3", "Skill", json!({"skill": "mine"})),
    ]);
    let home = TestHome::new()?.scripted(&[&first, "text: done"])?;
    let skills = home.root.path().join("skills");
    for (dir, text) in [
        (
            "helper",
            "---\nname: helper\ndescription: Helps\ntype: inline\n---\nHelp well.",
        ),
        ("plain", "---\nname: plain\n---\nNot for the model."),
        (
            "mine",
            "---\nname: mine\ntype: inline\ndisableModelInvocation: true\n---\nOnly when I say.",
        ),
    ] {
        std::fs::create_dir_all(skills.join(dir))?;
        std::fs::write(skills.join(dir).join("SKILL.md"), text)?;
    }
    let home = home.arg("--skills-dir").arg(&skills.to_string_lossy());
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "help").await?;
    assert_eq!(turn.actions(), Vec::<String>::new());
    assert_eq!(
        turn.output("k-1")?,
        "---\nname: helper\ndescription: Helps\ntype: inline\n---\nHelp well.\n\nUser request:\non main.rs"
    );
    assert_eq!(
        turn.message("k-2")?,
        "Skill \"plain\" is not an inline skill; only the user can run it (/skill:plain)."
    );
    assert_eq!(
        turn.message("k-3")?,
        "Skill \"mine\" can only be run by the user (/skill:mine)."
    );
    Ok(())
}
