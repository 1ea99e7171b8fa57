//! Opening a page in the user's browser (the login and MCP authorization pages).
//!
//! `$BROWSER`, when set, names the command (Python's `webbrowser` convention, which the reference
//! follows: the first of its `:`-separated entries, `%s` replaced by the URL or the URL appended).
//! Otherwise `open` on macOS and `xdg-open` where a display is set; headless, nothing is opened and the
//! printed URL is the way.

use std::io::IsTerminal;
use std::process::{Command, Stdio};

/// When a page is worth opening.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum When {
    /// Only with a person at a terminal (`mcp auth`; its output piped to a program opens nothing).
    AtTerminal,
    /// Also when a program reads our output: `login --json` is how the editors sign in, and they rely
    /// on the command opening the page, as the reference's does.
    Always,
}

/// Opens `url` (http or https only); whether a browser was started.
pub fn open(url: &str, when: When) -> bool {
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return false;
    }
    if when == When::AtTerminal && !std::io::stdout().is_terminal() {
        return false;
    }
    let mut command = match std::env::var("BROWSER").ok().filter(|b| !b.trim().is_empty()) {
        Some(browser) => match from_browser_variable(&browser, url) {
            Some(command) => command,
            None => return false,
        },
        None => {
            let has_display = cfg!(target_os = "macos")
                || ["DISPLAY", "WAYLAND_DISPLAY"]
                    .iter()
                    .any(|key| std::env::var_os(key).is_some_and(|v| !v.is_empty()));
            if !has_display {
                return false;
            }
            let mut command = Command::new(if cfg!(target_os = "macos") {
                "open"
            } else {
                "xdg-open"
            });
            command.arg(url);
            command
        }
    };
    let spawned = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match spawned {
        Ok(mut child) => {
            // Reaped in the background so it does not linger as a zombie while we wait for the user.
            std::thread::spawn(move || child.wait());
            true
        }
        Err(_) => false,
    }
}

/// The command `$BROWSER` names for `url` (no shell: the words are split on whitespace).
fn from_browser_variable(browser: &str, url: &str) -> Option<Command> {
    let entry = browser.split(':').map(str::trim).find(|e| !e.is_empty())?;
    let mut words = entry.split_whitespace();
    let mut command = Command::new(words.next()?);
    let mut placed = false;
    for word in words {
        if word.contains("%s") {
            command.arg(word.replace("%s", url));
            placed = true;
        } else {
            command.arg(word);
        }
    }
    if !placed {
        command.arg(url);
    }
    Some(command)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(command: &Command) -> Vec<String> {
        std::iter::once(command.get_program())
            .chain(command.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_browser_variable_follows_python_webbrowser() {
        let url = "https://auth.example/device?code=1";
        let plain = from_browser_variable("firefox", url).unwrap();
        assert_eq!(argv(&plain), ["firefox", url]);
        let placed = from_browser_variable("my-open --new %s:other", url).unwrap();
        assert_eq!(argv(&placed), ["my-open", "--new", url]);
        assert!(from_browser_variable(" : ", url).is_none());
    }

    #[test]
    fn only_web_pages_are_opened() {
        assert!(!open("file:///etc/passwd", When::Always));
        assert!(!open("javascript:alert(1)", When::Always));
    }
}
