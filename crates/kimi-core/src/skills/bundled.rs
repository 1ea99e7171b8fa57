//! The skills built into the binary (our own texts under `bundled/`, with the reference's names).
//!
//! They are parsed from the embedded text and also written to `<share>/builtin-skills/<name>/SKILL.md`
//! (only when missing or different), so the model can read them by the path the system prompt gives,
//! as it reads any other skill. Running one never depends on that copy.

use std::path::Path;

use super::parse::{Location, parse_skill};
use super::{Skill, SkillScope, SkillSource};

/// Name and SKILL.md text of each bundled skill.
const BUNDLED: &[(&str, &str)] = &[
    ("kimi-cli-help", include_str!("bundled/kimi-cli-help/SKILL.md")),
    ("skill-creator", include_str!("bundled/skill-creator/SKILL.md")),
];

/// Where the bundled skills are written under the share dir.
pub const BUNDLED_DIR: &str = "builtin-skills";

/// The bundled skills, placed under `<share>/builtin-skills`.
pub fn bundled_skills(share_dir: &Path) -> Vec<Skill> {
    let root = share_dir.join(BUNDLED_DIR);
    BUNDLED
        .iter()
        .filter_map(|(name, text)| {
            let dir = root.join(name);
            let file = dir.join("SKILL.md");
            let at = Location {
                dir: &dir,
                skill_md_file: &file,
                scope: SkillScope::Builtin,
                flat: false,
            };
            match parse_skill(text, at, SkillSource::Bundled(text)) {
                Ok(skill) => Some(skill),
                Err(e) => {
                    tracing::error!(skill = name, error = %e, "bundled skill does not parse");
                    None
                }
            }
        })
        .collect()
}

/// Writes the bundled SKILL.md files where [`bundled_skills`] says they are; failures are logged.
pub fn materialize(share_dir: &Path) {
    for (name, text) in BUNDLED {
        let file = share_dir.join(BUNDLED_DIR).join(name).join("SKILL.md");
        if std::fs::read(&file).is_ok_and(|current| current == text.as_bytes()) {
            continue;
        }
        let written = crate::private_files::write_atomic(&file, text.as_bytes());
        if let Err(e) = written {
            tracing::warn!(file = %file.display(), error = %e, "bundled skill not written; the model cannot read it by path");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::skills::SkillKind;

    #[test]
    fn every_bundled_skill_parses_with_its_name() {
        let share = Path::new("/share");
        let skills = bundled_skills(share);
        let names: Vec<_> = skills.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["kimi-cli-help", "skill-creator"]);
        for skill in &skills {
            assert_eq!(skill.kind, SkillKind::Standard);
            assert_eq!(skill.scope, SkillScope::Builtin);
            assert!(
                skill.description.len() > 40,
                "{} needs a real description",
                skill.name
            );
            assert_eq!(
                skill.skill_md_file,
                share.join(BUNDLED_DIR).join(&skill.name).join("SKILL.md")
            );
        }
    }

    #[test]
    fn materialize_writes_once_and_repairs_changes() {
        let tmp = tempfile::tempdir().unwrap();
        materialize(tmp.path());
        let file = tmp.path().join(BUNDLED_DIR).join("skill-creator/SKILL.md");
        let original = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, "edited").unwrap();
        materialize(tmp.path());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), original);
    }
}
