//! Plan mode's reminders (reference `dynamic_injections/plan_mode.py`; our words).
//!
//! * When plan mode is turned on (`set_plan_mode`, `/plan`, an approved EnterPlanMode) or found on at
//!   start (a restart, `--plan`): the full rules and the plan file, or the re-entry text when the plan
//!   file already exists.
//! * While it stays on: after every [`EVERY_STEPS`] model answers without one, a short reminder; every
//!   [`FULL_EVERY`]th of them is the full text again. When the history holds none (a compaction
//!   summarised it away), the full text.
//! * When it is off again and the model's latest plan-mode reminder said it was on: that it is off.

use super::{Cursor, Injection, ModeFacts, PlanFacts, opens_with};

/// Model answers between two periodic reminders (reference `_TURN_INTERVAL`).
pub(super) const EVERY_STEPS: usize = 5;
/// Every this many periodic reminders, the full text instead of the short one (reference
/// `_FULL_EVERY_N`).
pub(super) const FULL_EVERY: u32 = 5;

/// How the reminders saying that plan mode is on begin (the full and the re-entry text).
const ON: &str = "Plan mode is on";
/// How the short reminder begins.
const STILL_ON: &str = "Plan mode is still on";
/// How the reminder that plan mode is over begins.
const OFF: &str = "Plan mode is off";

/// What the model's latest plan-mode reminder said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Told {
    On,
    Off,
}

fn told(text: &str) -> Option<Told> {
    if opens_with(text, OFF) {
        Some(Told::Off)
    } else if opens_with(text, ON) || opens_with(text, STILL_ON) {
        Some(Told::On)
    } else {
        None
    }
}

/// The plan-mode provider; its state is how many reminders this plan session has had, and how far it
/// read the history.
#[derive(Debug, Default)]
pub(super) struct PlanModeReminder {
    count: u32,
    cursor: Cursor<Told>,
}

impl PlanModeReminder {
    pub(super) fn due(&mut self, facts: &ModeFacts<'_>) -> Option<Injection> {
        let plan = &facts.plan;
        let latest = self.cursor.latest(facts.history, facts.generation, told);
        let told_on = matches!(latest, Some((Told::On, _)));
        if !plan.on {
            self.count = 0;
            return told_on.then(|| Injection {
                kind: "plan_mode_off",
                text: off_text(),
            });
        }
        if plan.entered || !told_on {
            self.count = 1;
            return Some(if plan.entered && plan.file_exists {
                Injection {
                    kind: "plan_mode_reentry",
                    text: reentry_text(plan),
                }
            } else {
                Injection {
                    kind: "plan_mode",
                    text: full_text(plan),
                }
            });
        }
        let since = latest.map_or(0, |(_, n)| n);
        if since < EVERY_STEPS {
            return None;
        }
        self.count += 1;
        let text = if self.count % FULL_EVERY == 1 {
            full_text(plan)
        } else {
            short_text(plan)
        };
        Some(Injection {
            kind: "plan_mode",
            text,
        })
    }
}

fn path_of(plan: &PlanFacts<'_>) -> String {
    plan.file
        .map_or_else(|| "(none)".to_owned(), |p| p.display().to_string())
}

const RULE: &str = "Until it is turned off, change nothing: no edits except to the plan file named \
below, no tools or commands that change anything, nothing else that alters the system. This overrides \
any other instruction you have been given.";

fn full_text(plan: &PlanFacts<'_>) -> String {
    let path = path_of(plan);
    let file = if plan.file_exists {
        format!(
            "Plan file: {path} (it exists: read it first, then change it with WriteFile or StrReplaceFile)."
        )
    } else {
        format!(
            "Plan file: {path} (it does not exist yet: create it with WriteFile; after that, change it with \
             WriteFile or StrReplaceFile)."
        )
    };
    format!(
        "{ON}. {RULE}\n\
         \n\
         {file}\n\
         It is the only file you may change.\n\
         \n\
         How to work:\n\
         1. Explore: read the code that matters, with Glob, Grep and ReadFile.\n\
         2. Decide: weigh the options and settle on one approach you recommend.\n\
         3. Check: read the key files again to confirm what the plan relies on.\n\
         4. Write: put the plan in the plan file (with WriteFile while it does not exist).\n\
         5. Submit: call ExitPlanMode so the user can approve the plan.\n\
         \n\
         Several approaches: keep to two or three that really differ, and only when the best one depends on \
         something you cannot know. When the user's preference decides it, ask with AskUserQuestion first: a \
         focused plan beats a menu. If the plan does keep several approaches, pass them as the `options` of \
         ExitPlanMode so the user can pick one; never leave several approaches in the plan without `options`.\n\
         \n\
         AskUserQuestion is for missing requirements and preferences that shape the plan, never for its \
         approval: the user only sees the plan through ExitPlanMode. End your turn with AskUserQuestion (to \
         clear something up) or with ExitPlanMode (to have the plan approved), and in no other way."
    )
}

fn short_text(plan: &PlanFacts<'_>) -> String {
    let path = path_of(plan);
    format!(
        "{STILL_ON} (the full rules were given earlier). Change nothing but the plan file ({path}): create it \
         with WriteFile if it does not exist, then change it with WriteFile or StrReplaceFile. Ask with \
         AskUserQuestion when a preference shapes the plan; pass several approaches to ExitPlanMode as \
         `options`. End the turn with AskUserQuestion or ExitPlanMode, never by asking for approval in text."
    )
}

fn reentry_text(plan: &PlanFacts<'_>) -> String {
    let path = path_of(plan);
    format!(
        "{ON} again. {RULE}\n\
         \n\
         A plan from an earlier planning session is in {path}.\n\
         Before you go on:\n\
         1. Read it to see what was planned.\n\
         2. Compare it with what the user asks for now.\n\
         3. A different task: replace the old plan with a new one. The same task: update it.\n\
         4. Change the plan file with WriteFile or StrReplaceFile; it is the only file you may change.\n\
         5. Ask with AskUserQuestion about requirements or preferences that shape the plan.\n\
         6. Update the plan file before you call ExitPlanMode.\n\
         \n\
         End your turn with AskUserQuestion (to clear something up) or with ExitPlanMode (to have the plan \
         approved)."
    )
}

fn off_text() -> String {
    format!(
        "{OFF}. Its rules no longer apply: you may edit files and run commands again, with the usual \
         approvals. If the user approved a plan, carry it out; otherwise go on with what the user asks."
    )
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use kimi_llm::Message;
    use kimi_wire::message::ContentPart;
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::reminders::message;

    const FILE: &str = "/home/u/.kimi/plans/amber-birch-cedar.md";

    fn facts<'a>(
        history: &'a [Message],
        generation: u64,
        on: bool,
        entered: bool,
        exists: bool,
    ) -> ModeFacts<'a> {
        ModeFacts {
            history,
            generation,
            plan: PlanFacts {
                on,
                entered,
                file: on.then_some(Path::new(FILE)),
                file_exists: exists,
            },
            afk: false,
            sandbox: None,
        }
    }

    /// Plays `steps` against one provider: `+` turns plan mode on, `-` off, `x` makes the plan file exist,
    /// `.` is a model call (a reminder, if due, then the model's answer), `c` a compaction (the history
    /// is emptied). Returns, per model call, the kind it got (`_` none) and whether the text was the
    /// full (`F`), short (`S`), re-entry (`R`) or off (`O`) one.
    fn play(steps: &str) -> String {
        let mut provider = PlanModeReminder::default();
        let mut history: Vec<Message> = Vec::new();
        let mut generation = 0;
        let (mut on, mut entered, mut exists) = (false, false, false);
        let mut out = String::new();
        for step in steps.chars() {
            match step {
                '+' => {
                    entered |= !on;
                    on = true;
                }
                '-' => on = false,
                'x' => exists = true,
                'c' => {
                    history.clear();
                    generation += 1;
                }
                '.' => {
                    let due = provider.due(&facts(
                        &history,
                        generation,
                        on,
                        std::mem::take(&mut entered),
                        exists,
                    ));
                    out.push(match due.as_ref().map(|i| (i.kind, i.text.as_str())) {
                        None => '_',
                        Some(("plan_mode_off", _)) => 'O',
                        Some(("plan_mode_reentry", _)) => 'R',
                        Some((_, text)) if text.starts_with(STILL_ON) => 'S',
                        Some(_) => 'F',
                    });
                    if let Some(message) = due.as_ref().and_then(|i| message(std::slice::from_ref(i))) {
                        history.push(message);
                    }
                    history.push(Message::assistant(vec![ContentPart::text("ok")], Vec::new()));
                }
                other => panic!("unknown step {other}"),
            }
        }
        out
    }

    #[test]
    fn when_each_reminder_fires() {
        let long = format!("+{}", ".".repeat(27));
        let rows: &[(&str, &str, &str)] = &[
            ("never on: nothing, ever", "......", "______"),
            ("turned on: the full text once", "+...", "F__"),
            (
                "while on: a short reminder after every five answers, the full one every fifth time",
                &long,
                "F____S____S____S____S____F_",
            ),
            ("turned off after being told: once", "+..-...", "F_O__"),
            ("turned on and off between two calls: nothing", ".+-..", "___"),
            ("on again: told again", "+.-.+.", "FOF"),
            (
                "on again with the plan written: the re-entry text",
                "+.-.x+.",
                "FOR",
            ),
            (
                "a compaction that lost the reminder: the full text",
                "+..c.",
                "F_F",
            ),
        ];
        for (name, steps, expected) in rows {
            assert_eq!(play(steps), *expected, "{name}");
        }
    }

    #[test]
    fn a_restart_in_plan_mode_is_announced_even_if_the_history_says_so() {
        let mut provider = PlanModeReminder::default();
        let told = message(&[Injection {
            kind: "plan_mode",
            text: full_text(&facts(&[], 0, true, false, false).plan),
        }]);
        let history: Vec<Message> = told.into_iter().collect();
        // `entered` is what PlanMode reports for a session restored in plan mode.
        let due = provider.due(&facts(&history, 0, true, true, true));
        assert_eq!(due.map(|i| i.kind), Some("plan_mode_reentry"));
        let mut provider = PlanModeReminder::default();
        assert_eq!(provider.due(&facts(&history, 0, true, false, true)), None);
    }

    #[test]
    fn texts_name_the_plan_file_and_how_to_start_it() {
        let absent = full_text(&facts(&[], 0, true, false, false).plan);
        assert!(absent.starts_with("Plan mode is on. "), "{absent}");
        assert!(absent.contains(&format!(
            "Plan file: {FILE} (it does not exist yet: create it with WriteFile"
        )));
        assert!(absent.contains("ExitPlanMode"));
        let present = full_text(&facts(&[], 0, true, false, true).plan);
        assert!(present.contains(&format!("Plan file: {FILE} (it exists: read it first")));
        let short = short_text(&facts(&[], 0, true, false, true).plan);
        assert!(short.contains(FILE), "{short}");
        let reentry = reentry_text(&facts(&[], 0, true, true, true).plan);
        assert!(reentry.contains(&format!("earlier planning session is in {FILE}.")));
        for text in [&absent, &present, &short, &reentry] {
            assert_eq!(
                told(&format!("<system-reminder>\n{text}\n</system-reminder>")),
                Some(Told::On)
            );
        }
        assert_eq!(
            told(&format!("<system-reminder>\n{}\n</system-reminder>", off_text())),
            Some(Told::Off)
        );
        assert_eq!(
            told("Plan mode is on, the user says"),
            None,
            "only inside the tags"
        );
    }
}
