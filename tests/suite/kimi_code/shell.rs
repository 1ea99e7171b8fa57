//! seeds/002 "Shell": `Bash`, with `cwd`, `timeout` in milliseconds (foreground default 60 s, at most
//! 5 min; background default and most 10 min), `disable_timeout`, `description` required in the
//! background, stdin closed, and approval by default.

use anyhow::Result;
use pretty_assertions::assert_eq;
use serde_json::json;

use super::{calling, kimi_code, not_found, turn};

/// The reference's (pydantic-shaped) wording of an argument error.
fn invalid(detail: &str) -> String {
    format!("Error validating JSON arguments: 1 validation error for Params\n  Value error, {detail}")
}

#[tokio::test]
async fn bash_asks_runs_in_cwd_and_closes_stdin() -> Result<()> {
    let home = calling(&[
        ("b-1", "Bash", json!({"command": "pwd"})),
        ("b-2", "Bash", json!({"command": "pwd", "cwd": "sub"})),
        (
            "b-3",
            "Bash",
            json!({"command": "read line; echo \"got:[$line]\""}),
        ),
        ("b-4", "Bash", json!({"command": "exit 3"})),
        ("b-5", "Bash", json!({"command": "pwd", "cwd": "nowhere"})),
        ("b-6", "Shell", json!({"command": "pwd"})),
    ])?;
    std::fs::create_dir_all(home.work().join("sub"))?;
    let (home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "run").await?;
    assert_eq!(turn.actions(), ["run command"; 4]);
    // A command that runs elsewhere says where.
    let descriptions: Vec<&str> = turn
        .approvals
        .iter()
        .filter_map(|r| r["params"]["payload"]["description"].as_str())
        .collect();
    let elsewhere = format!("Run command `pwd` in `{}`", home.work().join("sub").display());
    assert!(
        descriptions.contains(&"Run command `pwd`") && descriptions.contains(&elsewhere.as_str()),
        "{descriptions:?}"
    );
    let work = home.work().canonicalize()?;
    assert_eq!(turn.output("b-1")?.trim(), work.to_string_lossy());
    assert_eq!(turn.output("b-2")?.trim(), work.join("sub").to_string_lossy());
    assert_eq!(turn.output("b-3")?, "got:[]\n");
    assert_eq!(turn.message("b-4")?, "Command failed with exit code: 3.");
    assert_eq!(turn.message("b-5")?, "`nowhere` does not exist.");
    assert_eq!(turn.message("b-6")?, not_found("Shell"));
    Ok(())
}

#[tokio::test]
async fn bash_timeouts_are_milliseconds_with_seeds_limits() -> Result<()> {
    let home = calling(&[
        (
            "t-1",
            "Bash",
            json!({"command": "echo start; sleep 20", "timeout": 700}),
        ),
        ("t-2", "Bash", json!({"command": "true", "timeout": 300001})),
        ("t-3", "Bash", json!({"command": "true", "timeout": 300000})),
        ("t-4", "Bash", json!({"command": "true", "timeout": 0})),
        ("t-5", "Bash", json!({"command": "true", "disable_timeout": true})),
    ])?;
    let (_home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "run").await?;
    assert_eq!(turn.message("t-1")?, "Command killed by timeout (700ms)");
    assert_eq!(turn.output("t-1")?, "start\n");
    assert_eq!(
        turn.message("t-2")?,
        invalid(
            "timeout must be <= 300000 ms (5 minutes) for foreground commands; use run_in_background=true \
             for longer commands (up to 600000 ms, or no limit with disable_timeout=true)"
        )
    );
    assert_eq!(turn.result("t-3")?["is_error"], json!(false));
    assert_eq!(
        turn.message("t-4")?,
        "Error validating JSON arguments: 1 validation error for Params\ntimeout\n  Input should be greater \
         than or equal to 1"
    );
    assert_eq!(
        turn.message("t-5")?,
        invalid("disable_timeout only applies to background commands; set run_in_background=true as well")
    );
    // Argument errors are refused before anything is asked: only t-1 and t-3 asked.
    assert_eq!(turn.actions().len(), 2);
    Ok(())
}

/// seeds/002: a command past its time gets SIGTERM, then 5 s to finish, then SIGKILL. This one traps
/// TERM (the trap says so, then counts seconds and would end with "survived" after ten): the trap
/// running shows TERM came first, and its count shows the grace, cut by KILL before "survived".
#[tokio::test]
async fn bash_past_its_timeout_gets_term_then_five_seconds_then_kill() -> Result<()> {
    let command = "echo $$ > shell.pid; trap 'echo term; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1; \
                   echo tick $i; done; echo survived; exit 0' TERM; echo start; sleep 60";
    let home = calling(&[("k-1", "Bash", json!({"command": command, "timeout": 700}))])?;
    let (home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "run").await?;
    assert_eq!(turn.message("k-1")?, "Command killed by timeout (700ms)");
    let output = turn.output("k-1")?;
    // (bash reports the `sleep` that TERM ended as "Terminated" before running the trap.)
    let lines: Vec<&str> = output.lines().filter(|l| *l != "Terminated").collect();
    assert_eq!(lines.get(..2), Some(&["start", "term"][..]), "{output}");
    assert!(!output.contains("survived"), "{output}");
    let ticks = output.lines().filter(|l| l.starts_with("tick ")).count();
    // At least one tick: it ran past TERM. How many depends on the machine's load; that no "survived"
    // line came is what shows the KILL ended it before its own 10 s.
    assert!(ticks >= 1, "{ticks} ticks: {output}");
    let pid: u32 = std::fs::read_to_string(home.work().join("shell.pid"))?
        .trim()
        .parse()?;
    crate::suite::toolset::eventually("the shell is gone", || crate::suite::toolset::is_gone(pid)).await?;
    Ok(())
}

#[tokio::test]
async fn bash_in_the_background_needs_a_description_and_defaults_to_ten_minutes() -> Result<()> {
    let home = calling(&[
        (
            "g-1",
            "Bash",
            json!({"command": "sleep 30", "run_in_background": true}),
        ),
        (
            "g-2",
            "Bash",
            json!({"command": "sleep 30", "run_in_background": true, "description": "nap"}),
        ),
        (
            "g-3",
            "Bash",
            json!({"command": "sleep 30", "run_in_background": true, "description": "x", "timeout": 600001}),
        ),
        (
            "g-4",
            "Bash",
            json!({"command": "sleep 30", "run_in_background": true, "description": "long",
                               "disable_timeout": true}),
        ),
        ("g-5", "TaskList", json!({})),
    ])?;
    let (home, mut wire) = kimi_code(home).await?;
    let turn = turn(&mut wire, "background").await?;
    assert_eq!(
        turn.message("g-1")?,
        invalid("description is required when run_in_background is true")
    );
    assert_eq!(
        turn.message("g-3")?,
        invalid(
            "timeout must be <= 600000 ms (10 minutes) for background commands; set disable_timeout=true \
             for a command that must run longer"
        )
    );
    assert_eq!(
        turn.actions(),
        ["run background command", "run background command"]
    );
    assert_eq!(turn.message("g-2")?, "Background task started.");
    let listed = turn.output("g-5")?;
    assert!(listed.starts_with("active_background_tasks: 2\n"), "{listed}");
    // The default background limit is 600 s; disable_timeout leaves none.
    let records: Vec<&str> = listed.split("\n---\n").collect();
    let nap = records
        .iter()
        .find(|r| r.contains("description: nap"))
        .copied()
        .unwrap_or_default();
    let long = records
        .iter()
        .find(|r| r.contains("description: long"))
        .copied()
        .unwrap_or_default();
    assert!(nap.contains("\ntimeout_s: 600"), "{nap}");
    assert!(!long.contains("timeout_s"), "{long}");
    // The spec records what the task was started with.
    let tasks = home.session_dirs()[0].join("tasks");
    let specs: Vec<serde_json::Value> = std::fs::read_dir(&tasks)?
        .flatten()
        .map(|d| {
            serde_json::from_str(&std::fs::read_to_string(d.path().join("spec.json"))?).map_err(Into::into)
        })
        .collect::<Result<_>>()?;
    let mut timeouts: Vec<serde_json::Value> = specs.iter().map(|s| s["timeout_s"].clone()).collect();
    timeouts.sort_by_key(|t| t.to_string());
    assert_eq!(timeouts, [json!(600), json!(null)]);
    wire.wait_exit().await?;
    Ok(())
}
