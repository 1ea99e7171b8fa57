//! `<session>/tasks/<id>/`: `spec.json`, `runtime.json`, `control.json`, `consumer.json` and
//! `output.log`, with the reference's names and formats (`background/store.py`).

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;

use super::ids::is_valid_task_id;
use super::model::{TaskConsumerState, TaskControl, TaskRuntime, TaskSpec, TaskView};
use crate::notifications::write_json;
use crate::session::SessionError;

const SPEC_FILE: &str = "spec.json";
const RUNTIME_FILE: &str = "runtime.json";
const CONTROL_FILE: &str = "control.json";
const CONSUMER_FILE: &str = "consumer.json";
const OUTPUT_FILE: &str = "output.log";

/// The tasks directory of one session.
#[derive(Debug, Clone)]
pub struct TaskStore {
    root: PathBuf,
}

/// A bounded read of a task's output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutputChunk {
    /// Where the read started (clamped to the file).
    pub offset: u64,
    /// Where the next read would start.
    pub next_offset: u64,
    /// The bytes read, decoded as UTF-8 with replacement characters.
    pub text: String,
    /// The file's size when read.
    pub total_size: u64,
}

impl TaskStore {
    /// The store under `root` (`<session>/tasks`).
    pub fn new(root: PathBuf) -> Self {
        Self { root }
    }

    /// The task's directory (not checked for existence).
    pub fn task_dir(&self, id: &str) -> PathBuf {
        self.root.join(id)
    }

    /// The task's output log.
    pub fn output_path(&self, id: &str) -> PathBuf {
        self.task_dir(id).join(OUTPUT_FILE)
    }

    /// Writes a new task's records and an empty output log.
    pub fn create(&self, view: &TaskView) -> Result<(), SessionError> {
        let id = &view.spec.id;
        write_json(&self.task_dir(id).join(SPEC_FILE), &view.spec)?;
        self.write_runtime(id, &view.runtime)?;
        self.write_control(id, &view.control)?;
        self.write_consumer(id, &view.consumer)?;
        let path = self.output_path(id);
        crate::private_files::open_append(&path)
            .map(drop)
            .map_err(|source| SessionError::Io { path, source })
    }

    /// Rewrites `runtime.json`.
    pub fn write_runtime(&self, id: &str, runtime: &TaskRuntime) -> Result<(), SessionError> {
        write_json(&self.task_dir(id).join(RUNTIME_FILE), runtime)
    }

    /// Rewrites `control.json`.
    pub fn write_control(&self, id: &str, control: &TaskControl) -> Result<(), SessionError> {
        write_json(&self.task_dir(id).join(CONTROL_FILE), control)
    }

    /// Rewrites `consumer.json`.
    pub fn write_consumer(&self, id: &str, consumer: &TaskConsumerState) -> Result<(), SessionError> {
        write_json(&self.task_dir(id).join(CONSUMER_FILE), consumer)
    }

    /// Every task with a readable spec. A missing or unreadable runtime, control or consumer file reads
    /// as its defaults (logged), as in the reference.
    pub fn load_all(&self) -> Vec<TaskView> {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut views = Vec::new();
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(id) = name.to_str().filter(|id| is_valid_task_id(id)) else {
                continue;
            };
            let dir = entry.path();
            let spec: TaskSpec = match read_json(&dir.join(SPEC_FILE)) {
                Some(Ok(spec)) => spec,
                Some(Err(e)) => {
                    tracing::warn!(task = id, error = %e, "unreadable task spec; task skipped");
                    continue;
                }
                None => continue,
            };
            views.push(TaskView {
                spec,
                runtime: read_or_default(&dir.join(RUNTIME_FILE)),
                control: read_or_default(&dir.join(CONTROL_FILE)),
                consumer: read_or_default(&dir.join(CONSUMER_FILE)),
            });
        }
        views
    }

    /// Up to `max_bytes` of the output from `offset`.
    pub fn read_output(&self, id: &str, offset: u64, max_bytes: u64) -> std::io::Result<OutputChunk> {
        let mut file = match std::fs::File::open(self.output_path(id)) {
            Ok(file) => file,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(OutputChunk {
                    offset,
                    next_offset: offset,
                    text: String::new(),
                    total_size: 0,
                });
            }
            Err(e) => return Err(e),
        };
        let total_size = file.seek(SeekFrom::End(0))?;
        let start = offset.min(total_size);
        file.seek(SeekFrom::Start(start))?;
        let mut bytes = Vec::new();
        file.take(max_bytes).read_to_end(&mut bytes)?;
        Ok(OutputChunk {
            offset: start,
            next_offset: start + bytes.len() as u64,
            text: String::from_utf8_lossy(&bytes).into_owned(),
            total_size,
        })
    }

    /// The last lines of the output: the last `max_bytes` bytes, then at most `max_lines` of their lines
    /// (reference `tail_output`).
    pub fn tail_output(&self, id: &str, max_bytes: u64, max_lines: usize) -> String {
        let size = std::fs::metadata(self.output_path(id)).map_or(0, |m| m.len());
        let chunk = match self.read_output(id, size.saturating_sub(max_bytes), max_bytes) {
            Ok(chunk) => chunk,
            Err(e) => {
                tracing::warn!(task = id, error = %e, "task output unreadable");
                return String::new();
            }
        };
        let lines = kimi_llm::splitlines(&chunk.text);
        lines[lines.len().saturating_sub(max_lines)..].join("\n")
    }
}

fn read_json<T: DeserializeOwned>(path: &Path) -> Option<Result<T, serde_json::Error>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(serde_json::from_str(&text))
}

fn read_or_default<T: DeserializeOwned + Default>(path: &Path) -> T {
    match read_json(path) {
        Some(Ok(value)) => value,
        Some(Err(e)) => {
            tracing::warn!(path = %path.display(), error = %e, "unreadable task record; using defaults");
            T::default()
        }
        None => T::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::background::model::TaskKind;
    use pretty_assertions::assert_eq;

    fn view(id: &str) -> TaskView {
        TaskView {
            spec: TaskSpec {
                version: 1,
                id: id.into(),
                kind: TaskKind::Bash,
                session_id: "s".into(),
                description: "d".into(),
                tool_call_id: "tc".into(),
                owner_role: crate::background::model::OwnerRole::Root,
                created_at: 1.0,
                command: Some("true".into()),
                shell_name: Some("bash".into()),
                shell_path: Some("/bin/bash".into()),
                cwd: Some("/".into()),
                timeout_s: Some(60),
                kind_payload: None,
            },
            runtime: TaskRuntime::new(1.0),
            control: TaskControl::default(),
            consumer: TaskConsumerState::default(),
        }
    }

    #[test]
    fn writes_the_reference_files_and_reads_them_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = TaskStore::new(dir.path().join("tasks"));
        store.create(&view("bash-aaaaaaaa")).unwrap();
        let names = {
            let mut names: Vec<String> = std::fs::read_dir(dir.path().join("tasks/bash-aaaaaaaa"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names,
            [
                "consumer.json",
                "control.json",
                "output.log",
                "runtime.json",
                "spec.json"
            ]
        );
        // A broken runtime reads as defaults; a directory without a spec is not a task.
        std::fs::write(dir.path().join("tasks/bash-aaaaaaaa/runtime.json"), "nope").unwrap();
        std::fs::create_dir_all(dir.path().join("tasks/bash-bbbbbbbb")).unwrap();
        std::fs::create_dir_all(dir.path().join("tasks/Not_A_Task")).unwrap();
        let loaded = store.load_all();
        let expected = TaskView {
            runtime: TaskRuntime::default(),
            ..view("bash-aaaaaaaa")
        };
        assert_eq!(loaded, vec![expected]);
    }

    #[test]
    fn reads_output_in_bounded_chunks_and_tails_by_bytes_then_lines() {
        let dir = tempfile::tempdir().unwrap();
        let store = TaskStore::new(dir.path().join("tasks"));
        store.create(&view("bash-cccccccc")).unwrap();
        std::fs::write(store.output_path("bash-cccccccc"), "one\ntwo\r\nthree\nfour\n").unwrap();
        let chunk = store.read_output("bash-cccccccc", 4, 5).unwrap();
        assert_eq!(
            chunk,
            OutputChunk {
                offset: 4,
                next_offset: 9,
                text: "two\r\n".into(),
                total_size: 20
            }
        );
        let past_end = store.read_output("bash-cccccccc", 99, 5).unwrap();
        assert_eq!((past_end.offset, past_end.text.as_str()), (20, ""));
        assert_eq!(store.tail_output("bash-cccccccc", 1000, 2), "three\nfour");
        assert_eq!(store.tail_output("bash-cccccccc", 8, 20), "ee\nfour");
        assert_eq!(store.tail_output("bash-missing", 100, 2), "");
        let missing = store.read_output("bash-missing", 0, 10).unwrap();
        assert_eq!(missing.total_size, 0);
    }
}
