//! The sandbox's reminder (docs/sandbox.md; the reference has no sandbox, the words are ours).
//!
//! A model that does not know its commands are confined wastes steps on writes and downloads that
//! cannot succeed, or hunts for a way around them. So while a sandbox confines anything, the model is
//! told what it may write and whether it has the network, whenever the latest sandbox reminder in the
//! history does not say exactly that: at the first call, after `/add-dir` changed the roots, after a
//! restart under another mode, after a compaction summarised it away. When the sandbox is off again
//! (a session resumed without one) and the latest reminder said it was on: that it is off.

use kimi_wire::params::SandboxInfo;

use super::{Cursor, Injection, ModeFacts};
use crate::tool_names::ToolNames;

/// How every sandbox reminder begins.
const OPENING: &str = "Sandbox: ";

/// The sandbox provider: what the model was told is in the history; it only remembers how far it read.
#[derive(Debug, Default)]
pub(super) struct SandboxReminder {
    cursor: Cursor<String>,
}

impl SandboxReminder {
    /// The reminder due under `facts.sandbox` (`None`: no session, hence nothing confined), with the
    /// tools named as `names` says, since the history holds the texts as the model read them.
    pub(super) fn due(&mut self, facts: &ModeFacts<'_>, names: ToolNames) -> Option<Injection> {
        let told = self
            .cursor
            .latest(facts.history, facts.generation, told_text)
            .map(|(text, _)| text);
        let (kind, text) = match facts.sandbox.filter(|s| confines_anything(s)) {
            Some(sandbox) => ("sandbox", names.apply(&on_text(sandbox)).into_owned()),
            None if told.as_deref().is_some_and(|t| t != off_text()) => ("sandbox_off", off_text()),
            None => return None,
        };
        (told.as_deref() != Some(text.as_str())).then_some(Injection { kind, text })
    }
}

/// Whether commands are confined at all: files, the network, or refused outright.
fn confines_anything(sandbox: &SandboxInfo) -> bool {
    sandbox.writable_roots.is_some() || !sandbox.network || sandbox.error.is_some()
}

/// The text of the sandbox reminder in `message_text`, up to its closing tag.
fn told_text(message_text: &str) -> Option<String> {
    let open = format!("<system-reminder>\n{OPENING}");
    let at = message_text.find(&open)? + "<system-reminder>\n".len();
    let rest = &message_text[at..];
    let end = rest.find("\n</system-reminder>").unwrap_or(rest.len());
    Some(rest[..end].to_owned())
}

fn on_text(sandbox: &SandboxInfo) -> String {
    let network = if sandbox.network { "on" } else { "off" };
    let mut text = format!(
        "{OPENING}{}, network {network}. The commands you run with Shell, and everything they start, are \
         confined by the kernel.",
        sandbox.mode
    );
    if let Some(error) = &sandbox.error {
        text.push_str(&format!(
            "\n- The sandbox cannot be enforced on this machine ({error}), so every Shell command is \
             refused. Do not retry them: do what you can with the other tools, and tell the user what \
             needed a command."
        ));
    }
    if let Some(roots) = &sandbox.writable_roots {
        let roots: Vec<String> = roots.iter().map(|root| format!("`{root}`")).collect();
        text.push_str(&format!(
            "\n- Commands, WriteFile and StrReplaceFile may write only in: {}. Anywhere else a write fails \
             (`Permission denied`). Do not look for a way around it: work inside these, and tell the user \
             what would have to be written elsewhere.",
            roots.join(", ")
        ));
    }
    if !sandbox.network {
        text.push_str(
            "\n- Commands have no network: no connection succeeds, localhost included, so downloads, \
             package installs and servers you start cannot be reached. FetchURL and SearchWeb are not \
             available.",
        );
    }
    text
}

fn off_text() -> String {
    format!("{OPENING}off. Earlier limits on where commands may write and on their network no longer apply.")
}

#[cfg(test)]
mod tests {
    use kimi_llm::Message;
    use kimi_wire::message::ContentPart;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::reminders::{PlanFacts, message};

    fn sandbox(mode: &str, network: bool, roots: Option<&[&str]>) -> SandboxInfo {
        SandboxInfo {
            mode: mode.to_owned(),
            network,
            enforced: true,
            landlock_abi: Some(7),
            writable_roots: roots.map(|r| r.iter().map(|s| (*s).to_owned()).collect()),
            error: None,
        }
    }

    fn facts<'a>(history: &'a [Message], generation: u64, sandbox: Option<&'a SandboxInfo>) -> ModeFacts<'a> {
        ModeFacts {
            history,
            generation,
            plan: PlanFacts::default(),
            afk: false,
            sandbox,
        }
    }

    /// A step of [`play`].
    #[derive(Clone)]
    enum Step {
        /// A model call under this sandbox (`None`: no session).
        Call(Option<SandboxInfo>),
        /// A compaction that empties the history.
        Compact,
    }

    /// Plays `steps`; returns the kind of reminder each call got, `_` for none.
    fn play(steps: &[Step], names: ToolNames) -> Vec<&'static str> {
        let mut provider = SandboxReminder::default();
        let mut history: Vec<Message> = Vec::new();
        let mut generation = 0;
        let mut out = Vec::new();
        for step in steps {
            let Step::Call(sandbox) = step else {
                history.clear();
                generation += 1;
                continue;
            };
            let due = provider.due(&facts(&history, generation, sandbox.as_ref()), names);
            out.push(due.as_ref().map_or("_", |i| i.kind));
            history.extend(due.and_then(|i| message(&[i])));
            history.push(Message::assistant(vec![ContentPart::text("ok")], Vec::new()));
        }
        out
    }

    #[test]
    fn told_when_what_it_was_told_differs_from_what_holds() {
        let ws = Step::Call(Some(sandbox("workspace-write", true, Some(&["/w", "/tmp"]))));
        let added = Step::Call(Some(sandbox(
            "workspace-write",
            true,
            Some(&["/w", "/extra", "/tmp"]),
        )));
        let off = Step::Call(Some(sandbox("danger-full-access", true, None)));
        let rows = [
            (
                "never sandboxed",
                vec![off.clone(), Step::Call(None)],
                vec!["_", "_"],
            ),
            (
                "sandboxed: told once",
                vec![ws.clone(), ws.clone(), ws.clone()],
                vec!["sandbox", "_", "_"],
            ),
            (
                "a root added: told again",
                vec![ws.clone(), added.clone(), added],
                vec!["sandbox", "sandbox", "_"],
            ),
            (
                "resumed without a sandbox: told once it is off",
                vec![ws.clone(), off.clone(), off],
                vec!["sandbox", "sandbox_off", "_"],
            ),
            (
                "a compaction that lost it: told again",
                vec![ws.clone(), Step::Compact, ws],
                vec!["sandbox", "sandbox"],
            ),
        ];
        for (name, steps, expected) in rows {
            assert_eq!(play(&steps, ToolNames::REFERENCE), expected, "{name}");
        }
    }

    #[test]
    fn renamed_tools_are_compared_as_the_model_read_them() {
        const NAMES: ToolNames = ToolNames::new(&[("Shell", "Bash"), ("WriteFile", "Write")]);
        let ws = sandbox("workspace-write", false, Some(&["/w"]));
        let call = Step::Call(Some(ws.clone()));
        assert_eq!(play(&[call.clone(), call], NAMES), ["sandbox", "_"]);
        let due = SandboxReminder::default().due(&facts(&[], 0, Some(&ws)), NAMES);
        let text = due.map(|i| i.text).unwrap_or_default();
        assert!(
            text.contains("run with Bash") && text.contains("Write and"),
            "{text}"
        );
    }

    #[test]
    fn the_text_says_what_may_be_written_and_whether_there_is_network() {
        let text = on_text(&sandbox("workspace-write", false, Some(&["/w", "/tmp"])));
        assert_eq!(
            text.lines().collect::<Vec<_>>(),
            [
                "Sandbox: workspace-write, network off. The commands you run with Shell, and everything \
                 they start, are confined by the kernel.",
                "- Commands, WriteFile and StrReplaceFile may write only in: `/w`, `/tmp`. Anywhere else a \
                 write fails (`Permission denied`). Do not look for a way around it: work inside these, and \
                 tell the user what would have to be written elsewhere.",
                "- Commands have no network: no connection succeeds, localhost included, so downloads, \
                 package installs and servers you start cannot be reached. FetchURL and SearchWeb are not \
                 available.",
            ]
        );
        // The network alone cut: nothing said of files.
        let text = on_text(&sandbox("danger-full-access", false, None));
        assert!(!text.contains("write only"), "{text}");
        // Unenforceable: every command is refused, and the model is told so.
        let mut broken = sandbox("read-only", true, Some(&["/private"]));
        broken.error = Some("no Landlock".into());
        let text = on_text(&broken);
        assert!(
            text.contains("(no Landlock), so every Shell command is refused"),
            "{text}"
        );
        assert!(confines_anything(&broken));
    }
}
