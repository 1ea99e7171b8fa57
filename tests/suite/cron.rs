//! Scheduled prompts (CronCreate / CronList / CronDelete) through the binary. Time comes from the
//! test-only clock file (`KIMI_CRON_TEST_CLOCK`) in UTC (`TZ=UTC`), so a test moves time by rewriting
//! the file and then waits for the events that must follow; nothing waits for the wall clock.

use anyhow::{Context as _, Result, bail};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, approval_answer, external_tool, kinds, payloads, tool_call_line};

/// The session every test here uses, so a second process can resume it.
const SESSION: &str = "cron-session";
/// Where each test's clock starts: a Monday morning, half a minute past nine.
const START: &str = "2025-01-06T09:00:30Z";

struct CronHome {
    home: TestHome,
}

impl CronHome {
    fn new() -> Result<Self> {
        let home = TestHome::new()?;
        let this = Self { home };
        this.set_clock(START)?;
        Ok(this)
    }

    fn clock_file(&self) -> std::path::PathBuf {
        self.home.root.path().join("clock")
    }

    /// Moves the agent's clock.
    fn set_clock(&self, at: &str) -> Result<()> {
        std::fs::write(self.clock_file(), at)?;
        Ok(())
    }

    fn session_dir(&self) -> std::path::PathBuf {
        self.home.sessions_of_work_dir().join(SESSION)
    }

    /// The jobs in the session's `cron.json`.
    fn stored_jobs(&self) -> Result<Vec<Value>> {
        let path = self.session_dir().join("cron.json");
        let text = std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        let file: Value = serde_json::from_str(&text)?;
        Ok(file["jobs"].as_array().cloned().unwrap_or_default())
    }

    /// Starts the binary on the session with `scripts` and extra `args`, and initializes it (registering
    /// `ext_tool` for tests that hold a turn open).
    async fn spawn(&mut self, scripts: &[&str], args: &[&str], env: &[(&str, &str)]) -> Result<WireProcess> {
        let config = self.home.scripted_config(scripts, json!({}))?;
        self.home.config = Some(config);
        let mut all_args = self.home.args();
        all_args.extend(["--session".to_owned(), SESSION.to_owned()]);
        all_args.extend(args.iter().map(|a| (*a).to_owned()));
        let clock = self.clock_file();
        let mut all_env = vec![
            ("TZ", "UTC"),
            ("KIMI_CRON_TEST_CLOCK", clock.to_str().context("path")?),
        ];
        all_env.extend_from_slice(env);
        let mut wire = WireProcess::spawn_with_env(&self.home, all_args, &all_env).await?;
        wire.initialize(json!({"protocol_version": "1.10", "external_tools": [external_tool("ext_tool")]}))
            .await?;
        Ok(wire)
    }
}

fn create_call(id: &str, cron: &str, prompt: &str, recurring: bool) -> String {
    let args = json!({"cron": cron, "prompt": prompt, "recurring": recurring}).to_string();
    format!(
        "text: scheduling\n{}",
        tool_call_line(id, "CronCreate", Some(&args))
    )
}

fn call(id: &str, name: &str, args: Value) -> String {
    tool_call_line(id, name, Some(&args.to_string()))
}

/// The `return_value` of the ToolResult for `tool_call_id` among `messages`.
fn result_of<'a>(messages: &'a [Value], tool_call_id: &str) -> Result<&'a Value> {
    payloads(messages, "ToolResult")
        .into_iter()
        .find(|p| p["tool_call_id"] == tool_call_id)
        .map(|p| &p["return_value"])
        .with_context(|| format!("no ToolResult for {tool_call_id}"))
}

/// The `id: ...` line of a CronCreate output.
fn job_id(output: &Value) -> Result<String> {
    let text = output.as_str().context("output is not text")?;
    match text.lines().next().and_then(|l| l.strip_prefix("id: ")) {
        Some(id) => Ok(id.to_owned()),
        None => bail!("no id in {text}"),
    }
}

fn envelope(id: &str, cron: &str, count: u32, prompt: &str) -> String {
    format!("<cron-fire id=\"{id}\" cron=\"{cron}\" coalescedCount=\"{count}\">\n{prompt}\n</cron-fire>")
}

/// Waits for the next TurnBegin and returns its input and the events up to its TurnEnd (both included).
async fn fired_turn(wire: &mut WireProcess) -> Result<(Value, Vec<Value>)> {
    let (begin, before) = wire.read_until(|m| m["params"]["type"] == "TurnBegin").await?;
    if let Some(stray) = before.iter().find(|m| m.get("id").is_some()) {
        bail!("a response arrived before the fired turn: {stray}");
    }
    let (end, mut events) = wire.read_until(|m| m["params"]["type"] == "TurnEnd").await?;
    let input = begin["params"]["payload"]["user_input"].clone();
    events.insert(0, begin);
    events.push(end);
    Ok((input, events))
}

#[tokio::test]
async fn create_list_and_delete_persist_across_a_resume() -> Result<()> {
    let mut home = CronHome::new()?;
    let scripts = [
        create_call("tc-1", "*/5 * * * *", "check the build", true),
        "text: scheduled".to_owned(),
        call("tc-2", "CronList", json!({})),
        "text: listed".to_owned(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let mut wire = home.spawn(&scripts, &[], &[]).await?;

    let prompt = wire
        .start_prompt(json!("check the build every five minutes"))
        .await?;
    let request = wire.wait_request("ApprovalRequest").await?;
    let payload = &request["params"]["payload"];
    assert_eq!(payload["sender"], "CronCreate");
    assert!(
        payload["action"]
            .as_str()
            .is_some_and(|a| a.starts_with("schedule recurring prompt `*/5 * * * *` #")),
        "{payload}"
    );
    // The description ends with what approve-for-session covers: this same action (issue 13).
    assert_eq!(
        payload["description"],
        format!(
            "Schedule a recurring prompt at `*/5 * * * *`: check the build (approve for session covers every \"{}\" request)",
            payload["action"].as_str().unwrap_or_default()
        )
    );
    assert_eq!(
        payload["display"],
        json!([{"type": "brief", "text": "check the build"}])
    );
    wire.send(&approval_answer(&request, "approve")).await?;
    let (response, messages) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let created = result_of(&messages, "tc-1")?;
    assert_eq!(created["is_error"], false, "{created}");
    let id = job_id(&created["output"])?;
    let output = created["output"].as_str().context("text")?;
    let next = output.lines().last().context("lines")?;
    assert_eq!(
        output,
        format!("id: {id}\nhumanSchedule: every 5 minutes\nrecurring: true\n{next}")
    );
    // 09:05 plus this job's spread: less than a tenth of five minutes.
    assert!(next.starts_with("nextFireAt: 2025-01-06T09:05:"), "{next}");
    assert!(next.ends_with("+00:00"), "{next}");

    let (_, messages) = wire.prompt(json!("what is scheduled?")).await?;
    let listed = result_of(&messages, "tc-2")?;
    assert_eq!(
        listed["output"],
        format!(
            "cron_jobs: 1\nid: {id}\ncron: */5 * * * *\nhumanSchedule: every 5 minutes\nprompt: \"check the build\"\n{}\nrecurring: true\nageDays: 0\nstale: false",
            next
        )
    );
    assert!(wire.wait_exit().await?.success());
    let stored = home.stored_jobs()?;
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0]["id"], id.as_str());
    assert_eq!(stored[0]["created_at"], "2025-01-06T09:00:30Z");

    // A second process on the same session sees the job and deletes it.
    let scripts = [
        call("tc-3", "CronList", json!({})),
        "text: listed".to_owned(),
        call("tc-4", "CronDelete", json!({"id": id})),
        "text: deleted".to_owned(),
        call("tc-5", "CronDelete", json!({"id": id})),
        "text: gone".to_owned(),
    ];
    let scripts: Vec<&str> = scripts.iter().map(String::as_str).collect();
    let mut wire = home.spawn(&scripts, &["--yolo"], &[]).await?;
    let (_, messages) = wire.prompt(json!("list again")).await?;
    assert_eq!(result_of(&messages, "tc-3")?["output"], listed["output"]);
    let (_, messages) = wire.prompt(json!("delete it")).await?;
    assert_eq!(
        result_of(&messages, "tc-4")?["output"],
        format!("Deleted cron job {id}.")
    );
    let (_, messages) = wire.prompt(json!("delete it again")).await?;
    let again = result_of(&messages, "tc-5")?;
    assert_eq!(again["is_error"], true);
    assert_eq!(again["message"], format!("No cron job with id {id}"));
    assert!(wire.wait_exit().await?.success());
    assert_eq!(home.stored_jobs()?, Vec::<Value>::new());
    Ok(())
}

#[tokio::test]
async fn a_one_shot_fire_starts_a_turn_with_the_prompt() -> Result<()> {
    let mut home = CronHome::new()?;
    let create = create_call("tc-1", "7 9 * * *", "check the build", false);
    let mut wire = home
        .spawn(
            &[&create, "text: scheduled", "text: the build is green"],
            &["--yolo"],
            &[],
        )
        .await?;
    let (_, messages) = wire.prompt(json!("remind me at 9:07")).await?;
    let created = result_of(&messages, "tc-1")?;
    let id = job_id(&created["output"])?;
    assert_eq!(
        created["output"],
        format!(
            "id: {id}\nhumanSchedule: daily at 09:07\nrecurring: false\nnextFireAt: 2025-01-06T09:07:00+00:00"
        )
    );

    home.set_clock("2025-01-06T09:07:00Z")?;
    let (input, events) = fired_turn(&mut wire).await?;
    assert_eq!(input, envelope(&id, "7 9 * * *", 1, "check the build"));
    assert_eq!(
        kinds(&events),
        [
            "event:TurnBegin",
            "event:StepBegin",
            "event:ContentPart",
            "event:StatusUpdate",
            "event:TurnEnd"
        ]
    );
    assert_eq!(
        payloads(&events, "ContentPart"),
        [&json!({"type": "text", "text": "the build is green"})]
    );
    // The fired turn is over and nothing else fires: the slot is free.
    wire.assert_alive().await?;
    assert!(wire.wait_exit().await?.success());
    assert_eq!(
        home.stored_jobs()?,
        Vec::<Value>::new(),
        "a one-shot job goes once fired"
    );
    // The fired prompt is in the conversation like any user message.
    let context = std::fs::read_to_string(home.session_dir().join("context.jsonl"))?;
    assert!(context.contains("<cron-fire id="), "{context}");
    Ok(())
}

#[tokio::test]
async fn a_fire_waits_for_the_running_turn_and_follows_its_answer() -> Result<()> {
    let mut home = CronHome::new()?;
    let create = create_call("tc-1", "7 9 * * *", "check the build", false);
    let hold = call("tc-2", "ext_tool", json!({"path": "a"}));
    let mut wire = home
        .spawn(
            &[
                &create,
                "text: scheduled",
                &hold,
                "text: held turn done",
                "text: fired",
            ],
            &["--yolo"],
            &[],
        )
        .await?;
    let (_, messages) = wire.prompt(json!("remind me")).await?;
    let id = job_id(&result_of(&messages, "tc-1")?["output"])?;

    let prompt = wire.start_prompt(json!("long work")).await?;
    let request = wire.wait_request("ToolCallRequest").await?;
    // Due now, but a turn runs.
    home.set_clock("2025-01-06T09:08:00Z")?;
    let busy = wire.request("prompt", json!({"user_input": "meanwhile"})).await?;
    let refused = wire.response_to(&busy).await?;
    assert_eq!(
        refused["error"]["message"],
        "An agent turn is already in progress"
    );
    wire.respond(
        request["id"].as_str().context("id")?,
        json!({"tool_call_id": "tc-2", "return_value": {"is_error": false, "output": "ok", "message": "", "display": []}}),
    )
    .await?;
    let (response, held) = wire.read_response(&prompt).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&held, "TurnBegin"),
        [&json!({"user_input": "long work"})],
        "nothing fired during the turn or before its answer"
    );
    let (input, _) = fired_turn(&mut wire).await?;
    assert_eq!(input, envelope(&id, "7 9 * * *", 1, "check the build"));
    wire.assert_alive().await?;
    Ok(())
}

#[tokio::test]
async fn a_fired_turn_refuses_prompts_and_can_be_cancelled() -> Result<()> {
    let mut home = CronHome::new()?;
    let create = create_call("tc-1", "7 9 * * *", "check the build", false);
    let hold = call("tc-2", "ext_tool", json!({"path": "a"}));
    let mut wire = home
        .spawn(
            &[&create, "text: scheduled", &hold, "text: after"],
            &["--yolo"],
            &[],
        )
        .await?;
    wire.prompt(json!("remind me")).await?;

    home.set_clock("2025-01-06T09:07:00Z")?;
    wire.wait_event("TurnBegin").await?;
    wire.wait_request("ToolCallRequest").await?;
    let busy = wire.request("prompt", json!({"user_input": "meanwhile"})).await?;
    assert_eq!(
        wire.response_to(&busy).await?["error"],
        json!({"code": -32000, "message": "An agent turn is already in progress", "data": null})
    );
    let steer = wire.request("steer", json!({"user_input": "hurry"})).await?;
    assert_eq!(
        wire.response_to(&steer).await?["result"],
        json!({"status": "steered"})
    );
    let cancel = wire.request("cancel", json!({})).await?;
    assert_eq!(wire.response_to(&cancel).await?["result"], json!({}));
    wire.read_until(|m| m["params"]["type"] == "TurnEnd").await?;
    wire.assert_alive().await?;
    // The slot is free for the client again.
    let (response, _) = wire.prompt(json!("next")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    Ok(())
}

#[tokio::test]
async fn missed_fires_coalesce_into_one() -> Result<()> {
    let mut home = CronHome::new()?;
    let create = create_call("tc-1", "*/5 * * * *", "poll the queue", true);
    let mut wire = home
        .spawn(&[&create, "text: scheduled", "text: polled"], &["--yolo"], &[])
        .await?;
    let (_, messages) = wire.prompt(json!("poll every five minutes")).await?;
    let id = job_id(&result_of(&messages, "tc-1")?["output"])?;

    // 09:05 ... 09:30 all passed (each fires less than 30 s late): six times, one turn.
    home.set_clock("2025-01-06T09:31:00Z")?;
    let (input, _) = fired_turn(&mut wire).await?;
    assert_eq!(input, envelope(&id, "*/5 * * * *", 6, "poll the queue"));
    wire.assert_alive().await?;
    assert!(wire.wait_exit().await?.success());
    let stored = home.stored_jobs()?;
    assert_eq!(stored[0]["last_fired_at"], "2025-01-06T09:30:00Z");
    Ok(())
}

#[tokio::test]
async fn a_job_due_while_nobody_ran_fires_after_resume_unless_disabled() -> Result<()> {
    let mut home = CronHome::new()?;
    let create = create_call("tc-1", "7 9 * * *", "check the build", false);
    let mut wire = home
        .spawn(&[&create, "text: scheduled"], &["--yolo"], &[])
        .await?;
    let (_, messages) = wire.prompt(json!("remind me")).await?;
    let id = job_id(&result_of(&messages, "tc-1")?["output"])?;
    assert!(wire.wait_exit().await?.success());
    home.set_clock("2025-01-06T10:00:00Z")?;

    // Disabled: the tools are not there and nothing fires; the job stays stored.
    let list = call("tc-2", "CronList", json!({}));
    let mut wire = home
        .spawn(
            &[&list, "text: no tool"],
            &["--yolo"],
            &[("KIMI_DISABLE_CRON", "1")],
        )
        .await?;
    wire.assert_alive().await?;
    let (_, messages) = wire.prompt(json!("list")).await?;
    let missing = result_of(&messages, "tc-2")?;
    assert_eq!(missing["message"], "Tool `CronList` not found");
    assert_eq!(payloads(&messages, "TurnBegin").len(), 1);
    assert!(wire.wait_exit().await?.success());
    assert_eq!(home.stored_jobs()?.len(), 1);

    // Enabled again: it fires as soon as the client has initialized.
    let mut wire = home.spawn(&["text: late but done"], &[], &[]).await?;
    let (input, _) = fired_turn(&mut wire).await?;
    assert_eq!(input, envelope(&id, "7 9 * * *", 1, "check the build"));
    wire.assert_alive().await?;
    assert!(wire.wait_exit().await?.success());
    assert_eq!(home.stored_jobs()?, Vec::<Value>::new());
    Ok(())
}

#[tokio::test]
async fn plan_mode_refuses_scheduling() -> Result<()> {
    let mut home = CronHome::new()?;
    let create = create_call("tc-1", "7 9 * * *", "check the build", false);
    let mut wire = home
        .spawn(&[&create, "text: refused"], &["--yolo", "--plan"], &[])
        .await?;
    let (_, messages) = wire.prompt(json!("remind me")).await?;
    let refused = result_of(&messages, "tc-1")?;
    assert_eq!(refused["is_error"], true);
    assert!(
        refused["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("Plan mode is active.")),
        "{refused}"
    );
    assert!(wire.wait_exit().await?.success());
    assert!(!home.session_dir().join("cron.json").exists());
    Ok(())
}
