//! `Skill`: the model loads an inline skill's instructions by name (seeds/002). Offered only when the
//! session has at least one skill the model may load; auto-approved (it only reads the skill).
//!
//! The skill's text (with the model's `args` as the user request) comes back as the tool output, so it
//! stays in the context for the rest of the conversation. Loads nest at most [`MAX_SKILL_DEPTH`] deep
//! within a turn (see `nesting`).

use std::sync::Arc;

use futures::future::BoxFuture;
use kimi_llm::ToolSpec;
use kimi_wire::message::ToolReturnValue;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{MAX_SKILL_DEPTH, Skill, Skills, skill_prompt};
use crate::toolset::{CallContext, Plan, Tool, parse_args, schema_for};

/// The tool's name.
pub const NAME: &str = "Skill";

// Parameters of `Skill` (plain comments: doc comments would become schema descriptions).
#[derive(Debug, Deserialize, JsonSchema)]
struct SkillArgs {
    /// Name of the skill to load, exactly as listed in this tool's description.
    skill: String,
    /// What you want the skill applied to (a file, an issue number, a short request). Leave it out
    /// when there is nothing to add.
    #[serde(default)]
    args: Option<String>,
}

/// The `Skill` tool.
#[derive(Debug)]
pub struct SkillTool {
    spec: ToolSpec,
    skills: Arc<Skills>,
}

impl SkillTool {
    /// The tool over `skills`; `None` when none of them may be loaded by the model.
    pub fn new(skills: Arc<Skills>) -> Option<Self> {
        if !skills.any_model_invocable() {
            return None;
        }
        let mut description = include_str!("skill_tool.md").trim_end().to_owned();
        description.push_str("\n\nSkills you can load:\n");
        for skill in skills.iter().filter(|s| s.is_model_invocable()) {
            description.push_str(&format!("- {}: {}\n", skill.name, skill.description));
        }
        Some(Self {
            spec: ToolSpec {
                name: NAME.to_owned(),
                description: description.trim_end().to_owned(),
                parameters: schema_for::<SkillArgs>(),
            },
            skills,
        })
    }

    fn load(&self, args: SkillArgs) -> ToolReturnValue {
        let refuse = |message: String| ToolReturnValue::error("", message, "Skill not loaded");
        let Some(skill) = self.skills.get(&args.skill) else {
            let names: Vec<&str> = self
                .skills
                .iter()
                .filter(|s| s.is_model_invocable())
                .map(|s| s.name.as_str())
                .collect();
            return refuse(format!(
                "Skill \"{}\" not found. Skills you can load: {}.",
                args.skill,
                names.join(", ")
            ));
        };
        if let Some(reason) = not_loadable(skill) {
            return refuse(reason);
        }
        if let Err(too_deep) = self.skills.enter() {
            return refuse(format!(
                "Skill \"{}\" was not loaded: it would nest {} levels deep and skills may load one another at most {MAX_SKILL_DEPTH} levels deep in a turn. Carry on with the instructions you already have.",
                skill.name, too_deep.depth
            ));
        }
        match skill.text() {
            Ok(text) => ToolReturnValue::ok_with_brief(
                skill_prompt(&text, args.args.as_deref().unwrap_or("")),
                format!("Skill \"{}\" loaded. Follow its instructions.", skill.name),
                format!("Loaded skill {}", skill.name),
            ),
            Err(e) => refuse(format!("Failed to load skill \"{}\": {e}", skill.name)),
        }
    }
}

/// Why the model may not load `skill`, if it may not.
fn not_loadable(skill: &Skill) -> Option<String> {
    if skill.model_invocation_disabled {
        return Some(format!(
            "Skill \"{}\" can only be run by the user (/skill:{}).",
            skill.name, skill.name
        ));
    }
    if !skill.is_model_invocable() {
        return Some(format!(
            "Skill \"{}\" is not an inline skill; only the user can run it (/skill:{}).",
            skill.name, skill.name
        ));
    }
    None
}

impl Tool for SkillTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn plan(
        self: Arc<Self>,
        args: Value,
        _ctx: CallContext,
    ) -> BoxFuture<'static, Result<Plan, ToolReturnValue>> {
        Box::pin(async move {
            let args: SkillArgs = parse_args(args)?;
            Ok(Plan::read_only(Box::pin(async move { self.load(args) })))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::{SkillKind, SkillScope, SkillSource};
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;

    fn skill(name: &str, kind: SkillKind, disabled: bool) -> Skill {
        Skill {
            name: name.into(),
            description: format!("about {name}"),
            kind,
            dir: PathBuf::from("/s"),
            skill_md_file: PathBuf::from("/s/SKILL.md"),
            scope: SkillScope::User,
            model_invocation_disabled: disabled,
            source: SkillSource::Bundled("---\nname: x\n---\nDo the thing.\n"),
        }
    }

    fn tool() -> SkillTool {
        let skills = Skills::from_skills(vec![
            skill("inline-a", SkillKind::Inline, false),
            skill("user-only", SkillKind::Inline, true),
            skill("plain", SkillKind::Standard, false),
        ]);
        SkillTool::new(Arc::new(skills)).unwrap()
    }

    fn args(skill: &str, extra: Option<&str>) -> SkillArgs {
        SkillArgs {
            skill: skill.into(),
            args: extra.map(Into::into),
        }
    }

    #[test]
    fn offered_only_with_a_loadable_skill() {
        let none = Skills::from_skills(vec![skill("plain", SkillKind::Standard, false)]);
        assert!(SkillTool::new(Arc::new(none)).is_none());
        let description = &tool().spec.description;
        assert!(description.ends_with("Skills you can load:\n- inline-a: about inline-a"));
    }

    #[test]
    fn loads_inline_skills_with_the_request() {
        let tool = tool();
        tool.skills.begin_turn();
        let result = tool.load(args("Inline-A", Some("on main.rs")));
        assert!(!result.is_error);
        assert_eq!(
            result.output,
            "---\nname: x\n---\nDo the thing.\n\nUser request:\non main.rs".into()
        );
        assert_eq!(
            result.message,
            "Skill \"inline-a\" loaded. Follow its instructions."
        );
    }

    #[test]
    fn refuses_what_the_model_may_not_load() {
        let tool = tool();
        let message = |name: &str| tool.load(args(name, None)).message;
        assert_eq!(
            message("nope"),
            "Skill \"nope\" not found. Skills you can load: inline-a."
        );
        assert_eq!(
            message("user-only"),
            "Skill \"user-only\" can only be run by the user (/skill:user-only)."
        );
        assert_eq!(
            message("plain"),
            "Skill \"plain\" is not an inline skill; only the user can run it (/skill:plain)."
        );
    }

    #[test]
    fn the_fourth_nested_load_is_refused() {
        let tool = tool();
        tool.skills.begin_turn();
        for _ in 0..MAX_SKILL_DEPTH {
            tool.skills.begin_step();
            assert!(!tool.load(args("inline-a", None)).is_error);
        }
        tool.skills.begin_step();
        let refused = tool.load(args("inline-a", None));
        assert!(refused.is_error);
        assert!(
            refused.message.contains("nest 4 levels deep"),
            "{}",
            refused.message
        );
    }
}
