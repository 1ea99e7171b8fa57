//! The system prompt: our own text, rendered with the reference's variables (`${KIMI_WORK_DIR}`, ...), so
//! agent files that supply their own prompt and arguments keep working.

use std::collections::BTreeMap;
use std::path::Path;

/// AGENTS.md text beyond this is cut (reference: 32 KiB).
const AGENTS_MD_LIMIT: usize = 32 * 1024;
/// Entries listed from the work dir.
const LS_LIMIT: usize = 100;

/// Replaces `${NAME}` with `vars[NAME]`; unknown names are left as they are.
pub fn render(template: &str, vars: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        match after.find('}') {
            Some(end) if vars.contains_key(&after[..end]) => {
                out.push_str(&vars[&after[..end]]);
                rest = &after[end + 1..];
            }
            _ => {
                out.push_str("${");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The built-in variables for `work_dir`; `skills` is the `${KIMI_SKILLS}` text
/// ([`crate::skills::Skills::prompt_listing`]).
pub fn builtin_vars(
    work_dir: &Path,
    additional_dirs: &[std::path::PathBuf],
    skills: &str,
) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    vars.insert("KIMI_NOW".into(), chrono::Local::now().to_rfc3339());
    vars.insert("KIMI_WORK_DIR".into(), work_dir.display().to_string());
    vars.insert("KIMI_WORK_DIR_LS".into(), list_dir(work_dir));
    vars.insert("KIMI_AGENTS_MD".into(), agents_md(work_dir));
    vars.insert("KIMI_SKILLS".into(), skills.to_owned());
    let extra = if additional_dirs.is_empty() {
        String::new()
    } else {
        let dirs: Vec<String> = additional_dirs
            .iter()
            .map(|d| format!("- {}", d.display()))
            .collect();
        format!("- Additional directories:\n{}", dirs.join("\n"))
    };
    vars.insert("KIMI_ADDITIONAL_DIRS_INFO".into(), extra);
    vars.insert("KIMI_OS".into(), std::env::consts::OS.into());
    vars.insert("KIMI_SHELL".into(), "bash".into());
    vars
}

fn list_dir(dir: &Path) -> String {
    try_list_dir(dir).unwrap_or_else(|_| "(unreadable)".into())
}

/// The sorted names in `dir` (directories with a trailing `/`), at most [`LS_LIMIT`] of them.
pub(crate) fn try_list_dir(dir: &Path) -> std::io::Result<String> {
    let entries = std::fs::read_dir(dir)?;
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                format!("{name}/")
            } else {
                name
            }
        })
        .collect();
    names.sort();
    let more = names.len().saturating_sub(LS_LIMIT);
    names.truncate(LS_LIMIT);
    if more > 0 {
        names.push(format!("... and {more} more"));
    }
    Ok(if names.is_empty() {
        "(empty)".into()
    } else {
        names.join("\n")
    })
}

/// AGENTS.md files from the work dir up to the repository root (the nearest directory holding
/// `.git`), outermost first; outside a repository, the work dir's alone. Directories above the project
/// (a shared `/tmp`, someone else's home) are not the project's to instruct the model (reference
/// `load_agents_md`).
pub fn agents_md(work_dir: &Path) -> String {
    let root = crate::skills::discover::project_root(work_dir);
    let mut found: Vec<String> = work_dir
        .ancestors()
        .take_while(|dir| dir.starts_with(&root))
        .filter_map(|dir| std::fs::read_to_string(dir.join("AGENTS.md")).ok())
        .collect();
    found.reverse();
    let mut text = found.join("\n\n");
    if text.len() > AGENTS_MD_LIMIT {
        let mut cut = AGENTS_MD_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        text.truncate(cut);
    }
    if text.is_empty() {
        "No AGENTS.md was found.".into()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agents_md_is_read_up_to_the_repository_root_only() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join(".git")).unwrap();
        std::fs::create_dir_all(repo.join("sub")).unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "planted above").unwrap();
        std::fs::write(repo.join("AGENTS.md"), "repo").unwrap();
        std::fs::write(repo.join("sub/AGENTS.md"), "sub").unwrap();
        assert_eq!(agents_md(&repo.join("sub")), "repo\n\nsub");
        let loose = dir.path().join("loose");
        std::fs::create_dir_all(&loose).unwrap();
        assert_eq!(agents_md(&loose), "No AGENTS.md was found.");
        std::fs::write(loose.join("AGENTS.md"), "here").unwrap();
        assert_eq!(agents_md(&loose), "here");
    }

    #[test]
    fn renders_known_variables_and_keeps_unknown_ones() {
        let vars = BTreeMap::from([("A".to_string(), "1".to_string())]);
        assert_eq!(render("x ${A} ${B} $A ${", &vars), "x 1 ${B} $A ${");
    }
}
