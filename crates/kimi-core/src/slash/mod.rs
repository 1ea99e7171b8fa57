//! Slash commands sent as `prompt` input (`/clear`, `/yolo`, `/skill:<name>`, ...): the list `initialize`
//! reports and the commands themselves (reference `soul/slash.py` and the skill commands of
//! `soul/kimisoul.py`). A slash turn streams its replies as content parts and makes no model call unless
//! the command needs one (`/compact`, `/init`, skills and flows).
//!
//! Layout: this file (parsing, the table, dispatch and the small toggles), `skill` (`/skill:<name>`),
//! `flow` (`/flow:<name>`), `init` (`/init`), `plan` (`/plan`), `export` (`/export`, `/import`),
//! `add_dir` (`/add-dir`). Each command is a function of a [`CommandContext`], the narrow view of the
//! running turn the soul makes for it; none reaches into the soul itself.

mod add_dir;
mod export;
mod flow;
mod init;
mod plan;
mod skill;

use kimi_wire::message::UserInput;
use kimi_wire::params::SlashCommandInfo;

use crate::skills::{SkillCommand, Skills};
use crate::soul::{CommandContext, TurnError, TurnOutcome};

/// A command name with its description and aliases, as `initialize` lists them.
struct Command {
    name: &'static str,
    description: &'static str,
    aliases: &'static [&'static str],
}

/// The built-in commands, in the reference's registry order (the descriptions are interface strings
/// clients show and tests match).
const COMMANDS: &[Command] = &[
    Command {
        name: "init",
        description: "Analyze the codebase and generate an `AGENTS.md` file",
        aliases: &[],
    },
    Command {
        name: "compact",
        description: "Compact the context (optionally with a custom focus, e.g. /compact keep db discussions)",
        aliases: &[],
    },
    Command {
        name: "clear",
        description: "Clear the context",
        aliases: &["reset"],
    },
    Command {
        name: "yolo",
        description: "Toggle YOLO mode (auto-approve all actions)",
        aliases: &[],
    },
    Command {
        name: "afk",
        description: "Toggle afk mode (auto-dismiss AskUserQuestion, auto-approve tool calls)",
        aliases: &[],
    },
    Command {
        name: "plan",
        description: "Toggle plan mode. Usage: /plan [on|off|view|clear]",
        aliases: &[],
    },
    Command {
        name: "add-dir",
        description: "Add a directory to the workspace. Usage: /add-dir <path>. Run without args to list added dirs",
        aliases: &[],
    },
    Command {
        name: "export",
        description: "Export current session context to a markdown file",
        aliases: &[],
    },
    Command {
        name: "import",
        description: "Import context from a file or session ID",
        aliases: &[],
    },
    // Not a command of the reference's wire mode (only of its terminal UI, whose description this is).
    // The server answers it before a turn starts (`kimi_wire::side_question`); a scheduled prompt that
    // is one reaches the dispatch below.
    Command {
        name: kimi_wire::side_question::COMMAND,
        description: "Ask a side question without interrupting the main conversation",
        aliases: &[],
    },
];

/// The built-in commands for `initialize`.
pub fn builtin_commands() -> Vec<SlashCommandInfo> {
    COMMANDS
        .iter()
        .map(|c| SlashCommandInfo {
            name: c.name.to_owned(),
            description: c.description.to_owned(),
            aliases: c.aliases.iter().map(|a| (*a).to_owned()).collect(),
        })
        .collect()
}

/// Splits `/name args` (reference: `^/([a-zA-Z0-9_-]+(?::[a-zA-Z0-9_-]+)*)` then whitespace or end).
pub fn parse(text: &str) -> Option<(&str, &str)> {
    let rest = text.strip_prefix('/')?;
    let end = rest.find(|c: char| c.is_whitespace()).unwrap_or(rest.len());
    let (name, args) = rest.split_at(end);
    let valid_segment = |s: &str| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if !name.split(':').all(valid_segment) {
        return None;
    }
    Some((name, args.trim()))
}

/// Every command `initialize` lists: the built-ins, then `skill:<name>` and `flow:<name>` for the
/// session's skills.
pub fn commands(skills: Option<&Skills>) -> Vec<SlashCommandInfo> {
    let mut commands = builtin_commands();
    if let Some(skills) = skills {
        commands.extend(skills.slash_commands());
    }
    commands
}

/// Runs `input` as a slash command if it is one; `None` means "not a command, run a normal turn". The
/// soul's one way in (`Soul::run_slash_command` makes the context).
pub(crate) async fn run(
    cx: &CommandContext<'_>,
    input: &UserInput,
) -> Option<Result<TurnOutcome, TurnError>> {
    let UserInput::Text(text) = input else { return None };
    let (name, args) = parse(text.trim_start())?;
    Some(dispatch(cx, name, args).await)
}

async fn dispatch(cx: &CommandContext<'_>, name: &str, args: &str) -> Result<TurnOutcome, TurnError> {
    let builtin = COMMANDS
        .iter()
        .find(|c| c.name == name || c.aliases.contains(&name))
        .map(|c| c.name);
    match builtin {
        Some("init") => return init::init_agents_md(cx).await,
        Some("plan") => plan::plan_command(cx, args).await,
        Some("export") => export::export_command(cx, args).await,
        Some("import") => export::import_command(cx, args).await?,
        Some("add-dir") => add_dir::add_dir_command(cx, args).await?,
        Some("yolo") => toggle_yolo(cx).await,
        Some(kimi_wire::side_question::COMMAND) => cx.side_question(args).await?,
        Some("afk") => toggle_afk(cx).await,
        Some("clear") => {
            cx.conversation().await.clear().await?;
            cx.say("The context has been cleared.").await;
            cx.status(cx.context_status().await).await;
        }
        Some("compact") => {
            if !cx.conversation().await.has_checkpoints() {
                cx.say("The context is empty.").await;
                return Ok(TurnOutcome::Finished);
            }
            cx.require_model()?;
            cx.compact(args).await?;
            cx.say("The context has been compacted.").await;
            cx.status(cx.context_status().await).await;
        }
        Some(other) => {
            cx.say(&format!(
                "The /{other} command is not available in this version of kimi-agent."
            ))
            .await;
        }
        None => {
            return match cx.skills().and_then(|s| s.command(name)) {
                Some(SkillCommand::Run(skill)) => skill::run_skill(cx, skill, args).await,
                Some(SkillCommand::Walk(skill, flow)) => flow::walk_flow(cx, skill, flow, args).await,
                None => {
                    cx.say(&format!("Unknown slash command \"/{name}\".")).await;
                    Ok(TurnOutcome::Finished)
                }
            };
        }
    }
    Ok(TurnOutcome::Finished)
}

async fn toggle_yolo(cx: &CommandContext<'_>) {
    let state = cx.approval_modes();
    if state.yolo {
        cx.set_yolo(false);
        if state.afk {
            cx.say("Yolo disabled, but afk is still on \u{2014} tool calls remain auto-approved. Use /afk to turn off afk.").await;
        } else {
            cx.say("You only die once! Actions will require approval.").await;
        }
    } else {
        cx.set_yolo(true);
        cx.say("You only live once! All actions will be auto-approved.")
            .await;
    }
}

async fn toggle_afk(cx: &CommandContext<'_>) {
    let state = cx.approval_modes();
    if state.afk {
        cx.set_afk(false);
        if state.yolo {
            cx.say("afk mode disabled. You are back at the terminal. Yolo is still on.")
                .await;
        } else {
            cx.say("afk mode disabled. You are back at the terminal.").await;
        }
    } else {
        cx.set_afk(true);
        cx.say("afk mode enabled. AskUserQuestion will be auto-dismissed and tool calls auto-approved.")
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_arguments_like_the_reference() {
        assert_eq!(parse("/clear"), Some(("clear", "")));
        assert_eq!(parse("/compact keep db"), Some(("compact", "keep db")));
        assert_eq!(parse("/skill:test  go"), Some(("skill:test", "go")));
        assert_eq!(parse("/a:b:c"), Some(("a:b:c", "")));
        assert_eq!(parse("/"), None);
        assert_eq!(parse("/a:"), None);
        assert_eq!(parse("/ab/cd"), None);
        assert_eq!(parse("plain"), None);
    }

    #[test]
    fn the_builtin_list_keeps_the_reference_order() {
        let names: Vec<String> = builtin_commands().into_iter().map(|c| c.name).collect();
        assert_eq!(
            names,
            [
                "init", "compact", "clear", "yolo", "afk", "plan", "add-dir", "export", "import", "btw"
            ]
        );
    }
}
