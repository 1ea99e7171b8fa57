//! Where skills come from and how a directory of them is read (reference `skill/__init__.py`).
//!
//! Roots, highest priority first (the first skill of a name wins):
//! - `--skills-dir` directories (scope `extra`) when any are given; otherwise the project's
//!   (`.kimi/skills`, `.claude/skills`, `.codex/skills`, then `.agents/skills`, from the project root:
//!   the nearest `.git` ancestor of the work dir) and the user's (`~/.kimi/skills`, `~/.claude/skills`,
//!   `~/.codex/skills`, then `~/.config/agents/skills` or `~/.agents/skills`). Of the brand directories
//!   all existing ones count when `merge_all_available_skills` is on, else the first;
//! - `extra_skill_dirs` from the config (scope `extra`, always);
//! - `<share>/plugins` (scope `extra`);
//! - the bundled skills (scope `builtin`).
//!
//! A root holds `<name>/SKILL.md` directories and flat `<name>.md` files; a directory beats a flat file
//! of the same name. Files that cannot be read or parsed are logged and skipped.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::parse::{Location, parse_skill};
use super::{Skill, SkillScope, SkillSource, normalize_name};

/// What discovery needs to know about the session.
#[derive(Debug, Clone, Default)]
pub struct DiscoveryOptions {
    /// The session's work dir.
    pub work_dir: PathBuf,
    /// The user's home (`~`), if known.
    pub home: Option<PathBuf>,
    /// The share dir (for `plugins/`).
    pub share_dir: PathBuf,
    /// `--skills-dir` values; when not empty they replace the project and user roots.
    pub skills_dirs: Vec<PathBuf>,
    /// Config `merge_all_available_skills`.
    pub merge_brands: bool,
    /// Config `extra_skill_dirs`.
    pub extra_skill_dirs: Vec<String>,
}

/// A directory of skills and the scope its skills get.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedRoot {
    /// The directory (canonical).
    pub path: PathBuf,
    /// Scope stamped on its skills.
    pub scope: SkillScope,
}

const BRAND_DIRS: [&str; 3] = [".kimi", ".claude", ".codex"];

/// The roots to scan, highest priority first, each directory once (bundled skills not included).
pub fn resolve_roots(options: &DiscoveryOptions) -> Vec<ScopedRoot> {
    let mut roots = Vec::new();
    let mut seen = HashSet::new();
    let mut push = |path: &Path, scope| {
        let canonical = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if seen.insert(canonical.clone()) {
            roots.push(ScopedRoot {
                path: canonical,
                scope,
            });
        }
    };
    let project_root = project_root(&options.work_dir);
    if options.skills_dirs.is_empty() {
        let project_brands = BRAND_DIRS.map(|b| project_root.join(b).join("skills"));
        let project_generic = [project_root.join(".agents/skills")];
        for dir in pick(&project_brands, &project_generic, options.merge_brands) {
            push(&dir, SkillScope::Project);
        }
        if let Some(home) = &options.home {
            let user_brands = BRAND_DIRS.map(|b| home.join(b).join("skills"));
            let user_generic = [home.join(".config/agents/skills"), home.join(".agents/skills")];
            for dir in pick(&user_brands, &user_generic, options.merge_brands) {
                push(&dir, SkillScope::User);
            }
        }
    } else {
        for dir in &options.skills_dirs {
            push(dir, SkillScope::Extra);
        }
    }
    for raw in &options.extra_skill_dirs {
        if let Some(dir) = resolve_extra_dir(raw, &project_root, options.home.as_deref())
            && dir.is_dir()
        {
            push(&dir, SkillScope::Extra);
        }
    }
    let plugins = options.share_dir.join("plugins");
    if plugins.is_dir() {
        push(&plugins, SkillScope::Extra);
    }
    roots
}

/// The existing brand directories (all, or the first) followed by the first existing generic one.
fn pick(brands: &[PathBuf], generic: &[PathBuf], merge_brands: bool) -> Vec<PathBuf> {
    let mut existing_brands = brands.iter().filter(|d| d.is_dir());
    let mut dirs: Vec<PathBuf> = if merge_brands {
        existing_brands.cloned().collect()
    } else {
        existing_brands.next().cloned().into_iter().collect()
    };
    dirs.extend(generic.iter().find(|d| d.is_dir()).cloned());
    dirs
}

/// The nearest ancestor of `work_dir` (itself included) holding `.git`, else `work_dir`.
pub fn project_root(work_dir: &Path) -> PathBuf {
    work_dir
        .ancestors()
        .find(|dir| dir.join(".git").exists())
        .unwrap_or(work_dir)
        .to_path_buf()
}

/// An `extra_skill_dirs` entry: absolute, `~/...`, or relative to the project root.
fn resolve_extra_dir(raw: &str, project_root: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if raw.is_empty() {
        return None;
    }
    let expanded = match (raw, home) {
        ("~", Some(home)) => home.to_path_buf(),
        (r, Some(home)) if r.starts_with("~/") => home.join(&r[2..]),
        _ => PathBuf::from(raw),
    };
    Some(if expanded.is_absolute() {
        expanded
    } else {
        project_root.join(expanded)
    })
}

/// Every skill in `root`, sorted by name; later entries of the same name (in file name order) replace
/// earlier ones, and a `<name>/SKILL.md` beats a flat `<name>.md`.
pub fn scan_root(root: &ScopedRoot) -> Vec<Skill> {
    let mut entries: Vec<PathBuf> = match std::fs::read_dir(&root.path) {
        Ok(entries) => entries.filter_map(Result::ok).map(|e| e.path()).collect(),
        Err(e) => {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %root.path.display(), error = %e, "cannot read skills directory; skipped");
            }
            return Vec::new();
        }
    };
    entries.sort();
    let mut skills: Vec<Skill> = Vec::new();
    let upsert = |skills: &mut Vec<Skill>, skill: Skill| {
        let key = normalize_name(&skill.name);
        match skills.iter_mut().find(|s| normalize_name(&s.name) == key) {
            Some(slot) => *slot = skill,
            None => skills.push(skill),
        }
    };
    for entry in entries.iter().filter(|e| e.is_dir()) {
        let skill_md = entry.join("SKILL.md");
        if !skill_md.is_file() {
            continue;
        }
        let at = Location {
            dir: entry,
            skill_md_file: &skill_md,
            scope: root.scope,
            flat: false,
        };
        if let Some(skill) = read_skill(at) {
            upsert(&mut skills, skill);
        }
    }
    let from_dirs: HashSet<String> = skills.iter().map(|s| normalize_name(&s.name)).collect();
    for entry in entries.iter().filter(|e| !e.is_dir()) {
        let name = entry
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let lower = name.to_lowercase();
        // A bare SKILL.md at the top of a root is a stray marker, not a skill.
        if !lower.ends_with(".md") || lower == "skill.md" {
            continue;
        }
        let at = Location {
            dir: &root.path,
            skill_md_file: entry,
            scope: root.scope,
            flat: true,
        };
        let Some(skill) = read_skill(at) else { continue };
        if from_dirs.contains(&normalize_name(&skill.name)) {
            tracing::warn!(file = %entry.display(), skill = %skill.name, "flat skill shadowed by a skill directory of the same name; the directory is used");
            continue;
        }
        upsert(&mut skills, skill);
    }
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    skills
}

/// Reads and parses one skill file; failures are logged and give `None`.
fn read_skill(at: Location<'_>) -> Option<Skill> {
    let content = match std::fs::read(at.skill_md_file) {
        Ok(bytes) => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => {
                tracing::info!(file = %at.skill_md_file.display(), "skipping skill that is not UTF-8");
                return None;
            }
        },
        Err(e) => {
            tracing::info!(file = %at.skill_md_file.display(), error = %e, "skipping unreadable skill");
            return None;
        }
    };
    match parse_skill(&content, at, SkillSource::File) {
        Ok(skill) => Some(skill),
        Err(e) => {
            tracing::info!(file = %at.skill_md_file.display(), error = %e, "skipping invalid skill");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn names(skills: &[Skill]) -> Vec<String> {
        skills.iter().map(|s| s.name.clone()).collect()
    }

    #[test]
    fn a_root_reads_directories_and_flat_files() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        write(&root.join("zeta/SKILL.md"), "---\nname: zeta\n---\nZ");
        write(&root.join("alpha/SKILL.md"), "A skill without front matter");
        write(&root.join("flat.md"), "---\ndescription: flat one\n---\n");
        write(&root.join("Zeta.md"), "shadowed by the zeta directory");
        write(&root.join("SKILL.md"), "stray marker");
        write(&root.join("notes.txt"), "not markdown");
        write(&root.join("empty-dir/README.md"), "no SKILL.md");
        write(&root.join("broken/SKILL.md"), "---\ntype: nonsense\n---\n");
        write(&root.join("bad-yaml.md"), "---\nname: [\n---\n");
        let skills = scan_root(&ScopedRoot {
            path: root.to_path_buf(),
            scope: SkillScope::User,
        });
        assert_eq!(names(&skills), ["alpha", "flat", "zeta"]);
        assert_eq!(skills[0].description, "A skill without front matter");
        assert_eq!(skills[1].skill_md_file, root.join("flat.md"));
        assert_eq!(skills[1].dir, root);
        assert!(skills.iter().all(|s| s.scope == SkillScope::User));
    }

    #[test]
    fn a_missing_root_is_empty() {
        let root = ScopedRoot {
            path: PathBuf::from("/nonexistent/skills"),
            scope: SkillScope::Extra,
        };
        assert!(scan_root(&root).is_empty());
    }

    fn options(tmp: &Path) -> DiscoveryOptions {
        DiscoveryOptions {
            work_dir: tmp.join("repo/sub"),
            home: Some(tmp.join("home")),
            share_dir: tmp.join("home/.kimi"),
            skills_dirs: Vec::new(),
            merge_brands: true,
            extra_skill_dirs: Vec::new(),
        }
    }

    fn scopes(roots: &[ScopedRoot], base: &Path) -> Vec<(String, SkillScope)> {
        let raw = base;
        let base = std::fs::canonicalize(base).unwrap();
        roots
            .iter()
            .map(|r| {
                let rel = r
                    .path
                    .strip_prefix(&base)
                    .or_else(|_| r.path.strip_prefix(raw))
                    .unwrap_or(&r.path);
                (rel.display().to_string(), r.scope)
            })
            .collect()
    }

    #[test]
    fn roots_follow_the_reference_order() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        for dir in [
            "repo/.git",
            "repo/sub",
            "repo/.claude/skills",
            "repo/.kimi/skills",
            "repo/.agents/skills",
            "home/.codex/skills",
            "home/.agents/skills",
            "home/.config/agents/skills",
            "home/.kimi/plugins",
            "repo/extra",
        ] {
            std::fs::create_dir_all(t.join(dir)).unwrap();
        }
        let mut opts = options(t);
        opts.extra_skill_dirs = vec!["extra".into(), "missing".into(), "~/.agents/skills".into()];
        let roots = resolve_roots(&opts);
        use SkillScope::*;
        assert_eq!(
            scopes(&roots, t),
            [
                ("repo/.kimi/skills".to_owned(), Project),
                ("repo/.claude/skills".to_owned(), Project),
                ("repo/.agents/skills".to_owned(), Project),
                ("home/.codex/skills".to_owned(), User),
                ("home/.config/agents/skills".to_owned(), User),
                ("repo/extra".to_owned(), Extra),
                ("home/.agents/skills".to_owned(), Extra),
                ("home/.kimi/plugins".to_owned(), Extra),
            ]
        );
        opts.merge_brands = false;
        let first_only = resolve_roots(&opts);
        assert_eq!(
            scopes(&first_only, t)[..2],
            [
                ("repo/.kimi/skills".to_owned(), Project),
                ("repo/.agents/skills".to_owned(), Project),
            ]
        );
    }

    #[test]
    fn skills_dirs_replace_project_and_user_discovery() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tmp.path();
        std::fs::create_dir_all(t.join("repo/.kimi/skills")).unwrap();
        std::fs::create_dir_all(t.join("mine")).unwrap();
        let mut opts = options(t);
        opts.work_dir = t.join("repo");
        opts.skills_dirs = vec![t.join("mine"), t.join("mine/../mine"), t.join("absent")];
        let roots = resolve_roots(&opts);
        assert_eq!(
            scopes(&roots, t),
            [
                ("mine".to_owned(), SkillScope::Extra),
                ("absent".to_owned(), SkillScope::Extra)
            ]
        );
    }
}
