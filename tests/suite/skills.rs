//! Skills: discovery through `--skills-dir`, their slash commands, flows, the `Skill` tool, and the
//! slash commands that talk to the model (`/init`) or to plan mode (`/plan`).

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, payloads, shell_call_line, summarize, tool_call_line};

/// Writes `<root>/<dir>/SKILL.md`.
fn write_skill(root: &Path, dir: &str, text: &str) -> Result<PathBuf> {
    let path = root.join(dir).join("SKILL.md");
    std::fs::create_dir_all(path.parent().context("no parent")?)?;
    std::fs::write(&path, text)?;
    Ok(path)
}

/// A home whose `skills/` directory is passed with `--skills-dir`.
fn home_with_skills(scripts: &[&str]) -> Result<(TestHome, PathBuf)> {
    let home = TestHome::new()?.scripted(scripts)?;
    let skills = home.root.path().join("skills");
    std::fs::create_dir_all(&skills)?;
    let arg = skills.to_string_lossy().into_owned();
    Ok((home.arg("--skills-dir").arg(&arg), skills))
}

async fn spawn_initialized(home: &TestHome) -> Result<(WireProcess, Value)> {
    let mut wire = WireProcess::spawn(home).await?;
    let result = wire.initialize(json!({"protocol_version": "1.10"})).await?;
    Ok((wire, result))
}

/// The slash commands after the ten built-ins, as `(name, description)`.
fn skill_commands(init: &Value) -> Vec<(String, String)> {
    init["slash_commands"]
        .as_array()
        .map(|list| {
            list.iter()
                .skip(10)
                .map(|c| {
                    (
                        c["name"].as_str().unwrap_or("").to_owned(),
                        c["description"].as_str().unwrap_or("").to_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Every record of the session's context.jsonl.
fn context_records(home: &TestHome) -> Result<Vec<Value>> {
    let dirs = home.session_dirs();
    let dir = dirs.first().context("no session")?;
    let text = std::fs::read_to_string(dir.join("context.jsonl"))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| Ok(serde_json::from_str(l)?))
        .collect()
}

/// The text of each user message of the context, in order.
fn user_texts(home: &TestHome) -> Result<Vec<String>> {
    Ok(context_records(home)?
        .iter()
        .filter(|r| r["role"] == "user")
        .map(|r| match &r["content"] {
            Value::String(s) => s.clone(),
            Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect(),
            _ => String::new(),
        })
        .collect())
}

/// `TurnBegin` inputs and `TurnEnd`s, in order, as `begin:<input>` / `end`.
fn turn_marks(messages: &[Value]) -> Vec<String> {
    messages
        .iter()
        .filter_map(|m| match m["params"]["type"].as_str() {
            Some("TurnBegin") => Some(format!(
                "begin:{}",
                m["params"]["payload"]["user_input"].as_str().unwrap_or("<parts>")
            )),
            Some("TurnEnd") => Some("end".to_owned()),
            _ => None,
        })
        .collect()
}

fn texts(messages: &[Value]) -> Vec<String> {
    payloads(messages, "ContentPart")
        .iter()
        .filter_map(|p| p["text"].as_str().map(str::to_owned))
        .collect()
}

const FLOW: &str = "---\nname: pick\ndescription: Pick a side\ntype: flow\n---\n\n```mermaid\nflowchart TD\nA([BEGIN]) --> Q{Which way?}\nQ -->|left| L[Walk left]\nQ -->|done| Z([END])\nL --> Q\n```\n";

#[tokio::test]
async fn initialize_lists_skills_from_skills_dir_and_skips_broken_files() -> Result<()> {
    let (home, skills) = home_with_skills(&[])?;
    write_skill(
        &skills,
        "beta",
        "---\nname: beta\ndescription: Second skill\n---\nDo beta.",
    )?;
    write_skill(&skills, "alpha", "First line describes alpha.\n")?;
    write_skill(&skills, "pick", FLOW)?;
    write_skill(&skills, "broken-yaml", "---\nname: [unclosed\n---\nbody")?;
    write_skill(&skills, "bad-type", "---\ntype: prompt\n---\nbody")?;
    write_skill(
        &skills,
        "bad-flow",
        "---\nname: bad-flow\ndescription: No diagram\ntype: flow\n---\nnone",
    )?;
    // A project skill is not read when --skills-dir is given.
    write_skill(
        &home.work().join(".kimi/skills"),
        "project-only",
        "---\nname: project-only\n---\nx",
    )?;
    let (mut wire, init) = spawn_initialized(&home).await?;
    let names: Vec<String> = skill_commands(&init).into_iter().map(|(n, _)| n).collect();
    assert_eq!(
        names,
        [
            "skill:alpha",
            "skill:bad-flow",
            "skill:beta",
            "skill:kimi-cli-help",
            "skill:pick",
            "skill:skill-creator",
            "flow:pick",
        ]
    );
    let described: Vec<(String, String)> = skill_commands(&init)
        .into_iter()
        .filter(|(n, _)| ["skill:alpha", "skill:beta", "flow:pick"].contains(&n.as_str()))
        .collect();
    assert_eq!(
        described,
        [
            ("skill:alpha".to_owned(), "First line describes alpha.".to_owned()),
            ("skill:beta".to_owned(), "Second skill".to_owned()),
            ("flow:pick".to_owned(), "Pick a side".to_owned()),
        ]
    );
    // The broken files cost nothing else: the server answers as usual.
    let (response, messages) = wire.prompt(json!("/skill:bad-type")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(texts(&messages), ["Unknown slash command \"/skill:bad-type\"."]);
    Ok(())
}

#[tokio::test]
async fn without_skills_dir_project_and_user_skills_are_found() -> Result<()> {
    let home = TestHome::new()?.scripted(&[])?;
    write_skill(
        &home.work().join(".kimi/skills"),
        "proj",
        "---\ndescription: From the project\n---\nx",
    )?;
    write_skill(
        &home.home().join(".kimi/skills"),
        "mine",
        "---\ndescription: From home\n---\nx",
    )?;
    write_skill(
        &home.home().join(".kimi/skills"),
        "proj",
        "---\ndescription: Shadowed\n---\nx",
    )?;
    let (_wire, init) = spawn_initialized(&home).await?;
    assert_eq!(
        skill_commands(&init),
        [
            (
                "skill:kimi-cli-help".to_owned(),
                skill_commands(&init)[0].1.clone()
            ),
            ("skill:mine".to_owned(), "From home".to_owned()),
            ("skill:proj".to_owned(), "From the project".to_owned()),
            (
                "skill:skill-creator".to_owned(),
                skill_commands(&init)[3].1.clone()
            ),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn skill_command_sends_the_skill_text_to_the_model() -> Result<()> {
    let (home, skills) = home_with_skills(&["text: skill ok", "text: second"])?;
    let text = "---\nname: test\ndescription: Test skill\n---\n\nUse this skill in wire tests.";
    let file = write_skill(&skills, "test-skill", &format!("{text}\n\n"))?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("/skill:test")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages)
            .iter()
            .map(|m| m["type"].as_str().unwrap_or("").to_owned())
            .collect::<Vec<_>>(),
        ["TurnBegin", "StepBegin", "ContentPart", "StatusUpdate", "TurnEnd"]
    );
    assert_eq!(texts(&messages), ["skill ok"]);
    // With a request, and re-read from disk: an edit applies without a restart.
    std::fs::write(&file, format!("{text}\nEdited."))?;
    let (_, messages) = wire.prompt(json!("/skill:test  fix the parser ")).await?;
    assert_eq!(texts(&messages), ["second"]);
    assert_eq!(
        user_texts(&home)?,
        [
            text.to_owned(),
            format!("{text}\nEdited.\n\nUser request:\nfix the parser"),
        ]
    );
    // The system prompt lists the skill under its scope with its path.
    let records = context_records(&home)?;
    let system = records[0]["content"].as_str().unwrap_or("");
    let canonical = std::fs::canonicalize(&file)?;
    assert!(
        system.contains(&format!(
            "### Extra\n- test\n  - Path: {}\n  - Description: Test skill",
            canonical.display()
        )),
        "{system}"
    );
    assert!(system.contains("### Built-in\n- kimi-cli-help"), "{system}");
    Ok(())
}

#[tokio::test]
async fn unknown_and_unreadable_skills_answer_without_the_model() -> Result<()> {
    let (home, skills) = home_with_skills(&["text: model reply"])?;
    let file = write_skill(&skills, "gone", "---\nname: gone\n---\nx")?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (_, messages) = wire.prompt(json!("/skill:nope")).await?;
    assert_eq!(texts(&messages), ["Unknown slash command \"/skill:nope\"."]);
    std::fs::remove_file(&file)?;
    let (response, messages) = wire.prompt(json!("/skill:gone")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(texts(&messages), ["Failed to load skill \"/skill:gone\"."]);
    // The script was not used.
    let (_, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(texts(&messages), ["model reply"]);
    Ok(())
}

#[tokio::test]
async fn a_flow_runs_one_nested_turn_per_node_and_follows_choices() -> Result<()> {
    let scripts = [
        "text: not sure",
        "text: going <choice>left</choice>",
        "text: walked",
        "text: <choice>done</choice>",
    ];
    let (home, skills) = home_with_skills(&scripts)?;
    write_skill(&skills, "pick", FLOW)?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("/flow:pick")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let question = "Which way?\n\nBranches you can take:\n- left\n- done\n\nEnd your answer with the branch you choose, as <choice>branch name</choice>.";
    let again = format!(
        "{question}\n\nYour last answer did not name one of the branches. Answer again and put exactly one branch name inside <choice>...</choice>."
    );
    assert_eq!(
        turn_marks(&messages),
        [
            "begin:/flow:pick".to_owned(),
            format!("begin:{question}"),
            "end".to_owned(),
            format!("begin:{again}"),
            "end".to_owned(),
            "begin:Walk left".to_owned(),
            "end".to_owned(),
            format!("begin:{question}"),
            "end".to_owned(),
            "end".to_owned(),
        ]
    );
    // Each node turn is a model turn of its own: steps restart at 1.
    let steps: Vec<&Value> = payloads(&messages, "StepBegin");
    assert_eq!(steps, vec![&json!({"n": 1}); 4]);
    assert_eq!(user_texts(&home)?.len(), 4);
    Ok(())
}

#[tokio::test]
async fn a_flow_with_arguments_does_nothing() -> Result<()> {
    let (home, skills) = home_with_skills(&["text: unused"])?;
    write_skill(&skills, "pick", FLOW)?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("/flow:pick now")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(turn_marks(&messages), ["begin:/flow:pick now", "end"]);
    Ok(())
}

#[tokio::test]
async fn a_rejected_tool_call_stops_the_flow() -> Result<()> {
    let shell = shell_call_line("tc-1", "echo hi");
    let (home, skills) = home_with_skills(&[&shell, "text: never used"])?;
    write_skill(
        &skills,
        "steps",
        "---\nname: steps\ntype: flow\n---\n```mermaid\nA([BEGIN]) --> B[Run it]\nB --> C[Then this]\nC --> D([END])\n```",
    )?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("/flow:steps")).await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    wire.send(&crate::common::approval_answer(&request, "reject"))
        .await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        turn_marks(&messages),
        ["begin:/flow:steps", "begin:Run it", "end", "end"]
    );
    Ok(())
}

#[tokio::test]
async fn cancelling_inside_a_flow_closes_every_open_turn() -> Result<()> {
    let shell = shell_call_line("tc-1", "echo hi");
    let (home, skills) = home_with_skills(&[&shell, "text: after"])?;
    write_skill(
        &skills,
        "one",
        "---\nname: one\ntype: flow\n---\n```mermaid\nA([BEGIN]) --> B[Run it]\nB --> D([END])\n```",
    )?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let prompt = wire.start_prompt(json!("/flow:one")).await?;
    wire.peek_request("ApprovalRequest").await?;
    let cancel = wire.request("cancel", json!({})).await?;
    wire.response_to(&cancel).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "cancelled"}));
    assert_eq!(
        turn_marks(&messages),
        ["begin:/flow:one", "begin:Run it", "end", "end"]
    );
    Ok(())
}

fn skill_call(id: &str, skill: &str, args: Option<&str>) -> String {
    let arguments = match args {
        Some(a) => json!({"skill": skill, "args": a}),
        None => json!({"skill": skill}),
    };
    tool_call_line(id, "Skill", Some(&arguments.to_string()))
}

fn tool_results(messages: &[Value]) -> Vec<Value> {
    payloads(messages, "ToolResult")
        .into_iter()
        .map(|p| p["return_value"].clone())
        .collect()
}

#[tokio::test]
async fn the_skill_tool_loads_inline_skills_without_approval() -> Result<()> {
    let call = skill_call("tc-1", "helper", Some("on main.rs"));
    let plain = skill_call("tc-2", "plain", None);
    let (home, skills) = home_with_skills(&[&format!("text: loading\n{call}\n{plain}"), "text: done"])?;
    write_skill(
        &skills,
        "helper",
        "---\nname: helper\ndescription: Helps\ntype: inline\n---\nHelp well.",
    )?;
    write_skill(&skills, "plain", "---\nname: plain\n---\nNot for the model.")?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("help me")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert!(!messages.iter().any(|m| m["method"] == "request"), "{messages:?}");
    let results = tool_results(&messages);
    assert_eq!(
        results[0],
        json!({
            "is_error": false,
            "output": "---\nname: helper\ndescription: Helps\ntype: inline\n---\nHelp well.\n\nUser request:\non main.rs",
            "message": "Skill \"helper\" loaded. Follow its instructions.",
            "display": [{"type": "brief", "text": "Loaded skill helper"}],
            "extras": null,
        })
    );
    assert_eq!(results[1]["is_error"], json!(true));
    assert_eq!(
        results[1]["message"],
        json!("Skill \"plain\" is not an inline skill; only the user can run it (/skill:plain).")
    );
    Ok(())
}

#[tokio::test]
async fn the_skill_tool_is_absent_without_inline_skills() -> Result<()> {
    let call = skill_call("tc-1", "plain", None);
    let (home, skills) = home_with_skills(&[&call, "text: done"])?;
    write_skill(&skills, "plain", "---\nname: plain\n---\nx")?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (_, messages) = wire.prompt(json!("try")).await?;
    let results = tool_results(&messages);
    assert_eq!(results[0]["is_error"], json!(true));
    assert_eq!(results[0]["message"], json!("Tool `Skill` not found"));
    Ok(())
}

#[tokio::test]
async fn skills_loaded_by_skills_nest_at_most_three_deep_per_turn() -> Result<()> {
    let calls: Vec<String> = (1..=4)
        .map(|i| skill_call(&format!("tc-{i}"), "loop", None))
        .collect();
    let mut scripts: Vec<&str> = calls.iter().map(String::as_str).collect();
    scripts.push("text: stopped");
    // A new turn starts again at depth one.
    let next_turn = skill_call("tc-5", "loop", None);
    scripts.push(&next_turn);
    scripts.push("text: fine");
    let (home, skills) = home_with_skills(&scripts)?;
    write_skill(
        &skills,
        "loop",
        "---\nname: loop\ntype: inline\n---\nLoad the loop skill again.",
    )?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("go")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let errors: Vec<bool> = tool_results(&messages)
        .iter()
        .map(|r| r["is_error"] == json!(true))
        .collect();
    assert_eq!(errors, [false, false, false, true]);
    let refused = &tool_results(&messages)[3]["message"];
    assert!(
        refused.as_str().is_some_and(|m| m.contains("nest 4 levels deep")),
        "{refused}"
    );
    let (_, messages) = wire.prompt(json!("again")).await?;
    assert_eq!(tool_results(&messages)[0]["is_error"], json!(false));
    Ok(())
}

#[tokio::test]
async fn init_writes_agents_md_in_a_nested_turn_and_notes_it() -> Result<()> {
    let write = tool_call_line(
        "tc-1",
        "WriteFile",
        Some(&json!({"path": "AGENTS.md", "content": "# Project notes\n"}).to_string()),
    );
    let home = TestHome::new()?
        .scripted(&[
            &format!("text: exploring\n{write}"),
            "text: written",
            "text: after",
        ])?
        .arg("--yolo");
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (response, messages) = wire.prompt(json!("/init")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let marks = turn_marks(&messages);
    assert_eq!(marks.len(), 4, "{marks:?}");
    assert_eq!(marks[0], "begin:/init");
    assert!(marks[1].starts_with("begin:Study this project"), "{marks:?}");
    assert_eq!(marks[2..], ["end", "end"]);
    assert_eq!(
        std::fs::read_to_string(home.work().join("AGENTS.md"))?,
        "# Project notes\n"
    );
    // The exploration stayed out of the session's context; only the note is there.
    let users = user_texts(&home)?;
    assert_eq!(users.len(), 1, "{users:?}");
    assert!(users[0].starts_with("<system>The user ran `/init`"), "{users:?}");
    assert!(users[0].contains("# Project notes"), "{users:?}");
    assert!(
        !context_records(&home)?.iter().any(|r| r["role"] == "assistant"),
        "the scratch turn leaked into the context"
    );
    let (_, messages) = wire.prompt(json!("next")).await?;
    assert_eq!(texts(&messages), ["after"]);
    Ok(())
}

#[tokio::test]
async fn plan_command_toggles_views_and_clears_the_plan() -> Result<()> {
    let home = TestHome::new()?.scripted(&[])?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (_, messages) = wire.prompt(json!("/plan view")).await?;
    assert_eq!(texts(&messages), ["No plan file found for this session."]);

    let (_, messages) = wire.prompt(json!("/plan on")).await?;
    let on = texts(&messages);
    let path = on[0]
        .strip_prefix("Plan mode ON. Plan file: ")
        .context("plan on text")?
        .to_owned();
    assert!(
        path.starts_with(&home.home().join(".kimi/plans").display().to_string()),
        "{path}"
    );
    assert_eq!(payloads(&messages, "StatusUpdate")[0]["plan_mode"], json!(true));

    std::fs::create_dir_all(Path::new(&path).parent().context("plan dir")?)?;
    std::fs::write(&path, "1. do it\n")?;
    let (_, messages) = wire.prompt(json!("/plan view")).await?;
    assert_eq!(texts(&messages), ["1. do it\n"]);

    let (_, messages) = wire.prompt(json!("/plan")).await?;
    assert_eq!(texts(&messages), ["Plan mode OFF. All tools are now available."]);
    assert_eq!(payloads(&messages, "StatusUpdate")[0]["plan_mode"], json!(false));

    // Turning plan mode off ended that plan session (reference): the next one has a new plan file.
    let (_, messages) = wire.prompt(json!("/plan")).await?;
    let again = texts(&messages);
    let new_path = again[0]
        .strip_prefix("Plan mode ON. Write your plan to: ")
        .and_then(|rest| rest.strip_suffix("\nUse ExitPlanMode when done, or /plan off to exit manually."))
        .context("plan toggle text")?
        .to_owned();
    assert_ne!(new_path, path);
    std::fs::write(&new_path, "2. again\n")?;

    let (_, messages) = wire.prompt(json!("/plan clear")).await?;
    assert_eq!(texts(&messages), ["Plan cleared."]);
    assert!(!Path::new(&new_path).exists());
    let (_, messages) = wire.prompt(json!("/plan off")).await?;
    assert_eq!(texts(&messages), ["Plan mode OFF. All tools are now available."]);
    Ok(())
}

#[tokio::test]
async fn export_writes_markdown_and_import_brings_it_back() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: the answer"])?;
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (_, messages) = wire.prompt(json!("/export")).await?;
    assert_eq!(texts(&messages), ["No messages to export."]);
    wire.prompt(json!("what is it?")).await?;
    let (_, messages) = wire.prompt(json!("/export exports/")).await?;
    let said = texts(&messages);
    let path = said[0]
        .strip_prefix("Exported 2 messages to ")
        .context("export text")?
        .to_owned();
    assert!(
        path.starts_with(&home.work().join("exports/kimi-export-").display().to_string()),
        "{path}"
    );
    assert_eq!(
        said[1],
        "  Note: The exported file may contain sensitive information. Please be cautious when sharing it externally."
    );
    let markdown = std::fs::read_to_string(&path)?;
    assert!(
        markdown.contains("## Turn 1\n\n### User\n\nwhat is it?\n\n### Assistant\n\nthe answer\n"),
        "{markdown}"
    );
    let first_session = home.session_dirs()[0]
        .file_name()
        .context("session name")?
        .to_string_lossy()
        .into_owned();
    wire.wait_exit().await?;

    // A new session of the same work dir imports the first one, then a file.
    let (mut wire, _) = spawn_initialized(&home).await?;
    let (_, messages) = wire.prompt(json!("/import")).await?;
    assert_eq!(texts(&messages), ["Usage: /import <file_path or session_id>"]);
    let (_, messages) = wire.prompt(json!("/import no-such-thing")).await?;
    assert_eq!(
        texts(&messages),
        ["'no-such-thing' is not a valid file path or session ID."]
    );
    let (_, messages) = wire.prompt(json!(format!("/import {first_session}"))).await?;
    let said = texts(&messages);
    assert!(
        said[0].starts_with(&format!("Imported context from session '{first_session}' (")),
        "{said:?}"
    );
    std::fs::write(home.work().join("notes.md"), "remember this")?;
    let (_, messages) = wire.prompt(json!("/import 'notes.md'")).await?;
    assert_eq!(
        texts(&messages),
        ["Imported context from file 'notes.md' (13 chars)."]
    );
    wire.wait_exit().await?;
    let dirs = home.session_dirs();
    let second = dirs
        .iter()
        .find(|d| !d.ends_with(&first_session))
        .context("second session")?;
    let context = std::fs::read_to_string(second.join("context.jsonl"))?;
    assert!(
        context.contains("[USER]\\nwhat is it?\\n\\n[ASSISTANT]\\nthe answer"),
        "{context}"
    );
    assert!(
        context.contains("<imported_context source=\\\"file 'notes.md'\\\">\\nremember this"),
        "{context}"
    );
    Ok(())
}
