//! Files that probably hold secrets, which ReadFile and ReadMediaFile refuse and Grep leaves out of
//! its results.
//!
//! Two lists. [`is_sensitive_file`] matches names and path tails, for any file anywhere: the
//! reference's list (`kimi_cli/utils/sensitive.py`: `.env`, SSH private keys, cloud credentials) widened
//! with the other places keys and tokens usually sit (`.netrc`, `.git-credentials`, `*.pem`, the `gh`,
//! Docker and Kubernetes credentials, `~/.ssh` and `~/.gnupg`). [`SecretFiles`] holds the agent's own
//! secrets by path: its configuration (API keys), MCP configuration and tokens, and login credentials.
//! The tools test both the path the model named and the real path it leads to, so a `notes.txt` that
//! links to a key is a key. Names are case sensitive, as in the reference; `.env` templates are exempt.

use std::path::{Path, PathBuf};

/// File names that hold secrets (matched against the last component).
const SECRET_NAMES: [&str; 15] = [
    ".env",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "id_ecdsa_sk",
    "id_ed25519_sk",
    "credentials",
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".pypirc",
    ".htpasswd",
    "application_default_credentials.json",
];

/// `.env.*` (shell-style, so any name starting with `.env.`) also holds secrets.
const ENV_PREFIX: &str = ".env.";

/// Extensions of key and certificate-store files (private keys are usually PEM).
const SECRET_EXTENSIONS: [&str; 6] = ["pem", "key", "p12", "pfx", "jks", "keystore"];

/// Path tails that hold secrets, each with and without a leading slash (the reference checks whether
/// the path ends with the pattern or contains it after a slash).
const SECRET_PATHS: [(&str, &str); 5] = [
    (".aws/credentials", "/.aws/credentials"),
    (".gcp/credentials", "/.gcp/credentials"),
    (".config/gh/hosts.yml", "/.config/gh/hosts.yml"),
    (".docker/config.json", "/.docker/config.json"),
    (".kube/config", "/.kube/config"),
];

/// Directories whose files are all secret (public keys aside).
const SECRET_DIRS: [&str; 2] = ["/.ssh/", "/.gnupg/"];

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
    if path
        .extension()
        .is_some_and(|ext| SECRET_EXTENSIONS.iter().any(|secret| ext == *secret))
    {
        return true;
    }
    let text = path.to_string_lossy();
    if SECRET_PATHS
        .iter()
        .any(|(tail, inner)| text.ends_with(tail) || text.contains(inner))
    {
        return true;
    }
    !name.ends_with(".pub") && SECRET_DIRS.iter().any(|dir| text.contains(dir))
}

/// The agent's own secrets: files and directories under the share directory (and the configuration
/// file in use, wherever it is), each kept as named and as it really is.
#[derive(Debug, Clone, Default)]
pub struct SecretFiles {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl SecretFiles {
    /// The secrets of an agent whose share directory is `share_dir` and whose configuration came from
    /// `config_file` (when it came from a file): `config.toml`, `config.json`, `mcp.json`, the
    /// `credentials/` and `mcp-oauth/` directories, and the configuration file itself.
    pub fn new(share_dir: &Path, config_file: Option<&Path>) -> Self {
        let mut secrets = Self::default();
        let files = ["config.toml", "config.json", "mcp.json"].map(|name| share_dir.join(name));
        for file in files.iter().map(PathBuf::as_path).chain(config_file) {
            secrets.files.extend(both_forms(file));
        }
        for dir in ["credentials", "mcp-oauth"] {
            secrets.dirs.extend(both_forms(&share_dir.join(dir)));
        }
        secrets
    }

    /// Whether `path` is one of the agent's secrets or looks like any secret ([`is_sensitive_file`]).
    pub fn is_secret(&self, path: &Path) -> bool {
        is_sensitive_file(path)
            || self.files.iter().any(|file| path == file)
            || self.dirs.iter().any(|dir| path.starts_with(dir))
    }
}

/// `path`, and its real path when that differs.
fn both_forms(path: &Path) -> Vec<PathBuf> {
    let mut forms = vec![path.to_path_buf()];
    if let Ok(real) = std::fs::canonicalize(path)
        && real != path
    {
        forms.push(real);
    }
    forms
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
            "/home/u/.netrc",
            "/home/u/.git-credentials",
            "/home/u/.config/gh/hosts.yml",
            "/w/server.pem",
            "/w/tls/server.key",
            "/home/u/.ssh/work_key",
            "/home/u/.gnupg/private-keys-v1.d/abc",
            "/home/u/.docker/config.json",
            "/home/u/.kube/config",
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
            "/w/src/main.rs",
            "/home/u/.ssh/id_rsa.pub",
            "/w/keys.txt",
            "/w/monkey",
        ] {
            assert!(!is_sensitive_file(Path::new(path)), "{path}");
        }
    }

    #[test]
    fn the_agents_own_secrets_are_known_by_path() {
        let dir = tempfile::tempdir().unwrap();
        let share = dir.path().join("share");
        std::fs::create_dir_all(share.join("credentials")).unwrap();
        std::fs::write(share.join("config.toml"), "").unwrap();
        let custom = dir.path().join("my-config.toml");
        let secrets = SecretFiles::new(&share, Some(&custom));
        for path in [
            share.join("config.toml"),
            share.join("mcp.json"),
            share.join("credentials/kimi-code.json"),
            share.join("mcp-oauth/abc.json"),
            custom,
            share.canonicalize().unwrap().join("config.toml"),
        ] {
            assert!(secrets.is_secret(&path), "{}", path.display());
        }
        assert!(secrets.is_secret(Path::new("/anywhere/.env")));
        assert!(!secrets.is_secret(&share.join("sessions/x/wire.jsonl")));
        assert!(!secrets.is_secret(&dir.path().join("other.toml")));
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
