//! Afk mode's reminders (reference `dynamic_injections/afk_mode.py` and the `/afk` off text; our words).
//!
//! While afk is on and the model's latest afk reminder does not say so (never told, told it was over,
//! or summarised away by a compaction): nobody is at the keyboard. When afk is off and the latest one
//! said it was on: somebody is back.

use super::{Cursor, Injection, ModeFacts, opens_with};

/// How the afk reminder begins.
const ON: &str = "Nobody is at the keyboard";
/// How the reminder that afk is over begins.
const OFF: &str = "Afk mode is off";

/// The afk provider: what the model was told is in the history; it only remembers how far it read.
#[derive(Debug, Default)]
pub(super) struct AfkReminder {
    cursor: Cursor<bool>,
}

impl AfkReminder {
    pub(super) fn due(&mut self, facts: &ModeFacts<'_>) -> Option<Injection> {
        let told_on = self
            .cursor
            .latest(facts.history, facts.generation, |text| {
                if opens_with(text, ON) {
                    Some(true)
                } else if opens_with(text, OFF) {
                    Some(false)
                } else {
                    None
                }
            })
            .is_some_and(|(on, _)| on);
        match (facts.afk, told_on) {
            (true, false) => Some(Injection {
                kind: "afk_mode",
                text: on_text(),
            }),
            (false, true) => Some(Injection {
                kind: "afk_mode_off",
                text: off_text(),
            }),
            _ => None,
        }
    }
}

fn on_text() -> String {
    format!(
        "{ON}: afk mode is on. No one can answer a question or approve an action, and every tool call is \
         approved automatically.\n\
         - Do not call AskUserQuestion: it is dismissed without an answer, and the turn is wasted. Decide for \
         yourself and go on.\n\
         - EnterPlanMode and ExitPlanMode still work and are approved automatically; planning first still \
         pays off on a larger task, then leave plan mode and do the work.\n\
         - Finish the whole request in this run; leave no decision waiting for a person."
    )
}

fn off_text() -> String {
    format!(
        "{OFF}: the user is back and can answer AskUserQuestion again.\n\
         - Earlier reminders saying that nobody is present, or that you must not ask questions, no longer \
         apply.\n\
         - Ask only when the answer really changes what you do next: no routine confirmations, no progress \
         check-ins.\n\
         - Tool calls are no longer approved automatically because of afk (yolo mode, if it is on, still \
         approves them)."
    )
}

#[cfg(test)]
mod tests {
    use kimi_llm::Message;
    use kimi_wire::message::ContentPart;

    use super::*;
    use crate::reminders::{PlanFacts, message};

    /// Plays `steps`: `a` turns afk on, `h` off (somebody is here), `.` a model call, `c` a compaction.
    /// Returns per model call `A` (afk reminder), `H` (afk is over) or `_`.
    fn play(steps: &str) -> String {
        let mut provider = AfkReminder::default();
        let mut history: Vec<Message> = Vec::new();
        let mut generation = 0;
        let mut afk = false;
        let mut out = String::new();
        for step in steps.chars() {
            match step {
                'a' => afk = true,
                'h' => afk = false,
                'c' => {
                    history.clear();
                    generation += 1;
                }
                '.' => {
                    let facts = ModeFacts {
                        history: &history,
                        generation,
                        plan: PlanFacts::default(),
                        afk,
                        sandbox: None,
                    };
                    let due = provider.due(&facts);
                    out.push(match due.as_ref().map(|i| i.kind) {
                        Some("afk_mode") => 'A',
                        Some(_) => 'H',
                        None => '_',
                    });
                    history.extend(due.and_then(|i| message(&[i])));
                    history.push(Message::assistant(vec![ContentPart::text("ok")], Vec::new()));
                }
                other => panic!("unknown step {other}"),
            }
        }
        out
    }

    #[test]
    fn when_each_reminder_fires() {
        let rows: &[(&str, &str, &str)] = &[
            ("never afk", "....", "____"),
            ("afk from the start: told once", "a....", "A___"),
            ("back: told once", "a..h...", "A_H__"),
            ("away again: told again", "a.h.a.", "AHA"),
            ("on and off between two calls: nothing", ".ah..", "___"),
            ("a compaction that lost it: told again", "a..c.", "A_A"),
        ];
        for (name, steps, expected) in rows {
            assert_eq!(play(steps), *expected, "{name}");
        }
    }

    #[test]
    fn texts_say_what_the_model_must_do() {
        assert!(on_text().contains("Do not call AskUserQuestion"));
        assert!(off_text().contains("can answer AskUserQuestion again"));
    }
}
