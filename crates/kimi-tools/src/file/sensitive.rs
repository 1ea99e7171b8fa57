//! Files that probably hold secrets, which ReadFile refuses and Grep leaves out of its results.
//!
//! The list is the reference's (`kimi_cli/utils/sensitive.py`): only names with almost no false
//! positives. A name pattern is matched against the last path component (shell-style, case
//! sensitive); a pattern with a slash is matched against the end of the path or any place in it
//! after a slash. `.env` templates are exempt.

use std::path::Path;

/// File names that hold secrets (matched against the last component).
const SECRET_NAMES: [&str; 5] = [".env", "id_rsa", "id_ed25519", "id_ecdsa", "credentials"];

/// `.env.*` (shell-style, so any name starting with `.env.`) also holds secrets.
const ENV_PREFIX: &str = ".env.";

/// Path tails that hold secrets, each with and without a leading slash (the reference checks whether
/// the path ends with the pattern or contains it after a slash).
const SECRET_PATHS: [(&str, &str); 2] = [
    (".aws/credentials", "/.aws/credentials"),
    (".gcp/credentials", "/.gcp/credentials"),
];

/// `.env.*` files that are templates rather than secrets.
const EXEMPT_NAMES: [&str; 3] = [".env.example", ".env.sample", ".env.template"];

/// Whether `path` looks like a file holding credentials. Cheap enough to call on every file of a
/// large search: no allocation for ordinary paths.
pub fn is_sensitive_file(path: &Path) -> bool {
    let name = path.file_name().map(|n| n.to_string_lossy()).unwrap_or_default();
    let name = name.as_ref();
    if EXEMPT_NAMES.contains(&name) {
        return false;
    }
    if SECRET_NAMES.contains(&name) || name.starts_with(ENV_PREFIX) {
        return true;
    }
    let text = path.to_string_lossy();
    SECRET_PATHS
        .iter()
        .any(|(tail, inner)| text.ends_with(tail) || text.contains(inner))
}

/// The note added to a result when sensitive files were left out: how many, and up to five of their
/// names (sorted, without duplicates).
pub fn sensitive_file_warning<S: AsRef<str>>(paths: &[S]) -> String {
    let mut names: Vec<String> = paths
        .iter()
        .map(|p| {
            let p = Path::new(p.as_ref());
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    names.sort();
    names.dedup();
    let mut list = names.iter().take(5).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 5 {
        list.push_str(&format!(", ... ({} files total)", names.len()));
    }
    format!(
        "Skipped {} sensitive file(s) ({list}) to protect secrets. These files may contain credentials or private keys.",
        paths.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn recognises_the_reference_patterns() {
        for path in [
            "/w/.env",
            ".env.local",
            "/w/.env.",
            "/home/u/.ssh/id_rsa",
            "id_ed25519",
            "/k/id_ecdsa",
            "/home/u/.aws/credentials",
            ".gcp/credentials",
            "/x/credentials",
            "/x/.aws/credentials/backup",
        ] {
            assert!(is_sensitive_file(Path::new(path)), "{path}");
        }
        for path in [
            "/w/.env.example",
            ".env.sample",
            "/w/.env.template",
            "/w/id_rsa.pub",
            "/w/.envrc",
            "/w/credentials.json",
            "/w/ENV",
            "/w/server.key",
            "/w/src/main.rs",
        ] {
            assert!(!is_sensitive_file(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn warning_lists_at_most_five_sorted_names() {
        assert_eq!(
            sensitive_file_warning(&["a/.env", "b/.env", "id_rsa"]),
            "Skipped 3 sensitive file(s) (.env, id_rsa) to protect secrets. These files may contain credentials or private keys."
        );
        let many = [".env", ".env.a", ".env.b", ".env.c", ".env.d", ".env.e"];
        assert_eq!(
            sensitive_file_warning(&many),
            "Skipped 6 sensitive file(s) (.env, .env.a, .env.b, .env.c, .env.d, ... (6 files total)) to protect secrets. These files may contain credentials or private keys."
        );
    }
}
