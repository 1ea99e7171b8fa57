//! Skills: reusable instructions in `SKILL.md` files (reference `skill/`), discovered at start, listed in
//! the system prompt (`${KIMI_SKILLS}`) and as slash commands, run with `/skill:<name>` or walked with
//! `/flow:<name>`, and, for inline skills, loaded by the model through the [`SkillTool`].
//!
//! Layout:
//! - [`discover`]: the roots (project, user, `--skills-dir`, config, plugins) and reading a root.
//! - `parse`: one SKILL.md into a [`Skill`]; `frontmatter`: the YAML block it starts with.
//! - [`flow`]: flow diagrams (Mermaid, D2) and their validation.
//! - `bundled`: our own built-in skills, embedded in the binary.
//! - `nesting`: the depth limit for skills loaded by the model; `tool`: the [`SkillTool`].

mod bundled;
pub mod discover;
pub mod flow;
mod frontmatter;
mod nesting;
mod parse;
mod tool;

use std::path::PathBuf;
use std::sync::Mutex;

use kimi_wire::params::SlashCommandInfo;

use crate::sync::lock;

pub use bundled::BUNDLED_DIR;
pub use discover::DiscoveryOptions;
use flow::Flow;
pub use nesting::{MAX_SKILL_DEPTH, Nesting, TooDeep};
pub use tool::SkillTool;

/// Prefix of the slash command that runs a skill (`/skill:<name>`).
pub const SKILL_COMMAND_PREFIX: &str = "skill:";
/// Prefix of the slash command that walks a flow skill (`/flow:<name>`).
pub const FLOW_COMMAND_PREFIX: &str = "flow:";

/// What a skill is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillKind {
    /// Instructions the user runs with `/skill:<name>` (the default).
    Standard,
    /// Like standard, and the model may also load it itself with the `Skill` tool (seeds/002).
    Inline,
    /// A diagram of prompts walked with `/flow:<name>` (also runnable as `/skill:<name>`).
    Flow(Box<Flow>),
}

/// Where a skill was found; the system prompt groups skills by it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SkillScope {
    /// Built into the binary.
    Builtin,
    /// The user's home directory.
    User,
    /// The project.
    Project,
    /// `--skills-dir`, `extra_skill_dirs` or plugins.
    Extra,
}

/// Where a skill's text is read from when it runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkillSource {
    /// Its Markdown file, read again each time (edits apply without a restart, as in the reference).
    File,
    /// Text embedded in the binary.
    Bundled(&'static str),
}

/// One discovered skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Its name (`/skill:<name>`).
    pub name: String,
    /// One or two sentences on what it does and when to use it.
    pub description: String,
    /// Standard, inline or flow.
    pub kind: SkillKind,
    /// Its resource directory (the skill's folder, or the root for a flat `<name>.md`).
    pub dir: PathBuf,
    /// The Markdown file holding it.
    pub skill_md_file: PathBuf,
    /// Where it was found.
    pub scope: SkillScope,
    /// `disableModelInvocation: true`: only the user may run it.
    pub model_invocation_disabled: bool,
    /// Where its text comes from.
    pub source: SkillSource,
}

impl Skill {
    /// The skill's text, trimmed, as the model gets it (front matter included, as in the reference).
    pub fn text(&self) -> std::io::Result<String> {
        match self.source {
            SkillSource::File => Ok(std::fs::read_to_string(&self.skill_md_file)?.trim().to_owned()),
            SkillSource::Bundled(text) => Ok(text.trim().to_owned()),
        }
    }

    /// The flow, for flow skills.
    pub fn flow(&self) -> Option<&Flow> {
        match &self.kind {
            SkillKind::Flow(flow) => Some(flow),
            SkillKind::Standard | SkillKind::Inline => None,
        }
    }

    /// Whether the model may load it with the `Skill` tool.
    pub fn is_model_invocable(&self) -> bool {
        self.kind == SkillKind::Inline && !self.model_invocation_disabled
    }
}

/// The lookup key of a skill name (reference: `casefold`).
pub fn normalize_name(name: &str) -> String {
    name.to_lowercase()
}

/// The session's skills, sorted by name, one per (case-insensitive) name, plus the depth counter of
/// the skills the model loads itself.
#[derive(Debug, Default)]
pub struct Skills {
    skills: Vec<Skill>,
    roots: Vec<PathBuf>,
    nesting: Mutex<Nesting>,
}

impl Skills {
    /// Discovers the skills for a session (see [`discover`]); bundled skills come last and lose to any
    /// discovered skill of the same name. Writes the bundled skills under the share dir.
    pub fn discover(options: &DiscoveryOptions) -> Self {
        let roots = discover::resolve_roots(options);
        let mut found: Vec<Skill> = Vec::new();
        for root in &roots {
            for skill in discover::scan_root(root) {
                if !found
                    .iter()
                    .any(|s| normalize_name(&s.name) == normalize_name(&skill.name))
                {
                    found.push(skill);
                }
            }
        }
        bundled::materialize(&options.share_dir);
        for skill in bundled::bundled_skills(&options.share_dir) {
            if !found
                .iter()
                .any(|s| normalize_name(&s.name) == normalize_name(&skill.name))
            {
                found.push(skill);
            }
        }
        let mut skills = Self::from_skills(found);
        skills.roots = roots.into_iter().map(|r| r.path).collect();
        skills.roots.push(options.share_dir.join(BUNDLED_DIR));
        tracing::info!(count = skills.skills.len(), "skills discovered");
        skills
    }

    /// A set of exactly these skills (first of a name wins), sorted by name.
    pub fn from_skills(mut skills: Vec<Skill>) -> Self {
        let mut seen = std::collections::HashSet::new();
        skills.retain(|s| seen.insert(normalize_name(&s.name)));
        skills.sort_by(|a, b| a.name.cmp(&b.name));
        Self {
            skills,
            roots: Vec::new(),
            nesting: Mutex::new(Nesting::default()),
        }
    }

    /// All skills, by name.
    pub fn iter(&self) -> impl Iterator<Item = &Skill> {
        self.skills.iter()
    }

    /// The skill called `name` (case-insensitive).
    pub fn get(&self, name: &str) -> Option<&Skill> {
        let key = normalize_name(name);
        self.skills.iter().find(|s| normalize_name(&s.name) == key)
    }

    /// The directories skills were read from (for tools that allow access to them).
    pub fn roots(&self) -> &[PathBuf] {
        &self.roots
    }

    /// Whether any skill may be loaded by the model (the `Skill` tool is offered only then).
    pub fn any_model_invocable(&self) -> bool {
        self.skills.iter().any(Skill::is_model_invocable)
    }

    /// The skill commands `initialize` lists after the built-ins: `skill:<name>` for every skill, then
    /// `flow:<name>` for every flow skill (reference `_build_slash_commands`).
    pub fn slash_commands(&self) -> Vec<SlashCommandInfo> {
        let info = |prefix: &str, skill: &Skill| SlashCommandInfo {
            name: format!("{prefix}{}", skill.name),
            description: skill.description.clone(),
            aliases: Vec::new(),
        };
        let skills = self.skills.iter().map(|s| info(SKILL_COMMAND_PREFIX, s));
        let flows = self
            .skills
            .iter()
            .filter(|s| s.flow().is_some())
            .map(|s| info(FLOW_COMMAND_PREFIX, s));
        skills.chain(flows).collect()
    }

    /// The skill a slash command name runs: `skill:<name>` (any skill) or `flow:<name>` (flow skills),
    /// matched exactly as the reference's command table does.
    pub fn command(&self, command: &str) -> Option<SkillCommand<'_>> {
        if let Some(name) = command.strip_prefix(SKILL_COMMAND_PREFIX) {
            return self.skills.iter().find(|s| s.name == name).map(SkillCommand::Run);
        }
        let name = command.strip_prefix(FLOW_COMMAND_PREFIX)?;
        let skill = self.skills.iter().find(|s| s.name == name)?;
        skill.flow().map(|flow| SkillCommand::Walk(skill, flow))
    }

    /// The `${KIMI_SKILLS}` text: skills grouped under `### Project`, `### User`, `### Extra` and
    /// `### Built-in`, each with its path and description; `No skills found.` when there are none.
    pub fn prompt_listing(&self) -> String {
        const HEADINGS: [(SkillScope, &str); 4] = [
            (SkillScope::Project, "Project"),
            (SkillScope::User, "User"),
            (SkillScope::Extra, "Extra"),
            (SkillScope::Builtin, "Built-in"),
        ];
        let sections: Vec<String> = HEADINGS
            .iter()
            .filter_map(|(scope, heading)| {
                let lines: Vec<String> = self
                    .skills
                    .iter()
                    .filter(|s| s.scope == *scope)
                    .map(|s| {
                        format!(
                            "- {}\n  - Path: {}\n  - Description: {}",
                            s.name,
                            s.skill_md_file.display(),
                            s.description
                        )
                    })
                    .collect();
                (!lines.is_empty()).then(|| format!("### {heading}\n{}", lines.join("\n")))
            })
            .collect();
        if sections.is_empty() {
            "No skills found.".to_owned()
        } else {
            sections.join("\n\n")
        }
    }

    /// Starts a new model turn: skills loaded by the model in earlier turns no longer count.
    pub fn begin_turn(&self) {
        lock(&self.nesting).begin_turn();
    }

    /// Starts a new step of the current turn.
    pub fn begin_step(&self) {
        lock(&self.nesting).begin_step();
    }

    /// Records that the model loads a skill in the current step; refused past [`MAX_SKILL_DEPTH`].
    pub fn enter(&self) -> Result<u32, TooDeep> {
        lock(&self.nesting).enter()
    }
}

/// What a skill slash command does.
#[derive(Debug, Clone, Copy)]
pub enum SkillCommand<'a> {
    /// `/skill:<name>`: one turn with the skill's text.
    Run(&'a Skill),
    /// `/flow:<name>`: walk the skill's flow.
    Walk(&'a Skill, &'a Flow),
}

/// The text a `/skill:<name> args` turn sends: the skill, then the user's request when there is one
/// (reference `_make_skill_runner`).
pub fn skill_prompt(skill_text: &str, args: &str) -> String {
    let args = args.trim();
    if args.is_empty() {
        skill_text.to_owned()
    } else {
        format!("{skill_text}\n\nUser request:\n{args}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn skill(name: &str, scope: SkillScope, kind: SkillKind) -> Skill {
        Skill {
            name: name.into(),
            description: format!("{name} does things"),
            kind,
            dir: PathBuf::from(format!("/s/{name}")),
            skill_md_file: PathBuf::from(format!("/s/{name}/SKILL.md")),
            scope,
            model_invocation_disabled: false,
            source: SkillSource::Bundled("text"),
        }
    }

    fn a_flow() -> SkillKind {
        SkillKind::Flow(Box::new(
            flow::mermaid::parse("A([BEGIN]) --> B[x]\nB --> C([END])").unwrap(),
        ))
    }

    #[test]
    fn the_prompt_listing_groups_by_scope() {
        let set = Skills::from_skills(vec![
            skill("zed", SkillScope::User, SkillKind::Standard),
            skill("beta", SkillScope::Builtin, SkillKind::Standard),
            skill("alpha", SkillScope::Project, SkillKind::Standard),
            skill("Alpha", SkillScope::User, SkillKind::Standard),
            skill("mid", SkillScope::User, SkillKind::Inline),
        ]);
        assert_eq!(
            set.prompt_listing(),
            "### Project\n- alpha\n  - Path: /s/alpha/SKILL.md\n  - Description: alpha does things\n\n\
             ### User\n- mid\n  - Path: /s/mid/SKILL.md\n  - Description: mid does things\n\
             - zed\n  - Path: /s/zed/SKILL.md\n  - Description: zed does things\n\n\
             ### Built-in\n- beta\n  - Path: /s/beta/SKILL.md\n  - Description: beta does things"
        );
        assert_eq!(Skills::default().prompt_listing(), "No skills found.");
        assert_eq!(set.get("ALPHA").unwrap().scope, SkillScope::Project);
    }

    #[test]
    fn slash_commands_list_skills_then_flows() {
        let set = Skills::from_skills(vec![
            skill("b-flow", SkillScope::Extra, a_flow()),
            skill("a", SkillScope::Extra, SkillKind::Standard),
        ]);
        let names: Vec<_> = set.slash_commands().into_iter().map(|c| c.name).collect();
        assert_eq!(names, ["skill:a", "skill:b-flow", "flow:b-flow"]);
        assert!(matches!(set.command("skill:b-flow"), Some(SkillCommand::Run(_))));
        assert!(matches!(set.command("flow:b-flow"), Some(SkillCommand::Walk(..))));
        assert!(set.command("flow:a").is_none());
        assert!(set.command("skill:A").is_none());
        assert!(set.command("skill:nope").is_none());
    }

    #[test]
    fn only_inline_skills_are_model_invocable() {
        let mut inline = skill("i", SkillScope::User, SkillKind::Inline);
        assert!(inline.is_model_invocable());
        inline.model_invocation_disabled = true;
        assert!(!inline.is_model_invocable());
        assert!(!skill("s", SkillScope::User, SkillKind::Standard).is_model_invocable());
        assert!(!skill("f", SkillScope::User, a_flow()).is_model_invocable());
    }

    #[test]
    fn the_skill_prompt_appends_the_request() {
        assert_eq!(skill_prompt("Do X.", "  "), "Do X.");
        assert_eq!(skill_prompt("Do X.", " on y \n"), "Do X.\n\nUser request:\non y");
    }
}
