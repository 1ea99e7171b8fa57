//! OAuth tokens of remote MCP servers, under `<share>/mcp-oauth/`.
//!
//! Scope: we read a stored access token and send it as a bearer token; a server configured with
//! `"auth": "oauth"` and no stored token is `unauthorized` and not started, as in the reference. The
//! interactive authorization flow (`mcp auth`) and token refresh are not implemented; the file layout is
//! ours (one JSON file per server URL, `{"access_token": "..."}`), not fastmcp's hashed key-value tree.

use std::path::{Path, PathBuf};

/// `<share>/mcp-oauth`.
pub fn token_dir(share_dir: &Path) -> PathBuf {
    share_dir.join("mcp-oauth")
}

/// The token file of `url` (trailing `/` ignored, as the reference keys it).
pub fn token_file(share_dir: &Path, url: &str) -> PathBuf {
    let key = url.trim_end_matches('/');
    token_dir(share_dir).join(format!("{:x}.json", md5::compute(key.as_bytes())))
}

/// The stored access token of `url`, if any.
pub fn stored_token(share_dir: &Path, url: &str) -> Option<String> {
    let text = std::fs::read_to_string(token_file(share_dir, url)).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    value
        .get("access_token")
        .and_then(serde_json::Value::as_str)
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
}

/// Removes the stored tokens of `url`; clearing what is not there is fine.
pub fn clear_tokens(share_dir: &Path, url: &str) -> std::io::Result<()> {
    match std::fs::remove_file(token_file(share_dir, url)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_keyed_by_url_without_trailing_slash() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(stored_token(dir.path(), "https://h/mcp"), None);
        std::fs::create_dir_all(token_dir(dir.path())).unwrap();
        std::fs::write(
            token_file(dir.path(), "https://h/mcp/"),
            r#"{"access_token": "t"}"#,
        )
        .unwrap();
        assert_eq!(stored_token(dir.path(), "https://h/mcp").as_deref(), Some("t"));
        clear_tokens(dir.path(), "https://h/mcp").unwrap();
        clear_tokens(dir.path(), "https://h/mcp").unwrap();
        assert_eq!(stored_token(dir.path(), "https://h/mcp"), None);
    }
}
