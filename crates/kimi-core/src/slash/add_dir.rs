//! `/add-dir [path]`: lists the workspace's extra directories, or adds one for the rest of the session
//! (kept in `state.json`, told to the model with a listing), with the reference's answers.

use kimi_llm::Message;

use super::export::{expand_home, unquote};
use crate::session::{canonical_work_dir, write_atomic};
use crate::soul::{CommandContext, TurnError, system};
use crate::state::StateFile;
use crate::workspace;

/// Runs `/add-dir`.
pub(super) async fn add_dir_command(cx: &CommandContext<'_>, args: &str) -> Result<(), TurnError> {
    let Some(info) = cx.session() else {
        cx.say("The /add-dir command is not available in this session.")
            .await;
        return Ok(());
    };
    let added = info.env.additional_dirs();
    let raw = unquote(args);
    if raw.is_empty() {
        let text = if added.is_empty() {
            "No additional directories. Usage: /add-dir <path>".to_owned()
        } else {
            let mut lines = vec!["Additional directories:".to_owned()];
            lines.extend(added.iter().map(|d| format!("  - {}", d.display())));
            lines.join("\n")
        };
        cx.say(&text).await;
        return Ok(());
    }
    // Relative paths are relative to the work dir, whatever our process's current directory is.
    let dir = canonical_work_dir(&info.work_dir.join(expand_home(raw)));
    if let Some(refusal) = workspace::refusal(&dir, &info.work_dir, &added) {
        cx.say(&refusal).await;
        return Ok(());
    }
    let listing = match crate::prompt::try_list_dir(&dir) {
        Ok(listing) => listing,
        Err(e) => {
            cx.say(&format!("Cannot read directory: {} ({e})", dir.display()))
                .await;
            return Ok(());
        }
    };
    info.env.add_dir(dir.clone());
    let state_path = info.env.session_dir.join("state.json");
    let shown = dir.display().to_string();
    let saved = tokio::task::spawn_blocking(move || {
        let mut file = StateFile::load(&state_path);
        file.additional_dirs.push(shown);
        let bytes = serde_json::to_vec_pretty(&file).unwrap_or_default();
        write_atomic(&state_path, &bytes)
    })
    .await;
    if let Ok(Err(e)) = saved {
        tracing::error!(error = %e, "state.json not written after /add-dir");
    }
    let note = format!(
        "The user added a directory to the workspace: `{}`\n\nIts contents:\n```\n{listing}\n```\n\n\
             Reading, writing, searching and globbing files there works as in the working directory.",
        dir.display()
    );
    cx.conversation()
        .await
        .append(Message::user(vec![system(&note)]))?;
    cx.say(&format!("Added directory to workspace: {}", dir.display()))
        .await;
    Ok(())
}
