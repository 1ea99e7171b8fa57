//! `/plan [on|off|view|clear]`: plan mode by hand (reference `slash.py` `plan`). Without an argument it
//! toggles. Texts are the reference's.

use kimi_wire::message::StatusUpdate;

use crate::soul::CommandContext;

/// Runs `/plan`.
pub(super) async fn plan_command(cx: &CommandContext<'_>, args: &str) {
    match args.trim().to_lowercase().as_str() {
        "on" => {
            cx.plan().set(true);
            let path = plan_file_display(cx);
            cx.say(&format!("Plan mode ON. Plan file: {path}")).await;
            plan_status(cx).await;
        }
        "off" => {
            cx.plan().set(false);
            cx.say("Plan mode OFF. All tools are now available.").await;
            plan_status(cx).await;
        }
        "view" => match current_plan(cx) {
            Some(plan) => cx.say(&plan).await,
            None => cx.say("No plan file found for this session.").await,
        },
        "clear" => {
            if let Some(path) = plan_file(cx)
                && let Err(e) = std::fs::remove_file(&path)
                && e.kind() != std::io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), error = %e, "plan file not removed");
            }
            cx.say("Plan cleared.").await;
        }
        _ => {
            let enabled = !cx.plan().is_on();
            cx.plan().set(enabled);
            if enabled {
                let path = plan_file_display(cx);
                cx.say(&format!(
                        "Plan mode ON. Write your plan to: {path}\nUse ExitPlanMode when done, or /plan off to exit manually."
                    ))
                    .await;
            } else {
                cx.say("Plan mode OFF. All tools are now available.").await;
            }
            plan_status(cx).await;
        }
    }
}

/// The plan file of this session's plan, whether or not plan mode is on.
fn plan_file(cx: &CommandContext<'_>) -> Option<std::path::PathBuf> {
    cx.plan().file()
}

fn plan_file_display(cx: &CommandContext<'_>) -> String {
    plan_file(cx).map_or_else(|| "None".to_owned(), |p| p.display().to_string())
}

/// The plan's text, when the file exists and is not empty.
fn current_plan(cx: &CommandContext<'_>) -> Option<String> {
    let text = std::fs::read_to_string(plan_file(cx)?).ok()?;
    (!text.is_empty()).then_some(text)
}

/// `StatusUpdate{plan_mode}`, recorded like `set_plan_mode`'s.
async fn plan_status(cx: &CommandContext<'_>) {
    let update = StatusUpdate {
        plan_mode: Some(cx.plan().is_on()),
        ..StatusUpdate::default()
    };
    cx.status(update).await;
}
