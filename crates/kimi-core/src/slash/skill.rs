//! `/skill:<name> [request]`: one model turn with the skill's text (reference `_make_skill_runner`).

use kimi_wire::message::ContentPart;

use crate::skills::{SKILL_COMMAND_PREFIX, Skill, skill_prompt};
use crate::soul::{CommandContext, TurnError, TurnOutcome};

/// Sends the skill's SKILL.md (re-read now, front matter included), plus `User request:` and the
/// arguments when there are any, as the user's message of a model turn.
pub(super) async fn run_skill(
    cx: &CommandContext<'_>,
    skill: &Skill,
    args: &str,
) -> Result<TurnOutcome, TurnError> {
    let text = match skill.text() {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(skill = %skill.name, file = %skill.skill_md_file.display(), error = %e, "skill file unreadable");
            cx.say(&format!(
                "Failed to load skill \"/{SKILL_COMMAND_PREFIX}{}\".",
                skill.name
            ))
            .await;
            return Ok(TurnOutcome::Finished);
        }
    };
    let prompt = skill_prompt(&text, args);
    cx.model_turn(vec![ContentPart::text(prompt)]).await
}
