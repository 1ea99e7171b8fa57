//! Where kimi-agent keeps its files.
//!
//! Everything lives under one *share directory*: `$KIMI_SHARE_DIR` when that variable is set and
//! not empty, otherwise `$HOME/.kimi`. The layout inside it matches the reference CLI so the two
//! implementations can share a home:
//!
//! ```text
//! <share>/config.toml        configuration (created with defaults on first use)
//! <share>/config.json        legacy configuration, migrated once to config.toml
//! <share>/kimi.json          metadata: work dirs and their last session
//! <share>/mcp.json           MCP servers used when no --mcp-config-file is given
//! <share>/logs/kimi.log      log file
//! <share>/sessions/<md5>/    sessions of one work directory
//! ```
//!
//! The functions here only compute paths; none of them touches the file system.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// Environment variable that relocates the share directory.
pub const SHARE_DIR_ENV: &str = "KIMI_SHARE_DIR";

/// The share directory for the current process environment.
pub fn share_dir() -> PathBuf {
    share_dir_from(std::env::var_os(SHARE_DIR_ENV), home_dir())
}

/// The share directory given the value of `KIMI_SHARE_DIR` and the home directory.
///
/// An empty `KIMI_SHARE_DIR` counts as unset, as in the reference. Without a home directory the
/// current directory stands in for it.
pub fn share_dir_from(kimi_share_dir: Option<OsString>, home: Option<PathBuf>) -> PathBuf {
    match kimi_share_dir {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => home.unwrap_or_else(|| PathBuf::from(".")).join(".kimi"),
    }
}

/// The user's home directory: `$HOME` when set and not empty, else what the OS reports.
pub fn home_dir() -> Option<PathBuf> {
    match std::env::var_os("HOME") {
        Some(home) if !home.is_empty() => Some(PathBuf::from(home)),
        _ => std::env::home_dir(),
    }
}

/// `<share>/config.toml`, the default configuration file.
pub fn config_file(share: &Path) -> PathBuf {
    share.join("config.toml")
}

/// `<share>/config.json`, the legacy configuration file that is migrated to TOML once.
pub fn legacy_config_file(share: &Path) -> PathBuf {
    share.join("config.json")
}

/// `<share>/kimi.json`, the metadata file (work directories and their last session).
pub fn metadata_file(share: &Path) -> PathBuf {
    share.join("kimi.json")
}

/// `<share>/mcp.json`, the global MCP configuration.
pub fn mcp_config_file(share: &Path) -> PathBuf {
    share.join("mcp.json")
}

/// `<share>/logs`.
pub fn logs_dir(share: &Path) -> PathBuf {
    share.join("logs")
}

/// `<share>/logs/kimi.log`.
pub fn log_file(share: &Path) -> PathBuf {
    logs_dir(share).join("kimi.log")
}

/// `<share>/sessions`.
pub fn sessions_dir(share: &Path) -> PathBuf {
    share.join("sessions")
}

/// `<share>/sessions/<md5 of work_dir>`: where the sessions of one local work directory live.
///
/// `work_dir` must already be in the reference's canonical form (absolute and normalised, with
/// symlinks left alone); the hash is taken over its UTF-8 text exactly.
pub fn work_dir_sessions_dir(share: &Path, work_dir: &Path) -> PathBuf {
    let digest = md5::compute(work_dir.to_string_lossy().as_bytes());
    sessions_dir(share).join(format!("{digest:x}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn share_dir_prefers_the_variable_and_ignores_it_when_empty() {
        let home = Some(PathBuf::from("/home/u"));
        assert_eq!(
            share_dir_from(Some("/tmp/share".into()), home.clone()),
            PathBuf::from("/tmp/share")
        );
        assert_eq!(
            share_dir_from(Some("".into()), home.clone()),
            PathBuf::from("/home/u/.kimi")
        );
        assert_eq!(share_dir_from(None, home), PathBuf::from("/home/u/.kimi"));
    }

    #[test]
    fn files_sit_where_the_reference_puts_them() {
        let share = Path::new("/s");
        assert_eq!(config_file(share), PathBuf::from("/s/config.toml"));
        assert_eq!(metadata_file(share), PathBuf::from("/s/kimi.json"));
        assert_eq!(mcp_config_file(share), PathBuf::from("/s/mcp.json"));
        assert_eq!(log_file(share), PathBuf::from("/s/logs/kimi.log"));
        assert_eq!(sessions_dir(share), PathBuf::from("/s/sessions"));
    }

    #[test]
    fn session_dirs_are_keyed_by_the_md5_of_the_work_dir() {
        // md5("/tmp") = d42b9c57d24cf5db3bd8d332dc35437f
        assert_eq!(
            work_dir_sessions_dir(Path::new("/s"), Path::new("/tmp")),
            PathBuf::from("/s/sessions/d42b9c57d24cf5db3bd8d332dc35437f")
        );
    }
}
