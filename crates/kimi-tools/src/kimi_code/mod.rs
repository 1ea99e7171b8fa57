//! The kimi-code tool profile: the tool set of Kimi Code (shared/seeds/002), which `--agent kimi-code`
//! offers instead of the reference's. Agent files name these tools `kimi_code:<Name>`.
//!
//! One implementation per idea: every tool here is served by the implementation the default agent's
//! tool of the same idea uses, through argument and result adapters ([`adapter::Adapted`]) or a
//! parameter of the shared implementation where the semantics differ:
//!
//! | seeds/002 | served by | what differs |
//! |---|---|---|
//! | `Read`, `Write`, `WebSearch`, `TodoList` | ReadFile, WriteFile, SearchWeb, SetTodoList | the name (Read's media-file error names ReadMediaFile) |
//! | `Edit` | StrReplaceFile | one flat `old_string`/`new_string`/`replace_all` edit |
//! | `Glob` | Glob under [`GlobRules::KimiCode`](crate::file::GlobRules) | `path` (may be relative), newest first, wildcard-only and brace patterns refused |
//! | `Bash` | Shell ([`bash`]) | `cwd`, `timeout` in ms (60 s / 5 min; background 10 min / 10 min), `disable_timeout` |
//! | `TaskList`, `TaskOutput`, `TaskStop` | the task tools under [`TaskFormat::KimiCode`](crate::task::TaskFormat) | seeds/002's records ([`tasks`]) |
//! | `Agent` | Agent | no `model`; `subagent_type` and `resume` exclusive |
//! | `ExitPlanMode` | ExitPlanMode | 1 to 3 `options`, labels at most 80 characters |
//! | `AskUserQuestion` | AskUserQuestion | `header` at most 12 characters |
//! | `ReadMediaFile`, `Grep`, `FetchURL`, `EnterPlanMode`, `Cron*` | the same tools | nothing |
//!
//! Every text the model reads of them names the profile's tools ([`NAMES`], applied in one place).
//!
//! `git_diff` and `Skill` are the same in both agents and are not part of the profile.

mod adapter;
mod agent;
mod ask;
mod bash;
mod edit;
mod glob;
mod plan;

use std::borrow::Cow;
use std::sync::Arc;

use kimi_core::Tool;
use kimi_core::ToolNames;
use kimi_llm::ToolSpec;
use kimi_wire::message::{ToolOutput, ToolReturnValue};
use serde_json::Value;

use crate::task::TaskFormat;
use crate::{Shell, TaskList, TaskOutput, TaskStop, ToolDeps, UnknownTool};
use adapter::Adapted;

/// How agent files name the profile's tools: `kimi_code:Bash`.
pub const PREFIX: &str = "kimi_code:";

/// The profile's tools as agent files name them, in the built-in `kimi-code` agent's order.
pub const TOOLS: &[&str] = &[
    "kimi_code:Agent",
    "kimi_code:AskUserQuestion",
    "kimi_code:TodoList",
    "kimi_code:Bash",
    "kimi_code:TaskList",
    "kimi_code:TaskOutput",
    "kimi_code:TaskStop",
    "kimi_code:Read",
    "kimi_code:ReadMediaFile",
    "kimi_code:Glob",
    "kimi_code:Grep",
    "kimi_code:Write",
    "kimi_code:Edit",
    "kimi_code:WebSearch",
    "kimi_code:FetchURL",
    "kimi_code:EnterPlanMode",
    "kimi_code:ExitPlanMode",
    "kimi_code:CronCreate",
    "kimi_code:CronList",
    "kimi_code:CronDelete",
];

/// What the profile calls the reference's tools, for the texts the model reads (descriptions,
/// reminders, the output budget's marker).
pub const NAMES: ToolNames = ToolNames::new(&[
    ("ReadFile", "Read"),
    ("WriteFile", "Write"),
    ("StrReplaceFile", "Edit"),
    ("Shell", "Bash"),
    ("SetTodoList", "TodoList"),
    ("SearchWeb", "WebSearch"),
]);

/// Builds the profile's tool `name` (without the prefix) over the shared implementations; `Ok(None)`
/// when it does not load in this session, for the same reasons as its implementation. Whatever the
/// model reads of it names the profile's tools ([`in_profile_words`]).
pub(crate) fn build_tool(name: &str, deps: &ToolDeps) -> Result<Option<Arc<dyn Tool>>, UnknownTool> {
    let shared = |reference: &str| crate::build_tool(reference, deps);
    let session = &deps.session;
    let tool: Arc<dyn Tool> = match name {
        // The same tools under the same names.
        "Grep" | "FetchURL" | "ReadMediaFile" | "EnterPlanMode" | "CronCreate" | "CronList"
        | "CronDelete" => match shared(name)? {
            Some(inner) => inner,
            None => return Ok(None),
        },
        "AskUserQuestion" => match shared(name)? {
            Some(inner) => Arc::new(ask::ask_user_question(inner)),
            None => return Ok(None),
        },
        "Read" => match shared("ReadFile")? {
            Some(inner) => Arc::new(renamed(inner, name).result(read_result)),
            None => return Ok(None),
        },
        "Write" => match shared("WriteFile")? {
            Some(inner) => Arc::new(renamed(inner, name)),
            None => return Ok(None),
        },
        "TodoList" => match shared("SetTodoList")? {
            Some(inner) => Arc::new(renamed(inner, name)),
            None => return Ok(None),
        },
        "WebSearch" => match shared("SearchWeb")? {
            Some(inner) => Arc::new(renamed(inner, name)),
            None => return Ok(None),
        },
        "Edit" => match shared("StrReplaceFile")? {
            Some(inner) => Arc::new(edit::edit(inner)),
            None => return Ok(None),
        },
        "Agent" => match shared("Agent")? {
            Some(inner) => Arc::new(agent::agent(inner)),
            None => return Ok(None),
        },
        "ExitPlanMode" => match shared("ExitPlanMode")? {
            Some(inner) => Arc::new(plan::exit_plan_mode(inner)),
            None => return Ok(None),
        },
        "Glob" => Arc::new(glob::glob(deps)),
        "Bash" => Arc::new(bash::Bash::new(
            Arc::new(Shell::new(Arc::clone(&session.env), session.tasks.clone())),
            session.env.work_dir.clone(),
        )),
        "TaskList" => Arc::new(TaskList::with_format(session.tasks.clone(), TaskFormat::KimiCode)),
        "TaskOutput" => Arc::new(TaskOutput::with_format(
            session.tasks.clone(),
            TaskFormat::KimiCode,
        )),
        "TaskStop" => Arc::new(TaskStop::with_format(session.tasks.clone(), TaskFormat::KimiCode)),
        _ => {
            return Err(UnknownTool {
                name: format!("{PREFIX}{name}"),
            });
        }
    };
    Ok(Some(in_profile_words(tool)))
}

/// `inner` under the profile's `name`, its spec otherwise unchanged ([`in_profile_words`] rewords it).
fn renamed(inner: Arc<dyn Tool>, name: &str) -> Adapted {
    let spec = ToolSpec {
        name: name.to_owned(),
        ..inner.spec().clone()
    };
    Adapted::new(inner, spec)
}

/// `tool` with every text the model reads of it naming the profile's tools: its description, its
/// parameters' descriptions, and the results of the tools whose results are all our own words (the
/// others' results carry file contents, command output and user answers, which are never rewritten).
fn in_profile_words(tool: Arc<dyn Tool>) -> Arc<dyn Tool> {
    let mut spec = tool.spec().clone();
    spec.description = NAMES.apply(&spec.description).into_owned();
    reword_descriptions(&mut spec.parameters);
    let own_words = OWN_WORDS.contains(&spec.name.as_str());
    if spec == *tool.spec() && !own_words {
        return tool;
    }
    let adapted = Adapted::new(tool, spec);
    Arc::new(if own_words {
        adapted.result(result_in_profile_words)
    } else {
        adapted
    })
}

/// The tools whose results (message and text output) are written by us alone, and may name tools.
const OWN_WORDS: &[&str] = &["ReadMediaFile", "EnterPlanMode"];

/// Every `description` string of a parameter schema, in the profile's words.
fn reword_descriptions(schema: &mut Value) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map.iter_mut() {
                match value {
                    Value::String(text) if key == "description" => {
                        if let Cow::Owned(reworded) = NAMES.apply(text) {
                            *text = reworded;
                        }
                    }
                    _ => reword_descriptions(value),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(reword_descriptions),
        _ => {}
    }
}

/// A result of one of the [`OWN_WORDS`] tools in the profile's words.
fn result_in_profile_words(mut value: ToolReturnValue) -> ToolReturnValue {
    if let Cow::Owned(message) = NAMES.apply(&value.message) {
        value.message = message;
    }
    if let ToolOutput::Text(text) = &mut value.output
        && let Cow::Owned(reworded) = NAMES.apply(text)
    {
        *text = reworded;
    }
    value
}

/// seeds/002: reading an image or video with `Read` points to `ReadMediaFile`.
fn read_result(mut value: ToolReturnValue) -> ToolReturnValue {
    const GENERIC: &str = "Use other appropriate tools to read image or video files.";
    if value.message.contains(GENERIC) {
        value.message = value
            .message
            .replace(GENERIC, "Use ReadMediaFile to read image or video files.");
    }
    value
}

/// An integer or `null`, as the other tools' optional integers are written.
fn optional_integer(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "anyOf": [{ "type": "integer" }, { "type": "null" }] })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn read_points_media_files_to_read_media_file() {
        let refused = ToolReturnValue::error(
            "",
            "`a.png` is a image file. Use other appropriate tools to read image or video files.",
            "Unsupported file type",
        );
        assert_eq!(
            read_result(refused).message,
            "`a.png` is a image file. Use ReadMediaFile to read image or video files."
        );
        let other = ToolReturnValue::ok("text", "1 lines read");
        assert_eq!(read_result(other.clone()), other);
    }

    #[test]
    fn parameter_descriptions_name_the_profiles_tools() {
        let mut schema = serde_json::json!({
            "properties": {
                "task_id": {"type": "string", "description": "As `Shell` or `TaskList` reported it."},
                "Shell": {"type": "string", "description": "Leaves the key and `ShellX` alone."},
            },
            "$defs": {"Item": {"anyOf": [{"description": "Write it with WriteFile."}]}},
        });
        reword_descriptions(&mut schema);
        assert_eq!(
            schema,
            serde_json::json!({
                "properties": {
                    "task_id": {"type": "string", "description": "As `Bash` or `TaskList` reported it."},
                    "Shell": {"type": "string", "description": "Leaves the key and `ShellX` alone."},
                },
                "$defs": {"Item": {"anyOf": [{"description": "Write it with Write."}]}},
            })
        );
    }

    #[test]
    fn own_words_results_name_the_profiles_tools() {
        let refused = ToolReturnValue::error(
            "",
            "`n.txt` is a text file. Use ReadFile to read text files.",
            "Unsupported file type",
        );
        assert_eq!(
            result_in_profile_words(refused).message,
            "`n.txt` is a text file. Use Read to read text files."
        );
        let guidance = ToolReturnValue::ok("create it with WriteFile first", "Plan mode on");
        assert_eq!(
            result_in_profile_words(guidance).output,
            ToolOutput::Text("create it with Write first".into())
        );
    }
}
