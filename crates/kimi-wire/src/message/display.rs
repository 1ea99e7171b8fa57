//! Display blocks: what tools and approval requests show the user (never the model).
//!
//! Reference: kosong's `DisplayBlock` registry plus the blocks in `kimi_cli/tools/display.py`.
//! A block whose `type` nobody registered is kept as [`DisplayBlock::Unknown`] with every other key
//! moved under `data`; it is written back as `{"type": .., "data": {..}}` (not flattened again).
//! A *known* type with bad fields is an error, as in the reference.

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, de::Error as _};
use serde_json::{Map, Value};
use ts_rs::TS;

/// A user-facing block attached to a tool result or an approval request.
#[derive(Debug, Clone, PartialEq, Serialize, JsonSchema, TS)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum DisplayBlock {
    /// A one-line summary of what happened.
    Brief {
        /// The summary text.
        text: String,
    },
    /// A file change, shown as a diff.
    Diff {
        /// The file path.
        path: String,
        /// The text before the change.
        old_text: String,
        /// The text after the change.
        new_text: String,
        /// First line number (1-based) of `old_text` in the old file.
        #[serde(default = "one")]
        old_start: u32,
        /// First line number (1-based) of `new_text` in the new file.
        #[serde(default = "one")]
        new_start: u32,
        /// True when the texts are an abbreviated summary rather than the full hunk.
        #[serde(default)]
        is_summary: bool,
    },
    /// The current todo list.
    Todo {
        /// The items, in list order.
        items: Vec<TodoDisplayItem>,
    },
    /// A shell command about to run or that ran.
    Shell {
        /// The shell dialect used for highlighting (`"bash"` on POSIX).
        language: String,
        /// The command line.
        command: String,
    },
    /// A background task that was started or changed state.
    BackgroundTask {
        /// The task id.
        task_id: String,
        /// What kind of task it is (for example a shell command or an agent).
        kind: String,
        /// The task's status.
        status: String,
        /// A human description of the task.
        description: String,
    },
    /// A block of a kind this implementation does not know, kept so it can be passed on.
    // ts-rs would add the enum's tag to an untagged struct variant, hence the explicit type.
    #[serde(untagged)]
    #[ts(type = "{ type: string, data: JsonValue }")]
    Unknown {
        /// The block's own `type` value.
        r#type: String,
        /// Every other key of the block as it was received.
        // `default` only loosens the JSON Schema (a received unknown block may have any keys);
        // reading goes through the hand-written `Deserialize` below.
        #[serde(default)]
        data: Value,
    },
}

fn one() -> u32 {
    1
}

impl DisplayBlock {
    /// A brief block.
    pub fn brief(text: impl Into<String>) -> Self {
        Self::Brief { text: text.into() }
    }
}

/// One row of a todo display block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
pub struct TodoDisplayItem {
    /// What is to be done.
    pub title: String,
    /// Where the item stands.
    pub status: TodoStatus,
}

/// Progress of a todo item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, TS)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on.
    InProgress,
    /// Finished.
    Done,
}

/// The registered block kinds, parsed strictly. `unknown` is registered in the reference too, and
/// reads its `data` key as is.
#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum KnownBlock {
    Brief {
        text: String,
    },
    Diff {
        path: String,
        old_text: String,
        new_text: String,
        #[serde(default = "one")]
        old_start: u32,
        #[serde(default = "one")]
        new_start: u32,
        #[serde(default)]
        is_summary: bool,
    },
    Todo {
        items: Vec<TodoDisplayItem>,
    },
    Shell {
        language: String,
        command: String,
    },
    BackgroundTask {
        task_id: String,
        kind: String,
        status: String,
        description: String,
    },
    Unknown {
        data: Value,
    },
}

const KNOWN_TYPES: [&str; 6] = ["brief", "diff", "todo", "shell", "background_task", "unknown"];

impl<'de> Deserialize<'de> for DisplayBlock {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut map = Map::<String, Value>::deserialize(deserializer)?;
        let kind = match map.get("type") {
            Some(Value::String(kind)) => kind.clone(),
            Some(_) | None => {
                return Err(D::Error::custom("display block needs a string `type`"));
            }
        };
        if !KNOWN_TYPES.contains(&kind.as_str()) {
            // `shift_remove` keeps the other keys in their received order.
            map.shift_remove("type");
            return Ok(Self::Unknown {
                r#type: kind,
                data: Value::Object(map),
            });
        }
        let known: KnownBlock = serde_json::from_value(Value::Object(map)).map_err(D::Error::custom)?;
        Ok(match known {
            KnownBlock::Brief { text } => Self::Brief { text },
            KnownBlock::Diff {
                path,
                old_text,
                new_text,
                old_start,
                new_start,
                is_summary,
            } => Self::Diff {
                path,
                old_text,
                new_text,
                old_start,
                new_start,
                is_summary,
            },
            KnownBlock::Todo { items } => Self::Todo { items },
            KnownBlock::Shell { language, command } => Self::Shell { language, command },
            KnownBlock::BackgroundTask {
                task_id,
                kind,
                status,
                description,
            } => Self::BackgroundTask {
                task_id,
                kind,
                status,
                description,
            },
            KnownBlock::Unknown { data } => Self::Unknown { r#type: kind, data },
        })
    }
}
