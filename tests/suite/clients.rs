//! What real clients need (issue 12), at the protocol level: each client is sent only the events it can
//! parse, sessions carry the reference's title where the TypeScript SDK lists them, and the binary
//! behaves the same when it is invoked as `kimi`. The same flows through the SDK itself are in
//! `suite::sdk`.

use anyhow::{Context as _, Result};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, binary, kinds};

/// The `initialize` the TypeScript SDK 0.1.8 sends (from inside the VS Code extension).
fn ts_sdk_client() -> Value {
    json!({
        "protocol_version": "1.7",
        "client": {"name": "kimi-agent-sdk/0.1.8 kimi-code-for-vs-code/0.4.2", "version": "0.1.8"},
        "capabilities": {"supports_question": true, "supports_plan_mode": true},
    })
}

/// The event types of a wire.jsonl.
fn recorded_types(home: &TestHome) -> Result<Vec<String>> {
    let dir = home.session_dirs().into_iter().next().context("no session")?;
    let text = std::fs::read_to_string(dir.join("wire.jsonl"))?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter_map(|record| record["message"]["type"].as_str().map(str::to_owned))
        .collect())
}

/// A turn that is retried once, in a session started with `init`; its events, replay included.
async fn retried_turn(init: Value) -> Result<(TestHome, Vec<String>, Vec<String>, Value)> {
    let home = TestHome::new()?
        .scripted(&["error: 503 busy", "text: recovered"])?
        .arg("--session")
        .arg("negotiated");
    let mut wire =
        WireProcess::spawn_with_env(&home, home.args(), &[("KIMI_AGENT_RETRY_BACKOFF_SCALE", "0.01")])
            .await?;
    wire.initialize(init).await?;
    let (response, live) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let replay = wire.request("replay", json!({})).await?;
    let (replayed_answer, replayed) = wire.read_response(&replay).await?;
    Ok((
        home,
        kinds(&live),
        kinds(&replayed),
        replayed_answer["result"].clone(),
    ))
}

#[tokio::test]
async fn the_typescript_sdk_is_sent_only_the_events_it_parses() -> Result<()> {
    let (home, live, replayed, replay_result) = retried_turn(ts_sdk_client()).await?;
    let expected = [
        "event:TurnBegin",
        "event:StepBegin",
        "event:ContentPart",
        "event:StatusUpdate",
        "event:TurnEnd",
    ];
    assert_eq!(live, expected);
    assert_eq!(replayed, expected, "replay leaves the same events out");
    assert_eq!(
        replay_result,
        json!({"status": "finished", "events": 5, "requests": 0})
    );
    assert!(
        recorded_types(&home)?.contains(&"StepRetry".to_owned()),
        "the session file keeps every event"
    );
    Ok(())
}

#[tokio::test]
async fn other_clients_get_every_event_as_from_the_reference() -> Result<()> {
    for init in [
        json!({"protocol_version": "1.1"}),
        json!({"protocol_version": "1.7", "client": {"name": "my-editor", "version": "2.0"}}),
        json!({"protocol_version": "1.10", "client": {"name": "kimi-agent-sdk/0.2.0"}}),
        json!({"protocol_version": "1.7", "client": {"name": "kimi-agent-sdk/0.1.8"},
               "capabilities": {"events": ["*"]}}),
    ] {
        let (_home, live, replayed, _) = retried_turn(init.clone()).await?;
        assert!(live.contains(&"event:StepRetry".to_owned()), "{init}: {live:?}");
        assert!(
            replayed.contains(&"event:StepRetry".to_owned()),
            "{init}: {replayed:?}"
        );
    }
    Ok(())
}

#[tokio::test]
async fn a_client_can_list_the_events_it_parses() -> Result<()> {
    let init = json!({"protocol_version": "1.10",
                      "capabilities": {"events": ["TurnBegin", "StepRetry", "TurnEnd", "SomethingNew"]}});
    let (_home, live, _, _) = retried_turn(init).await?;
    assert_eq!(live, ["event:TurnBegin", "event:StepRetry", "event:TurnEnd"]);
    Ok(())
}

#[tokio::test]
async fn a_long_first_prompt_titles_the_session_for_the_sdk_list() -> Result<()> {
    let prompt = "Please refactor the configuration loader so that it reports every invalid key at once";
    let home = TestHome::new()?.scripted(&["text: first", "text: second"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(ts_sdk_client()).await?;
    wire.prompt(json!(prompt)).await?;
    wire.prompt(json!("a later prompt does not change it")).await?;
    wire.wait_exit().await?;
    let dir = home.session_dirs().into_iter().next().context("no session")?;
    let title = "Please refactor the configuration loader so that\u{2026}";
    let state: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("state.json"))?)?;
    assert_eq!(state["custom_title"], json!(title));
    let metadata: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("metadata.json"))?)?;
    assert_eq!(metadata, json!({"title": title}));
    Ok(())
}

#[tokio::test]
async fn a_slash_command_first_leaves_the_title_to_the_next_prompt() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: done"])?;
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(ts_sdk_client()).await?;
    wire.prompt(json!("/yolo")).await?;
    wire.prompt(json!("fix the bug")).await?;
    wire.wait_exit().await?;
    let dir = home.session_dirs().into_iter().next().context("no session")?;
    let state: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("state.json"))?)?;
    assert_eq!(state["custom_title"], json!("fix the bug"));
    // The SDK would show the first prompt, `/yolo`: the title goes where it looks first.
    let metadata: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("metadata.json"))?)?;
    assert_eq!(metadata, json!({"title": "fix the bug"}));
    Ok(())
}

#[tokio::test]
async fn invoked_as_kimi_it_behaves_the_same() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: hello as kimi"])?;
    let bin = home.root.path().join("bin");
    std::fs::create_dir_all(&bin)?;
    std::os::unix::fs::symlink(binary(), bin.join("kimi"))?;
    let run = |args: &[&str]| {
        std::process::Command::new(bin.join("kimi"))
            .args(args)
            .env("HOME", home.home())
            .env("KIMI_SHARE_DIR", home.share())
            .output()
    };
    let direct = home.run_cli(&["info", "--json"]).await?;
    let as_kimi = run(&["info", "--json"])?;
    assert_eq!(
        (as_kimi.status.code(), &as_kimi.stdout),
        (Some(0), &direct.stdout)
    );
    let help = String::from_utf8(run(&["--help"])?.stdout)?;
    assert!(help.contains("Usage: kimi [OPTIONS] [COMMAND]"), "{help}");
    let refused = run(&["--print"])?;
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8(refused.stderr)?.contains("print mode is not supported"));

    // And a wire session started under that name, guardian and all.
    let mut wire = WireProcess::spawn_with_program(&home, &bin.join("kimi"), home.args()).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, events) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert!(kinds(&events).contains(&"event:ContentPart".to_owned()));
    Ok(())
}

// `./examples/demo.sh` on a fresh clone: it says it is building, lets cargo show its progress (no
// `--quiet`), then runs the demo session. A fake `cargo` first on PATH records its arguments, prints a
// progress line as cargo would (on stderr) and puts the real binary where the demo looks for it.
#[tokio::test]
async fn the_demo_says_it_builds_shows_cargos_progress_then_runs() -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    use std::process::Stdio;

    let dir = tempfile::tempdir()?;
    let fake_path = dir.path().join("bin");
    std::fs::create_dir(&fake_path)?;
    let cargo = fake_path.join("cargo");
    std::fs::write(
        &cargo,
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$FAKE_CARGO_ARGS\"\n\
         echo '   Compiling kimi-agent (fake cargo)' >&2\nln -s \"$REAL_KIMI_AGENT\" \"$KIMI_AGENT_BIN\"\n",
    )?;
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755))?;
    let not_built = dir.path().join("kimi-agent");
    let args_file = dir.path().join("cargo-args");
    let path = format!(
        "{}:{}",
        fake_path.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let demo = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/demo.sh");
    let child = tokio::process::Command::new(&demo)
        .env("PATH", path)
        .env("KIMI_AGENT_BIN", &not_built)
        .env("REAL_KIMI_AGENT", binary())
        .env("FAKE_CARGO_ARGS", &args_file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("running examples/demo.sh")?;
    let output = tokio::time::timeout(crate::common::READ_TIMEOUT, child.wait_with_output())
        .await
        .context("the demo did not finish")??;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
    );
    assert!(output.status.success(), "{stderr}");
    // Said before cargo starts, cargo's own progress, then the end of the build.
    let at = |needle: &str| {
        stderr
            .find(needle)
            .with_context(|| format!("`{needle}` not in the demo's stderr: {stderr}"))
    };
    let (building, progress, built) = (
        at("demo.sh: building kimi-agent (release, once; the first build takes a few minutes)")?,
        at("Compiling kimi-agent (fake cargo)")?,
        at(&format!("demo.sh: built {}", not_built.display()))?,
    );
    assert!(building < progress && progress < built, "{stderr}");
    let args = std::fs::read_to_string(&args_file)?;
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(args.first().copied(), Some("build"), "{args:?}");
    assert!(
        args.contains(&"--release") && args.contains(&"kimi-agent"),
        "{args:?}"
    );
    assert!(!args.contains(&"--quiet") && !args.contains(&"-q"), "{args:?}");
    // The demo itself: the scripted model's Shell call ran and its last answer ended the turn.
    assert!(stdout.contains("hello from the shell"), "{stdout}");
    assert!(stdout.contains("The shell said hello. Done."), "{stdout}");
    assert!(stdout.contains("event   TurnEnd"), "{stdout}");
    assert!(stdout.contains(r#"result  {"status": "finished"}"#), "{stdout}");
    Ok(())
}
