//! A background agent's readable transcript.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use kimi_wire::message::{ContentPart, Event};

/// A background agent's readable transcript, appended to every one of its files (the reference's
/// layout: `[stage] …`, the model's text, `[tool] Name`, `[tool_result] success|error[: brief]`,
/// `[summary]`). Best effort: a file that cannot be opened is left out, a failed write never stops the
/// agent. The files are opened once (private, as every file of the share directory): the observer calls
/// `event` for every streamed part.
#[derive(Clone)]
pub(super) struct Transcript {
    files: Arc<Mutex<Vec<std::fs::File>>>,
}

impl Transcript {
    pub(super) fn new(paths: Vec<PathBuf>) -> Self {
        let files = paths
            .iter()
            .filter_map(|path| {
                crate::private_files::open_append(path)
                    .inspect_err(|e| {
                        tracing::debug!(path = %path.display(), error = %e, "agent transcript not opened");
                    })
                    .ok()
            })
            .collect();
        Self {
            files: Arc::new(Mutex::new(files)),
        }
    }

    pub(super) fn stage(&self, name: &str) {
        self.append(&format!("[stage] {name}\n"));
    }

    pub(super) fn error(&self, message: &str) {
        self.append(&format!("[error] {message}\n"));
    }

    pub(super) fn summary(&self, report: &str) {
        if !report.is_empty() {
            self.append(&format!("\n[summary]\n{report}\n"));
        }
    }

    pub(super) fn event(&self, event: &Event) {
        match event {
            Event::ContentPart(ContentPart::Text(part)) if !part.text.is_empty() => self.append(&part.text),
            Event::ToolCall(call) => self.append(&format!("[tool] {}\n", call.function.name)),
            Event::ToolResult(result) => {
                let value = &result.return_value;
                let status = if value.is_error { "error" } else { "success" };
                match value.brief() {
                    "" => self.append(&format!("[tool_result] {status}\n")),
                    brief => self.append(&format!("[tool_result] {status}: {brief}\n")),
                }
            }
            _ => {}
        }
    }

    fn append(&self, text: &str) {
        use std::io::Write;
        let mut files = crate::sync::lock(&self.files);
        for file in files.iter_mut() {
            if let Err(e) = file.write_all(text.as_bytes()) {
                tracing::debug!(error = %e, "agent transcript not written");
            }
        }
    }
}
