//! One SKILL.md (or flat `<name>.md`) into a [`Skill`] (reference `parse_skill_text`).

use std::path::Path;

use serde_yaml_ng::{Mapping, Value};

use super::flow::{self, Flow, FlowError};
use super::frontmatter::{self, FrontmatterError};
use super::{Skill, SkillKind, SkillScope, SkillSource};

/// Longest description taken from the body when the front matter has none (reference: 240).
const DESCRIPTION_FALLBACK_MAX_CHARS: usize = 240;

/// Why a skill file was skipped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// The front matter is not a YAML mapping.
    #[error(transparent)]
    Frontmatter(#[from] FrontmatterError),
    /// `type:` names a kind we do not know (reference message).
    #[error("Invalid skill type \"{0}\"")]
    InvalidType(String),
    /// A field that must be text is something else.
    #[error("front matter field `{0}` must be a string")]
    NotAString(&'static str),
}

/// Where a parsed file sits: its resource directory, the Markdown file, the scope of its root, and for
/// a flat skill the file whose stem names it.
#[derive(Debug, Clone, Copy)]
pub struct Location<'a> {
    /// The skill's resource directory.
    pub dir: &'a Path,
    /// The Markdown file with the body.
    pub skill_md_file: &'a Path,
    /// Scope of the root it was found in.
    pub scope: SkillScope,
    /// Set for flat `<name>.md` skills: the default name is the file stem, not the directory name.
    pub flat: bool,
}

/// Parses `content`; the name defaults to the directory (or flat file stem), the description to the
/// first line of the body. A flow skill whose diagram is broken is kept as a standard skill (logged),
/// as the reference does.
pub fn parse_skill(content: &str, at: Location<'_>, source: SkillSource) -> Result<Skill, SkillError> {
    let front = frontmatter::parse(content)?.unwrap_or_default();
    let default_name = if at.flat {
        strip_md_suffix(&file_name(at.skill_md_file))
    } else {
        file_name(at.dir)
    };
    let name = text_field(&front, "name")?.unwrap_or(default_name);
    let description = match text_field(&front, "description")? {
        Some(description) => description,
        None => first_meaningful_line(content)
            .map(truncate)
            .unwrap_or_else(|| "No description provided.".to_owned()),
    };
    let kind = match text_field(&front, "type")?.as_deref() {
        None | Some("standard") => SkillKind::Standard,
        Some("inline") => SkillKind::Inline,
        Some("flow") => match flow_from_skill(content) {
            Ok(flow) => SkillKind::Flow(Box::new(flow)),
            Err(e) => {
                tracing::error!(skill = %name, error = %e, "Failed to parse flow skill; using it as a standard skill");
                SkillKind::Standard
            }
        },
        Some(other) => return Err(SkillError::InvalidType(other.to_owned())),
    };
    let model_invocation_disabled = ["disableModelInvocation", "disable-model-invocation"]
        .iter()
        .any(|key| front.get(*key).and_then(Value::as_bool) == Some(true));
    Ok(Skill {
        name,
        description,
        kind,
        dir: at.dir.to_path_buf(),
        skill_md_file: at.skill_md_file.to_path_buf(),
        scope: at.scope,
        model_invocation_disabled,
        source,
    })
}

/// A text field; `None` when absent, null or empty (the reference's `or` fallback), an error for
/// numbers, lists and the like (pydantic refuses them).
fn text_field(front: &Mapping, key: &'static str) -> Result<Option<String>, SkillError> {
    match front.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Bool(false)) => Ok(None),
        Some(_) => Err(SkillError::NotAString(key)),
    }
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn strip_md_suffix(name: &str) -> String {
    let cut = name.len().saturating_sub(3);
    match name.get(cut..) {
        Some(suffix) if suffix.eq_ignore_ascii_case(".md") => name[..cut].to_owned(),
        _ => name.to_owned(),
    }
}

/// The first non-blank body line that is not a stray `---`.
fn first_meaningful_line(content: &str) -> Option<&str> {
    frontmatter::strip(content)
        .lines()
        .map(str::trim)
        .find(|line| !line.is_empty() && *line != "---")
}

/// Clips to the fallback length with an ellipsis.
fn truncate(text: &str) -> String {
    let text = text.trim();
    if text.chars().count() <= DESCRIPTION_FALLBACK_MAX_CHARS {
        return text.to_owned();
    }
    let clipped: String = text.chars().take(DESCRIPTION_FALLBACK_MAX_CHARS - 1).collect();
    format!("{}\u{2026}", clipped.trim_end())
}

/// The flow of the first `mermaid` or `d2` fenced block.
fn flow_from_skill(content: &str) -> Result<Flow, FlowError> {
    for (lang, code) in fenced_blocks(content) {
        let parsed = match lang.as_str() {
            "mermaid" => flow::mermaid::parse(&code),
            "d2" => flow::d2::parse(&code),
            _ => continue,
        };
        return parsed.map_err(|e| FlowError(format!("Invalid flow diagram: {e}")));
    }
    Err(FlowError(
        "Flow skills require a mermaid or d2 code block in SKILL.md.".into(),
    ))
}

/// Fenced code blocks (backticks or tildes, three or more) with their language, lower-cased.
fn fenced_blocks(content: &str) -> Vec<(String, String)> {
    let mut blocks = Vec::new();
    let mut open: Option<(char, usize, String, Vec<&str>)> = None;
    for line in content.lines() {
        let stripped = line.trim_start();
        match &mut open {
            None => {
                if let Some((fence_char, len, info)) = fence_run(stripped) {
                    open = Some((fence_char, len, language(info), Vec::new()));
                }
            }
            Some((fence_char, len, _, body)) => {
                let closes = fence_run(stripped)
                    .is_some_and(|(c, n, rest)| c == *fence_char && n >= *len && rest.is_empty());
                if closes {
                    if let Some((_, _, lang, body)) = open.take() {
                        blocks.push((lang, body.join("\n").trim_matches('\n').to_owned()));
                    }
                } else {
                    body.push(line);
                }
            }
        }
    }
    blocks
}

/// A run of at least three backticks or tildes at the start of `line`, and what follows it (trimmed).
fn fence_run(line: &str) -> Option<(char, usize, &str)> {
    let first = line.chars().next().filter(|c| *c == '`' || *c == '~')?;
    let len = line.len() - line.trim_start_matches(first).len();
    (len >= 3).then(|| (first, len, line[len..].trim()))
}

/// `mermaid`, `{d2}` → `d2`; the first word of the info string, lower-cased.
fn language(info: &str) -> String {
    let word = info.split_whitespace().next().unwrap_or("").to_lowercase();
    match word.strip_prefix('{').and_then(|w| w.strip_suffix('}')) {
        Some(inner) => inner.trim().to_owned(),
        None => word,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::path::PathBuf;

    fn parse_at(content: &str, dir: &str, flat: Option<&str>) -> Result<Skill, SkillError> {
        let dir = PathBuf::from(dir);
        let file = flat.map_or_else(|| dir.join("SKILL.md"), |f| dir.join(f));
        parse_skill(
            content,
            Location {
                dir: &dir,
                skill_md_file: &file,
                scope: SkillScope::Project,
                flat: flat.is_some(),
            },
            SkillSource::File,
        )
    }

    #[test]
    fn front_matter_fields() {
        let skill = parse_at(
            "---\nname: test\ndescription: Test skill\n---\n\nBody.\n",
            "/s/test-skill",
            None,
        )
        .unwrap();
        assert_eq!(skill.name, "test");
        assert_eq!(skill.description, "Test skill");
        assert_eq!(skill.kind, SkillKind::Standard);
        assert_eq!(skill.skill_md_file, PathBuf::from("/s/test-skill/SKILL.md"));
        assert!(!skill.model_invocation_disabled);
    }

    #[test]
    fn defaults_come_from_the_path_and_the_body() {
        let skill = parse_at("\n# Title line\nmore\n", "/s/from-dir", None).unwrap();
        assert_eq!(
            (skill.name.as_str(), skill.description.as_str()),
            ("from-dir", "# Title line")
        );
        let flat = parse_at("---\ndescription: d\n---\n", "/s", Some("notes.MD")).unwrap();
        assert_eq!(flat.name, "notes");
        let empty = parse_at("---\nname: e\n---\n---\n", "/s/e", None).unwrap();
        assert_eq!(empty.description, "No description provided.");
        let long = format!("{}  tail", "x".repeat(300));
        let clipped = parse_at(&long, "/s/long", None).unwrap().description;
        assert_eq!(clipped.chars().count(), 240);
        assert!(clipped.ends_with('\u{2026}'));
    }

    #[test]
    fn types_and_model_invocation() {
        let inline = parse_at(
            "---\ntype: inline\ndisableModelInvocation: true\n---\nx",
            "/s/i",
            None,
        )
        .unwrap();
        assert_eq!(inline.kind, SkillKind::Inline);
        assert!(inline.model_invocation_disabled);
        let dashed = parse_at("---\ndisable-model-invocation: true\n---\nx", "/s/i", None).unwrap();
        assert!(dashed.model_invocation_disabled);
        assert_eq!(
            parse_at("---\ntype: prompt\n---\n", "/s/p", None).unwrap_err(),
            SkillError::InvalidType("prompt".into())
        );
        assert_eq!(
            parse_at("---\nname: [a]\n---\n", "/s/p", None).unwrap_err(),
            SkillError::NotAString("name")
        );
        assert_eq!(
            parse_at("---\nname: [a\n---\n", "/s/p", None).unwrap_err(),
            SkillError::Frontmatter(FrontmatterError::InvalidYaml)
        );
    }

    #[test]
    fn flow_skills_read_their_first_diagram() {
        let text = "---\nname: f\ntype: flow\n---\n```python\nprint()\n```\n~~~~ Mermaid extra\nflowchart TD\nA([BEGIN]) --> B[Say hello]\nB --> C([END])\n~~~~\n";
        let SkillKind::Flow(flow) = parse_at(text, "/s/f", None).unwrap().kind else {
            panic!("not a flow");
        };
        assert_eq!(flow.outgoing("A")[0].dst, "B");
        let d2 = "---\ntype: flow\n---\n```{d2}\nb: BEGIN\ne: END\nb -> e\n```\n";
        assert!(matches!(
            parse_at(d2, "/s/d", None).unwrap().kind,
            SkillKind::Flow(_)
        ));
        // A broken or missing diagram keeps the skill, as a standard one.
        let broken = "---\ntype: flow\n---\n```mermaid\nA[x] --> B[y]\n```\n";
        assert_eq!(parse_at(broken, "/s/b", None).unwrap().kind, SkillKind::Standard);
        assert_eq!(
            parse_at("---\ntype: flow\n---\nno diagram", "/s/n", None)
                .unwrap()
                .kind,
            SkillKind::Standard
        );
    }

    #[test]
    fn fences_close_only_on_a_long_enough_bare_run() {
        let blocks = fenced_blocks("````d2\na\n```\nb\n````  \n```\nc\n");
        assert_eq!(blocks, [("d2".to_owned(), "a\n```\nb".to_owned())]);
    }
}
