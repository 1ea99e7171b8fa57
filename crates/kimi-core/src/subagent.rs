//! Subagent instances on disk, laid out as the reference lays them out so a session resumes in either
//! program: `<session>/subagents/<agent_id>/` holds `meta.json` (the instance record), `context.jsonl`,
//! `wire.jsonl` (the subagent's own events, unwrapped), `prompt.txt` (the last prompt) and `output`.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::session::{SessionError, write_atomic};

/// The folder of the session dir that holds the instances.
pub const SUBAGENTS_DIR: &str = "subagents";

/// Where an instance is in its life (reference `SubagentStatus`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InstanceStatus {
    /// Created or finished a run; may be resumed.
    Idle,
    /// Running as a foreground `Agent` call.
    RunningForeground,
    /// Running as a background task.
    RunningBackground,
    /// Finished for good.
    Completed,
    /// Its last run failed.
    Failed,
    /// Its last run was cancelled.
    Killed,
}

impl InstanceStatus {
    /// Whether a run is in progress (so it cannot be resumed now).
    pub fn is_running(self) -> bool {
        matches!(self, Self::RunningForeground | Self::RunningBackground)
    }

    /// The reference's name for the status, used in messages.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Idle => "idle",
            Self::RunningForeground => "running_foreground",
            Self::RunningBackground => "running_background",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Killed => "killed",
        }
    }
}

/// How an instance was launched (reference `AgentLaunchSpec`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LaunchSpec {
    /// The instance id.
    pub agent_id: String,
    /// Its type.
    pub subagent_type: String,
    /// The model alias the caller asked for.
    pub model_override: Option<String>,
    /// The model alias it runs with (`None`: the parent's).
    pub effective_model: Option<String>,
    /// Unix time, seconds.
    pub created_at: f64,
}

/// `meta.json` (reference `AgentInstanceRecord`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    /// The instance id.
    pub agent_id: String,
    /// Its type.
    pub subagent_type: String,
    /// Where it is in its life.
    pub status: InstanceStatus,
    /// The caller's short description of the current task.
    pub description: String,
    /// Unix time, seconds.
    pub created_at: f64,
    /// Unix time, seconds.
    pub updated_at: f64,
    /// The background task that last ran it.
    #[serde(default)]
    pub last_task_id: Option<String>,
    /// How it was launched.
    pub launch_spec: LaunchSpec,
}

/// The session's subagent instances.
#[derive(Debug, Clone)]
pub struct SubagentStore {
    root: PathBuf,
}

impl SubagentStore {
    /// The store of the session in `session_dir`.
    pub fn new(session_dir: &Path) -> Self {
        Self {
            root: session_dir.join(SUBAGENTS_DIR),
        }
    }

    /// An instance's folder.
    pub fn dir(&self, agent_id: &str) -> PathBuf {
        self.root.join(agent_id)
    }

    /// Creates a new instance (folder, empty files, `meta.json` with status `idle`).
    pub fn create(
        &self,
        subagent_type: &str,
        description: &str,
        model_override: Option<String>,
    ) -> Result<InstanceRecord, SessionError> {
        let agent_id = new_agent_id();
        let dir = self.dir(&agent_id);
        crate::private_files::create_dir_all(&dir).map_err(|source| SessionError::Io {
            path: dir.clone(),
            source,
        })?;
        for name in ["context.jsonl", "wire.jsonl", "prompt.txt", "output"] {
            let path = dir.join(name);
            crate::private_files::open_append(&path).map_err(|source| SessionError::Io { path, source })?;
        }
        let now = now();
        let record = InstanceRecord {
            agent_id: agent_id.clone(),
            subagent_type: subagent_type.to_owned(),
            status: InstanceStatus::Idle,
            description: description.to_owned(),
            created_at: now,
            updated_at: now,
            last_task_id: None,
            launch_spec: LaunchSpec {
                agent_id,
                subagent_type: subagent_type.to_owned(),
                effective_model: model_override.clone(),
                model_override,
                created_at: now,
            },
        };
        self.write(&record)?;
        Ok(record)
    }

    /// Removes an instance that never ran (its launch failed), as the reference does.
    pub fn delete(&self, agent_id: &str) {
        let dir = self.dir(agent_id);
        if let Err(e) = std::fs::remove_dir_all(&dir) {
            tracing::warn!(path = %dir.display(), error = %e, "subagent folder not removed");
        }
    }

    /// The instance `agent_id`, if it exists and its `meta.json` reads.
    pub fn get(&self, agent_id: &str) -> Option<InstanceRecord> {
        // An id is one path segment; anything else cannot name an instance.
        if agent_id.is_empty() || agent_id.contains(['/', '\\', '\0']) || agent_id.starts_with('.') {
            return None;
        }
        let text = std::fs::read_to_string(self.dir(agent_id).join("meta.json")).ok()?;
        match serde_json::from_str(&text) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(agent_id, error = %e, "unreadable subagent meta.json");
                None
            }
        }
    }

    /// Records a new status (and description, when given).
    pub fn update(
        &self,
        record: &mut InstanceRecord,
        status: InstanceStatus,
        description: Option<&str>,
    ) -> Result<(), SessionError> {
        record.status = status;
        if let Some(description) = description {
            description.clone_into(&mut record.description);
        }
        record.updated_at = now();
        self.write(record)
    }

    fn write(&self, record: &InstanceRecord) -> Result<(), SessionError> {
        let bytes = serde_json::to_vec_pretty(record).unwrap_or_default();
        write_atomic(&self.dir(&record.agent_id).join("meta.json"), &bytes)
    }
}

/// A fresh instance id: `a` and eight hex digits (reference).
pub fn new_agent_id() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string();
    format!("a{}", &hex[..8])
}

fn now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn instances_are_created_read_and_updated() {
        let dir = tempfile::tempdir().unwrap();
        let store = SubagentStore::new(dir.path());
        let mut record = store.create("coder", "fix it", None).unwrap();
        assert!(record.agent_id.starts_with('a') && record.agent_id.len() == 9);
        for name in ["meta.json", "context.jsonl", "wire.jsonl", "prompt.txt", "output"] {
            assert!(store.dir(&record.agent_id).join(name).exists(), "{name}");
        }
        assert_eq!(store.get(&record.agent_id), Some(record.clone()));
        store
            .update(&mut record, InstanceStatus::RunningForeground, Some("again"))
            .unwrap();
        let read = store.get(&record.agent_id).unwrap();
        assert_eq!(
            (read.status, read.description.as_str()),
            (InstanceStatus::RunningForeground, "again")
        );
        assert!(read.status.is_running());
    }

    #[test]
    fn meta_json_has_the_reference_shape() {
        let dir = tempfile::tempdir().unwrap();
        let store = SubagentStore::new(dir.path());
        let record = store.create("explore", "look", Some("fast".into())).unwrap();
        let meta: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(store.dir(&record.agent_id).join("meta.json")).unwrap(),
        )
        .unwrap();
        let keys: Vec<&String> = meta.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "agent_id",
                "subagent_type",
                "status",
                "description",
                "created_at",
                "updated_at",
                "last_task_id",
                "launch_spec"
            ]
        );
        assert_eq!(meta["status"], "idle");
        assert_eq!(meta["launch_spec"]["effective_model"], "fast");
    }

    #[test]
    fn ids_that_are_not_one_segment_name_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let store = SubagentStore::new(dir.path());
        for id in ["", "..", "../x", "a/b", ".hidden"] {
            assert_eq!(store.get(id), None, "{id}");
        }
    }
}
