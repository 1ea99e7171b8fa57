//! Command-line flags, configuration sources and the subcommands, run through the real binary.

use std::process::Output;

use anyhow::Result;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::{TestHome, WireProcess, payloads, status_without_usage, summarize};

fn scripted_provider(scripts: &std::path::Path) -> Value {
    json!({"type": "_scripted_echo", "base_url": "", "api_key": "", "env": {"KIMI_SCRIPTED_ECHO_SCRIPTS": scripts}})
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Fails unless the run exited with `code`, wrote nothing to stdout, and said `needle` on stderr.
fn assert_refused(output: &Output, code: i32, needle: &str) {
    assert_eq!(output.status.code(), Some(code), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        "",
        "stdout is the protocol channel"
    );
    assert!(
        stderr(output).contains(needle),
        "stderr lacks {needle:?}: {}",
        stderr(output)
    );
}

/// The home's standard wire arguments plus `extra`, as `&str`s for [`TestHome::run_cli`].
fn with_args(home: &TestHome, extra: &[&str]) -> Vec<String> {
    let mut args = home.args();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    args
}

#[tokio::test]
async fn inline_config_json_is_used() -> Result<()> {
    let home = TestHome::new()?;
    let scripts = home.write_scripts("scripts.json", &["text: ok"])?;
    let config = json!({
        "default_model": "scripted",
        "models": {"scripted": {"provider": "scripted_provider", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {"scripted_provider": scripted_provider(&scripts)},
    });
    let home = home.arg("--config").arg(&config.to_string());
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        summarize(&messages),
        vec![
            json!({"method": "event", "type": "TurnBegin", "payload": {"user_input": "hi"}}),
            json!({"method": "event", "type": "StepBegin", "payload": {"n": 1}}),
            json!({"method": "event", "type": "ContentPart", "payload": {"type": "text", "text": "ok"}}),
            json!({"method": "event", "type": "StatusUpdate", "payload": status_without_usage()}),
            json!({"method": "event", "type": "TurnEnd", "payload": {}}),
        ]
    );
    Ok(())
}

#[tokio::test]
async fn inline_config_toml_is_used() -> Result<()> {
    let home = TestHome::new()?;
    let scripts = home.write_scripts("scripts.json", &["text: from toml"])?;
    let config = format!(
        "default_model = \"scripted\"\n\
         [models.scripted]\nprovider = \"p\"\nmodel = \"scripted_echo\"\nmax_context_size = 100000\n\
         [providers.p]\ntype = \"_scripted_echo\"\nbase_url = \"\"\napi_key = \"\"\n\
         [providers.p.env]\nKIMI_SCRIPTED_ECHO_SCRIPTS = {}\n",
        json!(scripts)
    );
    let home = home.arg("--config").arg(&config);
    let mut wire = WireProcess::spawn(&home).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "from toml"})]
    );
    Ok(())
}

#[tokio::test]
async fn model_flag_selects_another_alias() -> Result<()> {
    let home = TestHome::new()?;
    let a = home.write_scripts("scripts-a.json", &["text: from A"])?;
    let b = home.write_scripts("scripts-b.json", &["text: from B"])?;
    let home = home
        .with_config(&json!({
            "default_model": "model-a",
            "models": {
                "model-a": {"provider": "provider-a", "model": "scripted_echo", "max_context_size": 100000},
                "model-b": {"provider": "provider-b", "model": "scripted_echo", "max_context_size": 100000},
            },
            "providers": {"provider-a": scripted_provider(&a), "provider-b": scripted_provider(&b)},
        }))?
        .arg("--model")
        .arg("model-b");
    let mut wire = WireProcess::spawn(&home).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "from B"})]
    );
    Ok(())
}

#[tokio::test]
async fn a_broken_config_file_fails_at_start_naming_the_file() -> Result<()> {
    let home = TestHome::new()?;
    let path = home.root.path().join("broken.json");
    std::fs::write(&path, "{not json")?;
    let output = home
        .run_cli(&[
            "--wire",
            "--config-file",
            &path.to_string_lossy(),
            "--work-dir",
            &home.work().to_string_lossy(),
        ])
        .await?;
    assert_ne!(output.status.code(), Some(0), "{output:?}");
    assert!(output.status.code().is_some(), "killed by a signal: {output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert!(
        stderr(&output).contains(&*path.to_string_lossy()),
        "stderr does not name the file: {}",
        stderr(&output)
    );
    Ok(())
}

#[tokio::test]
async fn a_broken_default_config_toml_fails_at_start_naming_the_file() -> Result<()> {
    let home = TestHome::new()?;
    let path = home.share().join("config.toml");
    std::fs::write(&path, "default_model = [unclosed\n")?;
    let output = home
        .run_cli(&["--wire", "--work-dir", &home.work().to_string_lossy()])
        .await?;
    assert_ne!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert!(
        stderr(&output).contains(&*path.to_string_lossy()),
        "stderr does not name the file: {}",
        stderr(&output)
    );
    Ok(())
}

#[tokio::test]
async fn a_default_model_missing_from_models_fails_at_start() -> Result<()> {
    let home = TestHome::new()?;
    let scripts = home.write_scripts("scripts.json", &["text: ok"])?;
    let home = home.with_config(&json!({
        "default_model": "nope",
        "models": {"scripted": {"provider": "p", "model": "scripted_echo", "max_context_size": 100000}},
        "providers": {"p": scripted_provider(&scripts)},
    }))?;
    let args = home.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = home.run_cli(&args).await?;
    assert_ne!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    assert!(stderr(&output).contains("nope"), "{}", stderr(&output));
    Ok(())
}

#[tokio::test]
async fn conflicting_flags_exit_2_with_the_reference_message() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let args = with_args(&home, &["--continue", "--session", "x"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = home.run_cli(&args).await?;
    assert_refused(&output, 2, "Cannot combine --continue, --session.");

    let config = home.config.clone().unwrap_or_default();
    let output = home
        .run_cli(&[
            "--wire",
            "--config",
            "{}",
            "--config-file",
            &config.to_string_lossy(),
        ])
        .await?;
    assert_refused(&output, 2, "Cannot combine --config, --config-file.");
    Ok(())
}

#[tokio::test]
async fn bad_flag_values_exit_2() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let output = home.run_cli(&["--wire", "--max-steps-per-turn", "0"]).await?;
    assert_refused(&output, 2, "0 is not in the range x>=1.");
    let output = home.run_cli(&["--wire", "--max-steps-per-turn", "many"]).await?;
    assert_refused(&output, 2, "'many' is not a valid integer.");
    let output = home.run_cli(&["--wire", "--agent", "nobody"]).await?;
    assert_refused(&output, 2, "nobody");
    let output = home
        .run_cli(&["--wire", "--work-dir", "/definitely/not/here"])
        .await?;
    assert_refused(&output, 2, "Directory '/definitely/not/here' does not exist.");
    let output = home.run_cli(&["--wire", "--no-such-flag"]).await?;
    assert_refused(&output, 2, "--no-such-flag");
    let output = home.run_cli(&["--wire", "--print"]).await?;
    assert_refused(&output, 2, "--print");
    // No session was started by any of them.
    assert_eq!(home.session_dirs(), Vec::<std::path::PathBuf>::new());
    Ok(())
}

#[tokio::test]
async fn version_prints_the_package_version() -> Result<()> {
    let home = TestHome::new()?;
    let output = home.run_cli(&["--version"]).await?;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!("kimi-agent {}\n", env!("CARGO_PKG_VERSION"))
    );
    Ok(())
}

#[tokio::test]
async fn info_reports_versions_as_text_and_json() -> Result<()> {
    let home = TestHome::new()?;
    let output = home.run_cli(&["info"]).await?;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(
        String::from_utf8_lossy(&output.stdout),
        format!(
            "kimi-cli version: 1.49.0\nagent spec versions: 1\nwire protocol: 1.10\nkimi-agent version: {}\nprovider types: kimi, \
             openai_legacy, openai_responses, anthropic, google_genai, gemini, vertexai, _echo, _scripted_echo, \
             _chaos, _cassette\nsandbox: danger-full-access, network on (no confinement)\n",
            env!("CARGO_PKG_VERSION")
        )
    );
    let output = home.run_cli(&["info", "--json"]).await?;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let info: Value = serde_json::from_slice(&output.stdout)?;
    // `kimi_cli_version` is the reference release we implement: the VS Code extension refuses below 0.82.
    assert_eq!(
        info,
        json!({
            "kimi_cli_version": "1.49.0",
            "agent_spec_versions": ["1"],
            "wire_protocol_version": "1.10",
            "kimi_agent_version": env!("CARGO_PKG_VERSION"),
            "provider_types": ["kimi", "openai_legacy", "openai_responses", "anthropic", "google_genai",
                "gemini", "vertexai", "_echo", "_scripted_echo", "_chaos", "_cassette"],
            "sandbox": {"mode": "danger-full-access", "network": true, "enforced": false, "landlock_abi": null,
                        "writable_roots": null, "error": null},
        })
    );
    Ok(())
}

#[tokio::test]
async fn the_wire_flag_is_optional() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: no flag"])?;
    let args: Vec<String> = home.args().into_iter().filter(|a| a != "--wire").collect();
    let mut wire = WireProcess::spawn_with(&home, args).await?;
    let (response, messages) = wire.prompt(json!("hi")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    assert_eq!(
        payloads(&messages, "ContentPart"),
        vec![&json!({"type": "text", "text": "no flag"})]
    );
    Ok(())
}

#[tokio::test]
async fn startup_with_stdin_closed_exits_zero_without_output() -> Result<()> {
    let home = TestHome::new()?.scripted(&["text: ok"])?;
    let args = home.args();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let output = home.run_cli(&args).await?;
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "");
    Ok(())
}
