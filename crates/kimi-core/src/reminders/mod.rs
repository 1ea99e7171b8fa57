//! The reminders each mode owes the model (the reference's dynamic injections, `soul/dynamic_injection.py`
//! and `dynamic_injections/`; the words are ours).
//!
//! Before each model call the soul gathers [`ModeFacts`] and asks [`Reminders::due`] what the model must
//! be told now: that plan mode is on and where its plan file is (when it is turned on, after a restart,
//! and again every few steps while it stays on), that it is off again, that nobody is at the keyboard
//! (afk) and that somebody is back. The providers are pure: they read the facts and the history and keep
//! only a counter, so what the model was last told is read from the history itself, which survives a
//! restart and loses what compaction summarised away.
//!
//! Due reminders go into the context as one user message of `<system-reminder>` blocks ([`message`]); the
//! request merges it into the adjacent user message ([`merged`]), as the reference does.
//!
//! Layout: `plan_mode.rs`, `afk.rs` and `sandbox.rs`, one provider each, with their texts and unit tests.

mod afk;
mod plan_mode;
mod sandbox;

use std::sync::Arc;

use kimi_llm::{Message, Role};
use kimi_wire::message::ContentPart;

use afk::AfkReminder;
use plan_mode::PlanModeReminder;
use sandbox::SandboxReminder;

use crate::tool_names::ToolNames;

/// What the providers read, gathered by the soul before a model call.
#[derive(Debug, Clone, Copy)]
pub struct ModeFacts<'a> {
    /// The conversation so far (as stored, not merged).
    pub history: &'a [Message],
    /// Which history that is ([`crate::Context::generation`]): within one generation it only grows, so
    /// the providers read only what was added since they last looked.
    pub generation: u64,
    /// Plan mode.
    pub plan: PlanFacts<'a>,
    /// Is nobody at the keyboard (afk)?
    pub afk: bool,
    /// How the model's commands are confined now (`None` outside a session).
    pub sandbox: Option<&'a kimi_wire::params::SandboxInfo>,
}

/// Plan mode as the reminders see it.
#[derive(Debug, Clone, Copy, Default)]
pub struct PlanFacts<'a> {
    /// Is plan mode on?
    pub on: bool,
    /// Was it turned on (or found on at start) since the last model call?
    pub entered: bool,
    /// The plan file, while plan mode is on.
    pub file: Option<&'a std::path::Path>,
    /// Does the plan file exist?
    pub file_exists: bool,
}

/// One reminder due before the next model call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Injection {
    /// What it is about (`plan_mode`, `plan_mode_reentry`, `plan_mode_off`, `afk_mode`, `afk_mode_off`,
    /// `sandbox`, `sandbox_off`).
    pub kind: &'static str,
    /// Its text, without the tags.
    pub text: String,
}

/// The providers a soul runs. A subagent runs only the sandbox's: the plan-mode workflow and afk are the
/// root agent's business (reference), but its commands are confined all the same.
#[derive(Debug, Default)]
pub struct Reminders {
    plan: Option<PlanModeReminder>,
    afk: Option<AfkReminder>,
    sandbox: Option<SandboxReminder>,
    /// What the texts call the tools (the kimi-code agent's `Write`, `Edit`, `Read`).
    names: ToolNames,
}

impl Reminders {
    /// No reminders (scratch souls).
    pub fn none() -> Self {
        Self::default()
    }

    /// A subagent's reminders: the sandbox's only.
    pub fn for_subagent() -> Self {
        Self {
            sandbox: Some(SandboxReminder::default()),
            names: ToolNames::REFERENCE,
            ..Self::default()
        }
    }

    /// The root agent's reminders; `afk` is false when the configuration turns the afk reminder off
    /// (`skip_afk_prompt_injection`).
    pub fn for_root(afk: bool) -> Self {
        Self {
            plan: Some(PlanModeReminder::default()),
            afk: afk.then(AfkReminder::default),
            sandbox: Some(SandboxReminder::default()),
            names: ToolNames::REFERENCE,
        }
    }

    /// The same reminders, naming the tools as `names` says.
    #[must_use]
    pub fn with_tool_names(mut self, names: ToolNames) -> Self {
        self.names = names;
        self
    }

    /// Whether plan mode's provider runs. Only such a soul (the root agent's) reads plan mode's facts:
    /// "plan mode was just entered" is taken when read, and a subagent sharing the plan state must not
    /// take it from the root agent.
    pub fn runs_plan(&self) -> bool {
        self.plan.is_some()
    }

    /// Whether any provider runs (the soul gathers no facts otherwise).
    pub fn is_empty(&self) -> bool {
        self.plan.is_none() && self.afk.is_none() && self.sandbox.is_none()
    }

    /// The reminders due now: plan mode, afk, then the sandbox.
    pub fn due(&mut self, facts: &ModeFacts<'_>) -> Vec<Injection> {
        let mut due = Vec::new();
        if let Some(plan) = &mut self.plan {
            due.extend(plan.due(facts));
        }
        if let Some(afk) = &mut self.afk {
            due.extend(afk.due(facts));
        }
        for injection in &mut due {
            if let std::borrow::Cow::Owned(text) = self.names.apply(&injection.text) {
                injection.text = text;
            }
        }
        // Named already: it compares its text with the one the model read.
        if let Some(sandbox) = &mut self.sandbox {
            due.extend(sandbox.due(facts, self.names));
        }
        due
    }
}

/// `text` in the tags the model knows reminders by.
pub(crate) fn tagged(text: &str) -> String {
    format!("<system-reminder>\n{text}\n</system-reminder>")
}

/// The user message that carries `injections`, or `None` when there are none.
pub fn message(injections: &[Injection]) -> Option<Message> {
    if injections.is_empty() {
        return None;
    }
    let text = injections
        .iter()
        .map(|i| tagged(&i.text))
        .collect::<Vec<_>>()
        .join("\n");
    Some(Message::user_text(text))
}

/// Walks the history back to the latest reminder `classify` recognises, counting the assistant messages
/// after it: `(what it said, assistant messages since)`, or `None` when there is none.
fn latest<T>(history: &[Message], classify: impl Fn(&str) -> Option<T>) -> Option<(T, usize)> {
    let mut assistants = 0;
    for message in history.iter().rev() {
        match message.role {
            Role::Assistant => assistants += 1,
            Role::User => {
                let found = message.content.iter().find_map(|part| match part {
                    ContentPart::Text(text) => classify(&text.text),
                    _ => None,
                });
                if let Some(found) = found {
                    return Some((found, assistants));
                }
            }
            _ => {}
        }
    }
    None
}

/// Where a provider last looked for its latest reminder, so that a model call reads only the messages
/// added since the one before: a history only grows within its generation. Without it every step walked
/// the whole conversation back to the reminder (a turn's later steps cost more than its first).
#[derive(Debug)]
struct Cursor<T> {
    /// The generation read, `None` before the first look.
    generation: Option<u64>,
    /// How many of its messages were read.
    seen: usize,
    /// What [`latest`] found in them.
    found: Option<(T, usize)>,
}

impl<T> Default for Cursor<T> {
    fn default() -> Self {
        Self {
            generation: None,
            seen: 0,
            found: None,
        }
    }
}

impl<T: Clone> Cursor<T> {
    /// [`latest`] over `history`, reading only what was added since the last look when `history` is the
    /// same generation (a shorter history is read whole all the same: it cannot be the one read before).
    fn latest(
        &mut self,
        history: &[Message],
        generation: u64,
        classify: impl Fn(&str) -> Option<T>,
    ) -> Option<(T, usize)> {
        let same = self.generation == Some(generation) && history.len() >= self.seen;
        let start = if same { self.seen } else { 0 };
        let added = &history[start..];
        let earlier = if same { self.found.take() } else { None };
        let found = latest(added, classify).or_else(|| {
            let assistants = added.iter().filter(|m| m.role == Role::Assistant).count();
            earlier.map(|(told, since)| (told, since + assistants))
        });
        self.generation = Some(generation);
        self.seen = history.len();
        self.found.clone_from(&found);
        found
    }
}

/// Whether `text` holds a reminder whose first line starts with `opening`.
fn opens_with(text: &str, opening: &str) -> bool {
    text.match_indices("<system-reminder>\n")
        .any(|(at, tag)| text[at + tag.len()..].starts_with(opening))
}

/// Is `message` the model's copy of a notification (never merged, reference `is_notification_message`)?
fn is_notification(message: &Message) -> bool {
    matches!(message.content.as_slice(), [ContentPart::Text(text)] if text.text.trim_start().starts_with("<notification "))
}

/// The history as the model gets it (reference `normalize_history`): adjacent user messages merged into
/// one, so a reminder joins the prompt or steer next to it. Notifications stay on their own; assistant
/// and tool messages are never merged (their tool-call pairs must stay intact). Returns the same
/// snapshot when nothing is to merge.
pub fn merged(history: Arc<Vec<Message>>) -> Arc<Vec<Message>> {
    let mergeable = |a: &Message, b: &Message| {
        a.role == Role::User && b.role == Role::User && !is_notification(a) && !is_notification(b)
    };
    if !history.windows(2).any(|pair| mergeable(&pair[0], &pair[1])) {
        return history;
    }
    let mut out: Vec<Message> = Vec::with_capacity(history.len());
    for message in history.iter() {
        match out.last_mut() {
            Some(last) if mergeable(last, message) => last.content.extend(message.content.iter().cloned()),
            _ => out.push(message.clone()),
        }
    }
    Arc::new(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn texts(history: &[Message]) -> Vec<(Role, String)> {
        history.iter().map(|m| (m.role, m.text())).collect()
    }

    /// A subagent's soul shares the root agent's plan state; only a soul running plan mode's provider
    /// may take its "just entered" flag (`Soul::remind`), so a subagent's model call cannot eat the
    /// root agent's plan-mode reminder.
    #[test]
    fn only_the_root_agents_reminders_read_plan_mode() {
        assert!(Reminders::for_root(true).runs_plan());
        let subagent = Reminders::for_subagent();
        assert!(!subagent.runs_plan());
        assert!(!subagent.is_empty(), "a subagent is told about the sandbox");
        assert!(!Reminders::none().runs_plan() && Reminders::none().is_empty());
    }

    #[test]
    fn reminders_share_one_user_message_in_tags() {
        assert_eq!(message(&[]), None);
        let both = message(&[
            Injection {
                kind: "a",
                text: "first".into(),
            },
            Injection {
                kind: "b",
                text: "second\nline".into(),
            },
        ]);
        assert_eq!(
            both,
            Some(Message::user_text(
                "<system-reminder>\nfirst\n</system-reminder>\n<system-reminder>\nsecond\nline\n</system-reminder>"
            ))
        );
    }

    #[test]
    fn adjacent_user_messages_merge_but_notifications_and_tool_pairs_do_not() {
        let notification = Message::user_text("<notification id=\"n1\">done</notification>");
        let history = Arc::new(vec![
            Message::user_text("prompt"),
            Message::user_text("<system-reminder>\nr\n</system-reminder>"),
            Message::assistant(vec![ContentPart::text("a")], Vec::new()),
            Message::tool("tc-1", vec![ContentPart::text("out")]),
            Message::user_text("steer"),
            notification.clone(),
            Message::user_text("<system-reminder>\nr2\n</system-reminder>"),
            Message::user_text("more"),
        ]);
        let merged = merged(Arc::clone(&history));
        assert_eq!(
            texts(&merged),
            vec![
                (
                    Role::User,
                    "prompt<system-reminder>\nr\n</system-reminder>".to_owned()
                ),
                (Role::Assistant, "a".to_owned()),
                (Role::Tool, "out".to_owned()),
                (Role::User, "steer".to_owned()),
                (Role::User, notification.text()),
                (
                    Role::User,
                    "<system-reminder>\nr2\n</system-reminder>more".to_owned()
                ),
            ]
        );
        assert_eq!(merged[0].content.len(), 2, "parts are kept, not joined");
    }

    #[test]
    fn nothing_to_merge_returns_the_same_snapshot() {
        let history = Arc::new(vec![
            Message::user_text("prompt"),
            Message::assistant(vec![ContentPart::text("a")], Vec::new()),
            Message::user_text("next"),
        ]);
        assert!(Arc::ptr_eq(&merged(Arc::clone(&history)), &history));
    }

    #[test]
    fn the_latest_reminder_and_the_steps_since() {
        let history = vec![
            Message::user_text("<system-reminder>\nA old\n</system-reminder>"),
            Message::assistant(Vec::new(), Vec::new()),
            Message::user_text("x <system-reminder>\nA new\n</system-reminder>"),
            Message::assistant(Vec::new(), Vec::new()),
            Message::tool(
                "t",
                vec![ContentPart::text("<system-reminder>\nA tool\n</system-reminder>")],
            ),
            Message::assistant(Vec::new(), Vec::new()),
        ];
        let classify = |text: &str| opens_with(text, "A ").then_some(text.len());
        assert_eq!(latest(&history, classify), Some((history[2].text().len(), 2)));
        assert_eq!(latest(&history[..0], classify), None);
        assert_eq!(latest(&history, |t: &str| opens_with(t, "B").then_some(())), None);
    }

    #[test]
    fn the_cursor_reads_only_what_was_added_and_finds_what_a_whole_read_finds() {
        let reminder =
            |name: &str| Message::user_text(format!("<system-reminder>\nA {name}\n</system-reminder>"));
        let answer = || Message::assistant(Vec::new(), Vec::new());
        let history = vec![
            Message::user_text("prompt"),
            answer(),
            reminder("one"),
            answer(),
            Message::tool("t", vec![ContentPart::text("out")]),
            answer(),
            Message::user_text("steer"),
            reminder("two"),
            answer(),
            answer(),
        ];
        let classify = |text: &str| opens_with(text, "A ").then(|| text.to_owned());
        // Grown one message at a time, as a turn grows its context: the same answer as a whole read.
        let mut cursor = Cursor::default();
        for end in 0..=history.len() {
            let prefix = &history[..end];
            assert_eq!(
                cursor.latest(prefix, 7, classify),
                latest(prefix, classify),
                "after {end} messages"
            );
            assert_eq!(cursor.seen, end);
        }
        // Grown several at a time.
        let mut cursor = Cursor::default();
        for end in [1, 4, 6, 10] {
            let prefix = &history[..end];
            assert_eq!(
                cursor.latest(prefix, 7, classify),
                latest(prefix, classify),
                "after {end} messages"
            );
        }
        // Another history as long as the one read (a cleared context that grew again, another
        // context): its generation says so, and it is read whole.
        let other = vec![reminder("three"); history.len()];
        assert_eq!(
            cursor.latest(&other, 8, classify),
            Some(("<system-reminder>\nA three\n</system-reminder>".to_owned(), 0))
        );
        let none = vec![answer(); history.len() + 2];
        assert_eq!(cursor.latest(&none, 9, classify), None);
        // A shorter history is read whole even under the same generation.
        assert_eq!(
            cursor.latest(&history[..3], 9, classify),
            latest(&history[..3], classify)
        );
    }
}
