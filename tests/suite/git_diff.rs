//! `git_diff` (seeds/003) through the binary, in both agents: its five forms, no approval, a clear error
//! outside a repository, refs that look like options refused, nothing run or written on the
//! repository's behalf, and long diffs through the output budget.

use std::path::Path;
use std::process::Command;

use anyhow::{Context as _, Result, ensure};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::common::mock_model::{MockModel, Reply, tool_result};
use crate::common::{TestHome, WireProcess, payloads, tool_call_line};

/// Runs git in `dir` with the test home's (empty) configuration.
fn git(home: &TestHome, dir: &Path, args: &[&str]) -> Result<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("HOME", home.home())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .context("git")?;
    ensure!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A repository on `main` with `a.txt` and `b.txt` committed, then `a.txt` changed in the working tree
/// and a change of `b.txt` staged.
fn repository(home: &TestHome) -> Result<()> {
    let work = home.work();
    git(home, &work, &["init", "-q", "-b", "main"])?;
    std::fs::write(work.join("a.txt"), "alpha\n")?;
    std::fs::write(work.join("b.txt"), "beta\n")?;
    git(home, &work, &["add", "."])?;
    git(home, &work, &["commit", "-q", "-m", "start"])?;
    std::fs::write(work.join("a.txt"), "alpha changed\n")?;
    std::fs::write(work.join("b.txt"), "beta staged\n")?;
    git(home, &work, &["add", "b.txt"])?;
    Ok(())
}

fn calls(calls: &[(&str, Value)]) -> String {
    let mut script = "text: diffing".to_owned();
    for (id, args) in calls {
        script.push('\n');
        script.push_str(&tool_call_line(id, "git_diff", Some(&args.to_string())));
    }
    script
}

/// Runs one turn of `agent` (`None`: the default agent) calling git_diff as `calls` says; returns the
/// results by call id and whether anything asked for approval.
async fn diff_turn(home: &TestHome, agent: Option<&str>) -> Result<(Vec<Value>, bool)> {
    let mut args = home.args();
    if let Some(agent) = agent {
        args.extend(["--agent".to_owned(), agent.to_owned()]);
    }
    let mut wire = WireProcess::spawn_with(home, args).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (response, messages) = wire.prompt(json!("what changed?")).await?;
    assert_eq!(response["result"], json!({"status": "finished"}));
    let asked = messages.iter().any(|m| m["method"] == "request");
    Ok((
        payloads(&messages, "ToolResult").into_iter().cloned().collect(),
        asked,
    ))
}

fn result<'a>(results: &'a [Value], id: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["tool_call_id"] == id)
        .map_or(&Value::Null, |r| &r["return_value"])
}

fn output(results: &[Value], id: &str) -> String {
    result(results, id)["output"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[tokio::test]
async fn the_five_forms_in_the_kimi_code_agent_without_approval() -> Result<()> {
    let script = calls(&[
        ("d-1", json!({})),
        ("d-2", json!({"file": "a.txt"})),
        ("d-3", json!({"ref": "main"})),
        ("d-4", json!({"cached": true})),
        ("d-5", json!({"file": "b.txt", "ref": "main"})),
        ("d-6", json!({"file": "b.txt"})),
    ]);
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?;
    repository(&home)?;
    let index = home.work().join(".git/index");
    let index_before = std::fs::read(&index)?;
    let (results, asked) = diff_turn(&home, Some("kimi-code")).await?;
    assert!(!asked, "git_diff needs no approval");
    // `{}`: the unstaged change only.
    let all = output(&results, "d-1");
    assert!(all.contains("+alpha changed") && !all.contains("beta"), "{all}");
    assert_eq!(
        result(&results, "d-1")["message"],
        json!("Diff of the unstaged changes in the working tree.")
    );
    // `file`: that file only.
    assert_eq!(output(&results, "d-2"), all);
    // `ref`: the working tree against the branch, both changes.
    let against = output(&results, "d-3");
    assert!(
        against.contains("+alpha changed") && against.contains("+beta staged"),
        "{against}"
    );
    // `cached`: the staged change only.
    let staged = output(&results, "d-4");
    assert!(
        staged.contains("+beta staged") && !staged.contains("alpha"),
        "{staged}"
    );
    // `file` with `ref`.
    let one = output(&results, "d-5");
    assert!(
        one.contains("diff --git a/b.txt b/b.txt") && !one.contains("a.txt"),
        "{one}"
    );
    // Nothing unstaged in b.txt.
    assert_eq!(
        result(&results, "d-6"),
        &json!({"is_error": false, "output": "",
                "message": "No differences: unstaged changes in the working tree in `b.txt`.",
                "display": [{"type": "brief", "text": "No differences"}], "extras": null})
    );
    // Read-only: not even the index was refreshed.
    assert_eq!(std::fs::read(&index)?, index_before);
    Ok(())
}

#[tokio::test]
async fn the_default_agent_has_git_diff_too() -> Result<()> {
    let script = calls(&[("d-1", json!({"cached": true}))]);
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?;
    repository(&home)?;
    let (results, asked) = diff_turn(&home, None).await?;
    assert!(!asked);
    assert!(output(&results, "d-1").contains("+beta staged"));
    Ok(())
}

#[tokio::test]
async fn outside_a_repository_and_with_an_option_as_ref_it_fails_clearly() -> Result<()> {
    let script = calls(&[("d-1", json!({})), ("d-2", json!({"ref": "--output=/tmp/x"}))]);
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?;
    let work = home.work().canonicalize()?;
    let (results, _) = diff_turn(&home, Some("kimi-code")).await?;
    assert_eq!(result(&results, "d-1")["is_error"], json!(true));
    assert_eq!(
        result(&results, "d-1")["message"],
        json!(format!(
            "`{}` is not inside a git work tree, so there is no diff to show. git_diff works only in a git \
             repository.",
            work.display()
        ))
    );
    assert_eq!(
        result(&results, "d-2")["message"],
        json!("`--output=/tmp/x` is not a commit, branch or tag name.")
    );
    Ok(())
}

#[tokio::test]
async fn an_unknown_ref_reports_gits_error() -> Result<()> {
    let script = calls(&[("d-1", json!({"ref": "no-such-branch"}))]);
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?;
    repository(&home)?;
    let (results, _) = diff_turn(&home, Some("kimi-code")).await?;
    let message = result(&results, "d-1")["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        message == "git diff failed: fatal: bad revision 'no-such-branch'",
        "{message}"
    );
    Ok(())
}

#[tokio::test]
async fn a_repositorys_filters_and_diff_drivers_never_run() -> Result<()> {
    let script = calls(&[("d-1", json!({})), ("d-2", json!({"ref": "main"}))]);
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?;
    repository(&home)?;
    let work = home.work();
    let marker = home.root.path().join("ran");
    let run = format!("touch {}; cat", marker.display());
    git(&home, &work, &["config", "filter.evil.clean", &run])?;
    git(&home, &work, &["config", "filter.evil.required", "true"])?;
    // A filter defined in a file the repository's configuration includes is switched off too.
    let included = home.root.path().join("included.config");
    std::fs::write(&included, format!("[filter \"sneaky\"]\n\tclean = {run}\n"))?;
    git(
        &home,
        &work,
        &["config", "include.path", &included.to_string_lossy()],
    )?;
    std::fs::write(
        work.join(".gitattributes"),
        "*.txt filter=evil diff=evil\nb.txt filter=sneaky\n",
    )?;
    git(&home, &work, &["config", "diff.evil.textconv", &run])?;
    git(&home, &work, &["config", "diff.evil.command", &run])?;
    git(&home, &work, &["config", "core.fsmonitor", &run])?;
    std::fs::write(work.join("a.txt"), "alpha changed again\n")?;
    std::fs::write(work.join("b.txt"), "beta changed again\n")?;
    let (results, _) = diff_turn(&home, Some("kimi-code")).await?;
    assert!(
        output(&results, "d-1").contains("+alpha changed again"),
        "{results:?}"
    );
    assert!(
        !marker.exists(),
        "a program of the repository's configuration ran"
    );
    Ok(())
}

#[tokio::test]
async fn a_long_diff_reaches_the_model_as_head_and_tail_and_the_client_whole() -> Result<()> {
    let mock = MockModel::start(|n, _| match n {
        0 => Reply::call("d-1", "git_diff", json!({})),
        _ => Reply::Text("done".into()),
    })
    .await;
    let home = TestHome::new()?.with_config(&mock.config(json!({})))?;
    repository(&home)?;
    let big: String = (0..4000)
        .map(|i| format!("line {i:05} of a long file\n"))
        .collect();
    std::fs::write(home.work().join("a.txt"), &big)?;
    let (results, _) = diff_turn(&home, Some("kimi-code")).await?;
    let whole = output(&results, "d-1");
    assert!(whole.chars().count() > 100_000, "{}", whole.len());
    assert!(whole.ends_with("+line 03999 of a long file\n"));
    let seen = tool_result(&mock.requests().await[1], "d-1").context("the model got no result")?;
    assert!(seen.len() < 60_000, "{}", seen.len());
    assert!(
        seen.contains("omitted here") && seen.contains("read the omitted part with Read"),
        "marker missing"
    );
    assert!(seen.contains("+line 03999 of a long file"), "the tail is kept");
    Ok(())
}

#[tokio::test]
async fn git_runs_with_the_childrens_environment_without_the_agents_secrets() -> Result<()> {
    let script = calls(&[("d-1", json!({}))]);
    let home = TestHome::new()?.scripted(&[&script, "text: done"])?;
    repository(&home)?;
    // A `git` first on PATH that writes down its environment, then runs the real one.
    let real = Command::new("sh").args(["-c", "command -v git"]).output()?;
    let real = String::from_utf8(real.stdout)?.trim().to_owned();
    let bin = home.root.path().join("bin");
    std::fs::create_dir_all(&bin)?;
    let seen = home.root.path().join("git-env.txt");
    let wrapper = bin.join("git");
    std::fs::write(
        &wrapper,
        format!("#!/bin/sh\nenv >> '{}'\nexec '{real}' \"$@\"\n", seen.display()),
    )?;
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755))?;
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let env = [
        ("PATH", path.as_str()),
        ("MY_SERVICE_API_KEY", "sk-live-git-x1"),
        ("KIMI_API_KEY", "sk-kimi-git-x2"),
        ("HARMLESS_SETTING", "visible-git"),
    ];
    let mut wire = WireProcess::spawn_with_env(&home, home.args(), &env).await?;
    wire.initialize(json!({"protocol_version": "1.10"})).await?;
    let (_, messages) = wire.prompt(json!("what changed?")).await?;
    let results: Vec<Value> = payloads(&messages, "ToolResult").into_iter().cloned().collect();
    assert!(output(&results, "d-1").contains("+alpha changed"));
    let seen = std::fs::read_to_string(&seen).context("the wrapper did not run")?;
    assert!(seen.contains("HARMLESS_SETTING=visible-git"), "{seen}");
    assert!(
        !seen.contains("sk-live-git-x1") && !seen.contains("sk-kimi-git-x2"),
        "{seen}"
    );
    Ok(())
}
