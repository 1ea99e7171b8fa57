//! De-duplication and repeat detection for the tool calls of one turn (seeds/000 §3).
//!
//! A pure state machine: the toolset tells it when a step begins, shows it every parsed call of the
//! step in call order, and tells it when the step's results are all in. It answers with a [`Verdict`]
//! per call and a [`StepVerdict`] per step. No I/O, no clocks, no async.
//!
//! # What it detects
//!
//! * **Same-step duplicates.** A call whose [`CallKey`] already ran earlier in the same step is not run
//!   again; it joins the first call and reuses its result ([`Verdict::JoinInFlight`]). This compares the
//!   arguments exactly (canonical JSON), since the joined call gets the first one's result.
//! * **Plain repeats across steps** (the reference behaviour). All calls since the last reset form one
//!   flat sequence, in step order and call order, same-step duplicates included. The *run* of a call is
//!   the number of repeated keys that end the sequence once the call is added: a different key restarts
//!   it at 1. Repeats are judged on the [`RepeatKey`], which also ignores how string arguments are
//!   spaced (`echo x`, `echo  x` and `echo x ` repeat each other; seeds/000 §7: the reference is fooled
//!   by a byte of difference). Several different calls in one step therefore leave only the last one's run alive. Only
//!   the first occurrence of a key in a step can carry a run above 1 that matters, and that is where the
//!   reminder lands.
//! * **Repeated whole steps and short cycles** (an improvement on the reference, seeds/000 §7: it never
//!   escalates `A, B, A, B, …` nor a step that keeps issuing the same two calls in parallel). Every step
//!   gets a *signature*: the set of distinct repeat keys it called. For a period `p` of 1 to 6 steps, let
//!   `m` be the number of most recent consecutive steps whose signature equals the signature `p` steps
//!   before it. The cycle's streak is `m + 1`, counted like a plain repeat: the first pass through the
//!   cycle is 1, and each later step that replays its counterpart from one period earlier adds one. A
//!   cycle of period 2 or more only counts once a whole period has been replayed (`m >= p`); before that
//!   it is indistinguishable from a revisit after other work. A loop of up to six different calls, one
//!   per step, is therefore caught. With one call per step and `p = 1` this
//!   is exactly the plain run; `p = 1` with several calls per step catches a repeated parallel batch.
//!
//! Progress is never mistaken for a cycle: a loop in which one call changes each time (`read, test,
//! edit(v1), read, test, edit(v2), …`) never replays a whole period, so its `m` stays below `p`.
//!
//! The reminder of a call is chosen from the larger of its projected run and its projected cycle streak
//! (the value the streak would reach if the step ended right after this call). The tiers are the
//! reference's (seeds/000 §3.4): gentle from 3, firm from 5, stop from 8, and at 12 the turn is forced
//! to end after the step ([`StepVerdict::ForceStop`]).
//!
//! # Resets
//!
//! Everything is forgotten when a step ends without any observed call (the reference resets when the
//! previous step's call list is empty) and on [`DedupTracker::reset`], which the loop calls at the start
//! of every turn. Calls the toolset rejects before observing them (unknown tool, unparseable arguments)
//! do not count, as in the reference.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use kimi_llm::{Dumps, dumps};
use kimi_wire::message::{ContentPart, ToolOutput, ToolReturnValue};
use serde_json::Value;

/// Streak from which a gentle reminder is appended (seeds/000 §3.4, reference `_REPEAT_REMINDER_1_START`).
pub const REMINDER_GENTLE_AT: u32 = 3;
/// Streak from which the firm reminder names the tool, the count and the arguments (seeds/000 §3.4).
pub const REMINDER_FIRM_AT: u32 = 5;
/// Streak from which the model is told to stop calling tools (seeds/000 §3.4).
pub const REMINDER_STOP_AT: u32 = 8;
/// Streak at which the turn is ended after the current step (seeds/000 §3.4, `_REPEAT_FORCE_STOP_STREAK`).
pub const FORCE_STOP_AT: u32 = 12;

/// Longest cycle, in steps, that is detected (a loop of up to six different calls).
const MAX_CYCLE_PERIOD: usize = 6;
/// Longest canonical argument text quoted in a firm reminder, in characters.
const MAX_QUOTED_ARGS_CHARS: usize = 1000;

/// What makes two calls "the same": the tool name and the canonical JSON of the parsed arguments.
///
/// Canonical JSON sorts object keys at every depth, writes no whitespace and keeps non-ASCII text as it
/// is (only `"`, `\` and control characters are escaped). Because it is built from the parsed value,
/// whitespace and key order in the model's argument text never make two calls differ.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CallKey {
    tool_name: String,
    canonical_args: String,
    repeat: RepeatKey,
}

/// What makes two calls repeat each other: the tool name and the canonical JSON of the arguments with
/// every string's whitespace collapsed (runs of whitespace become one space, none at either end).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RepeatKey {
    tool_name: String,
    loose_args: String,
}

impl CallKey {
    /// The key of a call to `tool_name` with the parsed arguments `args`.
    pub fn new(tool_name: &str, args: &Value) -> Self {
        let canonical_args = dumps(args, Dumps::CANONICAL);
        let loose_args = dumps(&collapse_strings(args), Dumps::CANONICAL);
        Self {
            tool_name: tool_name.to_owned(),
            canonical_args,
            repeat: RepeatKey {
                tool_name: tool_name.to_owned(),
                loose_args,
            },
        }
    }

    /// The key repeats are judged on.
    pub fn repeat_key(&self) -> &RepeatKey {
        &self.repeat
    }

    /// The tool the call goes to.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The arguments as canonical JSON.
    pub fn canonical_args(&self) -> &str {
        &self.canonical_args
    }
}

/// `value` with every string's runs of whitespace made one space, and none at either end.
fn collapse_strings(value: &Value) -> Value {
    match value {
        Value::String(text) => Value::String(text.split_whitespace().collect::<Vec<_>>().join(" ")),
        Value::Array(items) => Value::Array(items.iter().map(collapse_strings).collect()),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(key, item)| (key.clone(), collapse_strings(item)))
                .collect(),
        ),
        Value::Null | Value::Bool(_) | Value::Number(_) => value.clone(),
    }
}

/// What to do with one observed call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it; append `reminder` (if any) to the result text the model sees.
    Run {
        /// The escalating reminder this call earned, if it repeats earlier work.
        reminder: Option<Reminder>,
    },
    /// The same key already runs in this step: do not run again; reuse that call's result for this id.
    JoinInFlight {
        /// The id of the step's first call with the same key.
        first_tool_call_id: String,
    },
}

/// How loud a repeat reminder is; the three tiers of the reference (seeds/000 §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ReminderLevel {
    /// Streak of [`REMINDER_GENTLE_AT`] or more: look at the result and try something else.
    Gentle,
    /// Streak of [`REMINDER_FIRM_AT`] or more: names the tool, the count and the arguments.
    Firm,
    /// Streak of [`REMINDER_STOP_AT`] or more: stop calling tools and answer in text.
    Stop,
}

impl ReminderLevel {
    /// The tier for `streak`, or `None` below [`REMINDER_GENTLE_AT`].
    pub fn for_streak(streak: u32) -> Option<Self> {
        if streak >= REMINDER_STOP_AT {
            Some(Self::Stop)
        } else if streak >= REMINDER_FIRM_AT {
            Some(Self::Firm)
        } else if streak >= REMINDER_GENTLE_AT {
            Some(Self::Gentle)
        } else {
            None
        }
    }
}

/// A reminder to append to a call's result (see [`append_reminder`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reminder {
    /// The tier.
    pub level: ReminderLevel,
    /// The text to append, starting with a blank line and wrapped in `<system-reminder>` tags.
    pub text: String,
    /// The streak that chose the tier (for logs and telemetry).
    pub streak: u32,
    /// 1 for a repeated call or a repeated whole step, 2 or 3 for a cycle of that many steps.
    pub period: u32,
}

/// What the loop should do once a step's results are in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepVerdict {
    /// Carry on as usual.
    Continue,
    /// A call of this step reached [`FORCE_STOP_AT`]: end the turn after this step.
    ForceStop,
}

/// The kind of repetition a reminder is about; only changes the wording.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pattern {
    /// The same call, again and again.
    SameCall,
    /// The same set of calls, step after step.
    SameStep,
    /// The same few steps, going round.
    Cycle(u32),
}

impl Pattern {
    fn period(self) -> u32 {
        match self {
            Self::SameCall | Self::SameStep => 1,
            Self::Cycle(period) => period,
        }
    }
}

/// The trailing run of repeated keys in the flat call sequence.
#[derive(Debug, Clone, Default)]
struct Run {
    key: Option<RepeatKey>,
    len: u32,
}

impl Run {
    /// Adds `key` to the sequence and returns the new run length.
    fn push(&mut self, key: &RepeatKey) -> u32 {
        if self.key.as_ref() == Some(key) {
            self.len = self.len.saturating_add(1);
        } else {
            self.key = Some(key.clone());
            self.len = 1;
        }
        self.len
    }
}

/// The step being observed.
#[derive(Debug, Default)]
struct OpenStep {
    /// Whether `begin_step` (or an `observe`) opened a step that `end_step` has not closed yet.
    open: bool,
    /// The committed run advanced through this step's calls so far.
    run: Run,
    /// Each distinct key of the step and the id of its first call (joins are exact).
    first_ids: BTreeMap<CallKey, String>,
    /// The distinct repeat keys of the step so far (its signature).
    signature: BTreeSet<RepeatKey>,
    /// Whether a call of this step reached [`FORCE_STOP_AT`].
    force_stop: bool,
}

/// Tracks the calls of a turn, step by step, and decides joins, reminders and the forced stop.
#[derive(Debug, Default)]
pub struct DedupTracker {
    /// The run as of the last completed step.
    run: Run,
    /// Signatures of the last completed steps, oldest first, at most [`MAX_CYCLE_PERIOD`].
    history: VecDeque<BTreeSet<RepeatKey>>,
    /// `matches[p - 1]`: how many most recent completed steps in a row equal the step `p` before them.
    matches: [u32; MAX_CYCLE_PERIOD],
    step: OpenStep,
}

impl DedupTracker {
    /// A tracker with no history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Starts a step. Calling it again before [`end_step`](Self::end_step) (a retried step) discards
    /// what was observed since the previous call.
    pub fn begin_step(&mut self) {
        self.step = OpenStep {
            open: true,
            run: self.run.clone(),
            first_ids: BTreeMap::new(),
            signature: BTreeSet::new(),
            force_stop: false,
        };
    }

    /// Observes one call of the current step, in call order. Opens a step if none is open.
    pub fn observe(&mut self, key: &CallKey, tool_call_id: &str) -> Verdict {
        if !self.step.open {
            self.begin_step();
        }
        let run = self.step.run.push(key.repeat_key());
        if let Some(first) = self.step.first_ids.get(key) {
            return Verdict::JoinInFlight {
                first_tool_call_id: first.clone(),
            };
        }
        self.step.first_ids.insert(key.clone(), tool_call_id.to_owned());
        if !self.step.signature.insert(key.repeat_key().clone()) {
            // Spaced differently from an earlier call of this step: it extends the run, but the step's
            // signature (so its cycle streak) is unchanged and was already reported.
            return Verdict::Run {
                reminder: self.reminder(run, Pattern::SameCall, key),
            };
        }

        let (mut streak, mut pattern) = (run, Pattern::SameCall);
        if let Some((period, cycle_streak)) = self.projected_cycle()
            && cycle_streak > streak
        {
            streak = cycle_streak;
            pattern = if period == 1 {
                Pattern::SameStep
            } else {
                Pattern::Cycle(period)
            };
        }
        Verdict::Run {
            reminder: self.reminder(streak, pattern, key),
        }
    }

    /// The reminder a call with `streak` earns, recording a forced stop at [`FORCE_STOP_AT`].
    fn reminder(&mut self, streak: u32, pattern: Pattern, key: &CallKey) -> Option<Reminder> {
        if streak >= FORCE_STOP_AT {
            self.step.force_stop = true;
        }
        ReminderLevel::for_streak(streak).map(|level| Reminder {
            level,
            text: reminder_text(level, pattern, key, streak),
            streak,
            period: pattern.period(),
        })
    }

    /// Ends the step once all its results are in: advances the streaks, or forgets everything if the
    /// step made no calls. Calling it again without a new step only repeats the verdict.
    pub fn end_step(&mut self) -> StepVerdict {
        if self.step.open {
            self.step.open = false;
            self.step.first_ids.clear();
            let signature = std::mem::take(&mut self.step.signature);
            if signature.is_empty() {
                self.forget_history();
            } else {
                self.run = std::mem::take(&mut self.step.run);
                self.push_signature(signature);
            }
        }
        if self.step.force_stop {
            StepVerdict::ForceStop
        } else {
            StepVerdict::Continue
        }
    }

    /// Forgets everything (a new turn).
    pub fn reset(&mut self) {
        *self = Self::default();
    }

    /// The best cycle the open step completes with its latest call: `(period, projected streak)`.
    ///
    /// A step "completes" a period-`p` match when its distinct keys so far are exactly the keys of the
    /// step `p` before it. The set only grows, so this happens at most once per period and step.
    fn projected_cycle(&self) -> Option<(u32, u32)> {
        let keys = &self.step.signature;
        let mut best: Option<(u32, u32)> = None;
        for period in 1..=MAX_CYCLE_PERIOD {
            let Some(index) = self.history.len().checked_sub(period) else {
                break;
            };
            if self.history[index] != *keys {
                continue;
            }
            let replayed = self.matches[period - 1].saturating_add(1);
            let period = period as u32;
            if replayed < period {
                continue;
            }
            let streak = replayed.saturating_add(1);
            if best.is_none_or(|(_, s)| streak > s) {
                best = Some((period, streak));
            }
        }
        best
    }

    /// Records a completed step's signature and updates the per-period match counts.
    fn push_signature(&mut self, signature: BTreeSet<RepeatKey>) {
        for period in 1..=MAX_CYCLE_PERIOD {
            let same = self
                .history
                .len()
                .checked_sub(period)
                .is_some_and(|index| self.history[index] == signature);
            let count = &mut self.matches[period - 1];
            *count = if same { count.saturating_add(1) } else { 0 };
        }
        self.history.push_back(signature);
        while self.history.len() > MAX_CYCLE_PERIOD {
            self.history.pop_front();
        }
    }

    fn forget_history(&mut self) {
        self.run = Run::default();
        self.history.clear();
        self.matches = [0; MAX_CYCLE_PERIOD];
    }
}

/// The reminder text for `level`, in our own words (same intent and escalation as the reference).
fn reminder_text(level: ReminderLevel, pattern: Pattern, key: &CallKey, streak: u32) -> String {
    let body = match level {
        ReminderLevel::Gentle => {
            let what = match pattern {
                Pattern::SameCall => "You have now sent this exact tool call, with the same arguments, \
                                      several times in a row."
                    .to_owned(),
                Pattern::SameStep => "This step sends the same set of tool calls, with the same arguments, \
                                      as the steps before it."
                    .to_owned(),
                Pattern::Cycle(period) => format!(
                    "Your tool calls are going round in a loop: the same {period} steps, with the same \
                     arguments, keep coming back in the same order."
                ),
            };
            format!(
                "{what} Look again, carefully, at what those calls already returned. If the task is not \
                 done yet, change the approach or the arguments rather than sending the same thing again."
            )
        }
        ReminderLevel::Firm => {
            let what = match pattern {
                Pattern::SameCall => {
                    "The same tool call keeps coming back with identical arguments.".to_owned()
                }
                Pattern::SameStep => "The same batch of tool calls keeps coming back, step after step, with \
                                      identical arguments."
                    .to_owned(),
                Pattern::Cycle(period) => format!(
                    "Your tool calls are stuck in a loop of {period} steps that keeps coming back with \
                     identical arguments."
                ),
            };
            let name = key.tool_name();
            let args = quoted_args(key.canonical_args());
            format!(
                "{what} It is not moving the task forward.\n\
                 Repeated call:\n\
                 - tool: {name}\n\
                 - repeated_times: {streak}\n\
                 - arguments: {args}\n\
                 Do not send {name} these arguments again. Study the latest result, then take a \
                 different next step, use other arguments, or wrap the task up if what you have is \
                 already enough."
            )
        }
        ReminderLevel::Stop => "You are going in circles: the same tool calls keep coming back and nothing \
                                changes.\n\
                                Make no more tool calls. Your next reply must be plain text only.\n\
                                First work out, from the results you already have, why you are not getting \
                                anywhere. Then give the user what you have: the problem as it stands, what \
                                you have tried so far, and which information or decision you need in order \
                                to go on."
            .to_owned(),
    };
    format!("\n\n<system-reminder>\n{body}\n</system-reminder>")
}

/// `args`, cut to [`MAX_QUOTED_ARGS_CHARS`] characters so a huge payload does not flood the context.
fn quoted_args(args: &str) -> String {
    match args.char_indices().nth(MAX_QUOTED_ARGS_CHARS) {
        Some((cut, _)) => format!("{}… (truncated)", &args[..cut]),
        None => args.to_owned(),
    }
}

/// Appends `reminder` to what the model will read of `value`: to the text output, else to the last
/// part if it is text, else as a new text part (the reference's placement). Error results get it too.
pub fn append_reminder(value: &mut ToolReturnValue, reminder: &Reminder) {
    match &mut value.output {
        ToolOutput::Text(text) => text.push_str(&reminder.text),
        ToolOutput::Parts(parts) => match parts.last_mut() {
            Some(ContentPart::Text(part)) => part.text.push_str(&reminder.text),
            _ => parts.push(ContentPart::text(reminder.text.clone())),
        },
    }
}

#[cfg(test)]
mod tests {
    use kimi_wire::message::{ImageUrlPart, MediaUrl, TextPart};
    use serde_json::json;

    use super::*;

    /// The key a letter stands for in the scenario tables.
    fn key(letter: char) -> CallKey {
        let tool = if letter.is_ascii_uppercase() {
            "Shell"
        } else {
            "StrReplaceFile"
        };
        CallKey::new(
            tool,
            &json!({ "command": format!("probe {letter}"), "timeout": 60 }),
        )
    }

    fn symbol(verdict: &Verdict) -> char {
        match verdict {
            Verdict::Run { reminder: None } => '-',
            Verdict::Run { reminder: Some(r) } => match r.level {
                ReminderLevel::Gentle => 'g',
                ReminderLevel::Firm => 'f',
                ReminderLevel::Stop => 's',
            },
            Verdict::JoinInFlight { .. } => 'j',
        }
    }

    /// Plays `steps`: space-separated steps, one letter per call, `_` an empty step, `#` a `reset()`.
    /// Returns, per step, one symbol per call (`-` none, `g`/`f`/`s` reminder, `j` joined) followed by
    /// `!` if the step was force-stopped.
    fn play(steps: &str) -> String {
        let mut tracker = DedupTracker::new();
        let mut out = Vec::new();
        let mut next_id = 0;
        for step in steps.split(' ') {
            if step == "#" {
                tracker.reset();
                out.push("#".to_owned());
                continue;
            }
            tracker.begin_step();
            let mut symbols = String::new();
            for letter in step.chars().filter(|c| *c != '_') {
                next_id += 1;
                symbols.push(symbol(&tracker.observe(&key(letter), &format!("call_{next_id}"))));
            }
            if tracker.end_step() == StepVerdict::ForceStop {
                symbols.push('!');
            }
            out.push(if symbols.is_empty() {
                "_".to_owned()
            } else {
                symbols
            });
        }
        out.join(" ")
    }

    #[test]
    fn scenarios() {
        let rows: &[(&str, &str, &str)] = &[
            (
                "one call repeated: exact tier per step, force stop at 12",
                "A A A A A A A A A A A A",
                "- - g g f f f s s s s s!",
            ),
            (
                "a different call resets the streak",
                "A A A B A A A",
                "- - g - - - g",
            ),
            (
                "a step without calls resets everything",
                "A A A _ A A A",
                "- - g _ - - g",
            ),
            ("reset() forgets everything", "A A A A # A A A", "- - g g # - - g"),
            (
                "same-step duplicates join the first call",
                "AA BAB AAA",
                "-j --j -jj",
            ),
            (
                "same-step duplicates count toward the run (reference)",
                "AA AA AA",
                "-j gj fj",
            ),
            ("the first call of a step carries the run", "A A AB B", "- - g- -"),
            (
                "a call before it in the step breaks the run (reference)",
                "A A BA A",
                "- - -- -",
            ),
            (
                "repeat after other work does not escalate",
                "A A B A A C A A",
                "- - - - - - - -",
            ),
            (
                "the same parallel batch step after step escalates",
                "AB AB AB AB AB AB AB AB AB AB AB AB",
                "-- -- -g -g -f -f -f -s -s -s -s -s!",
            ),
            (
                "A/B cycle escalates once a whole period is replayed",
                "A B A B A B A B A B A B A",
                "- - - g g f f f s s s s s!",
            ),
            (
                "A/B/C cycle escalates once a whole period is replayed",
                "A B C A B C A B C A B C A B",
                "- - - - - g f f f s s s s s!",
            ),
            (
                "cycle of whole steps, reminder on the call completing the set",
                "AB C AB C AB C AB C AB",
                "-- - -- g -g f -f f -s",
            ),
            (
                "a cycle broken by other work starts over",
                "A B A B C A B A B",
                "- - - g - - - - g",
            ),
            (
                "read/test/edit loop with a new edit each time is progress",
                "A B a A B b A B c A B d A B e A B f",
                "- - - - - - - - - - - - - - - - - -",
            ),
            (
                "revisiting one call between new ones is progress",
                "A B A C A D A E A F",
                "- - - - - - - - - -",
            ),
            (
                "pairs of repeats do not add up, but their pattern is a loop of four steps",
                "A A B B A A B B A A",
                "- - - - - - - f f f",
            ),
            (
                "a loop of four different calls escalates once replayed whole",
                "A B C D A B C D A B C D A B C",
                "- - - - - - - f f f s s s s s!",
            ),
            (
                "a loop of six different calls escalates once replayed whole",
                "A B C D E F A B C D E F A B C D E",
                "- - - - - - - - - - - f s s s s s!",
            ),
            (
                "a loop of seven is beyond the detector",
                "A B C D E F G A B C D E F G A B C D E F G",
                "- - - - - - - - - - - - - - - - - - - - -",
            ),
        ];
        for (name, steps, expected) in rows {
            assert_eq!(play(steps), *expected, "{name}");
        }
    }

    #[test]
    fn string_spacing_does_not_hide_a_repeat_but_joins_stay_exact() {
        let shell = |command: &str| CallKey::new("Shell", &json!({ "command": command }));
        let spellings = ["echo x", "echo  x", "echo x ", "\techo\nx", "echo x"];
        let mut tracker = DedupTracker::new();
        let mut symbols = String::new();
        for (i, command) in spellings.iter().enumerate() {
            tracker.begin_step();
            symbols.push(symbol(&tracker.observe(&shell(command), &format!("call_{i}"))));
            tracker.end_step();
        }
        assert_eq!(symbols, "--ggf");
        assert_ne!(shell("echo x"), shell("echo  x"));
        assert_eq!(shell("echo x").repeat_key(), shell(" echo   x ").repeat_key());
        assert_ne!(shell("echo x").repeat_key(), shell("echox").repeat_key());

        // In one step, differently spaced calls both run (only an exact twin joins), and the run counts
        // both.
        let mut tracker = DedupTracker::new();
        tracker.begin_step();
        assert_eq!(
            tracker.observe(&shell("ls"), "a"),
            Verdict::Run { reminder: None }
        );
        assert_eq!(
            tracker.observe(&shell("ls "), "b"),
            Verdict::Run { reminder: None }
        );
        assert!(matches!(
            tracker.observe(&shell(" ls"), "c"),
            Verdict::Run {
                reminder: Some(Reminder { streak: 3, .. })
            }
        ));
        assert!(matches!(
            tracker.observe(&shell("ls "), "d"),
            Verdict::JoinInFlight { .. }
        ));
        assert_eq!(tracker.end_step(), StepVerdict::Continue);
    }

    #[test]
    fn whitespace_variants_reach_the_forced_stop() {
        let mut tracker = DedupTracker::new();
        let mut verdicts = Vec::new();
        for i in 0..FORCE_STOP_AT {
            let command = format!("make{}test", " ".repeat(1 + (i as usize % 3)));
            tracker.begin_step();
            tracker.observe(&CallKey::new("Shell", &json!({ "command": command })), "id");
            verdicts.push(tracker.end_step());
        }
        assert_eq!(verdicts.last(), Some(&StepVerdict::ForceStop));
        assert!(
            verdicts[..verdicts.len() - 1]
                .iter()
                .all(|v| *v == StepVerdict::Continue)
        );
    }

    #[test]
    fn join_names_the_first_call_of_the_step() {
        let mut tracker = DedupTracker::new();
        tracker.begin_step();
        assert_eq!(
            tracker.observe(&key('A'), "first"),
            Verdict::Run { reminder: None }
        );
        assert_eq!(
            tracker.observe(&key('B'), "other"),
            Verdict::Run { reminder: None }
        );
        let joined = Verdict::JoinInFlight {
            first_tool_call_id: "first".to_owned(),
        };
        assert_eq!(tracker.observe(&key('A'), "second"), joined);
        assert_eq!(tracker.observe(&key('A'), "third"), joined);
        assert_eq!(tracker.end_step(), StepVerdict::Continue);
        // Next step: the same key runs again instead of joining the old id.
        tracker.begin_step();
        assert!(matches!(tracker.observe(&key('A'), "fresh"), Verdict::Run { .. }));
    }

    #[test]
    fn a_retried_step_is_observed_once() {
        let mut tracker = DedupTracker::new();
        for _ in 0..2 {
            tracker.begin_step();
            tracker.observe(&key('A'), "a");
            tracker.end_step();
        }
        // The third step is attempted, fails, and is retried: the first attempt must not count.
        tracker.begin_step();
        tracker.observe(&key('A'), "a");
        tracker.begin_step();
        let Verdict::Run {
            reminder: Some(reminder),
        } = tracker.observe(&key('A'), "a")
        else {
            panic!("expected a reminder");
        };
        assert_eq!((reminder.level, reminder.streak), (ReminderLevel::Gentle, 3));
        // Ending twice advances once.
        tracker.end_step();
        tracker.end_step();
        tracker.begin_step();
        let Verdict::Run {
            reminder: Some(reminder),
        } = tracker.observe(&key('A'), "a")
        else {
            panic!("expected a reminder");
        };
        assert_eq!(reminder.streak, 4);
    }

    #[test]
    fn force_stop_is_reported_until_the_next_step() {
        let mut tracker = DedupTracker::new();
        for _ in 0..11 {
            tracker.begin_step();
            tracker.observe(&key('A'), "a");
            assert_eq!(tracker.end_step(), StepVerdict::Continue);
        }
        tracker.begin_step();
        tracker.observe(&key('A'), "a");
        // Another call after the repeated one does not cancel the stop (the projection decides).
        tracker.observe(&key('B'), "b");
        assert_eq!(tracker.end_step(), StepVerdict::ForceStop);
        assert_eq!(tracker.end_step(), StepVerdict::ForceStop);
        tracker.begin_step();
        assert_eq!(tracker.end_step(), StepVerdict::Continue);
    }

    #[test]
    fn canonical_arguments() {
        let rows: &[(&str, &str)] = &[
            (r#"{}"#, r#"{}"#),
            (r#"{ "b" : 2, "a" : 1 }"#, r#"{"a":1,"b":2}"#),
            (
                r#"{"z": {"y": [3, {"d": 1, "c": 2}], "x": null}}"#,
                r#"{"z":{"x":null,"y":[3,{"c":2,"d":1}]}}"#,
            ),
            (
                r#"{"path": "日本/ファイル.txt"}"#,
                r#"{"path":"日本/ファイル.txt"}"#,
            ),
            (
                r#"{"s": "quote \" back \\ nl \n tab \t bell \u0007"}"#,
                r#"{"s":"quote \" back \\ nl \n tab \t bell \u0007"}"#,
            ),
            (r#"[2, 1, true, false, 1.5]"#, r#"[2,1,true,false,1.5]"#),
            (r#""bare""#, r#""bare""#),
        ];
        for (input, expected) in rows {
            let args: Value = serde_json::from_str(input).unwrap();
            assert_eq!(CallKey::new("T", &args).canonical_args(), *expected, "{input}");
        }
    }

    #[test]
    fn key_equivalence() {
        let rows: &[(&str, &str, &str, &str, bool)] = &[
            (
                "Shell",
                r#"{"command":"ls","timeout":5}"#,
                "Shell",
                r#"{ "timeout": 5,  "command": "ls" }"#,
                true,
            ),
            (
                "Grep",
                "{\n  \"a\": {\"y\": 1, \"x\": 2}\n}",
                "Grep",
                r#"{"a":{"x":2,"y":1}}"#,
                true,
            ),
            (
                "Shell",
                r#"{"command":"ls"}"#,
                "Shell",
                r#"{"command":"ls "}"#,
                false,
            ),
            ("Shell", r#"{"list":[1,2]}"#, "Shell", r#"{"list":[2,1]}"#, false),
            (
                "Shell",
                r#"{"command":"ls"}"#,
                "ReadFile",
                r#"{"command":"ls"}"#,
                false,
            ),
        ];
        for (tool_a, args_a, tool_b, args_b, same) in rows {
            let a = CallKey::new(tool_a, &serde_json::from_str(args_a).unwrap());
            let b = CallKey::new(tool_b, &serde_json::from_str(args_b).unwrap());
            assert_eq!(a == b, *same, "{tool_a} {args_a} vs {tool_b} {args_b}");
        }
        // Equal keys are repeats for the tracker, whatever the original spelling.
        let mut tracker = DedupTracker::new();
        let spellings = [
            r#"{"a":1,"b":2}"#,
            r#"{"b":2,"a":1}"#,
            "{ \"a\" :1 ,\n \"b\": 2 }",
        ];
        let mut last = None;
        for args in spellings {
            tracker.begin_step();
            last = Some(tracker.observe(&CallKey::new("T", &serde_json::from_str(args).unwrap()), "id"));
            tracker.end_step();
        }
        assert!(matches!(
            last,
            Some(Verdict::Run {
                reminder: Some(Reminder { streak: 3, .. })
            })
        ));
    }

    /// The reminder of the `n`-th identical call in a row.
    fn reminder_at(steps: &[CallKey]) -> Reminder {
        let mut tracker = DedupTracker::new();
        let mut last = None;
        for key in steps {
            tracker.begin_step();
            last = Some(tracker.observe(key, "id"));
            tracker.end_step();
        }
        match last {
            Some(Verdict::Run {
                reminder: Some(reminder),
            }) => reminder,
            other => panic!("no reminder: {other:?}"),
        }
    }

    #[test]
    fn reminder_texts() {
        let key = CallKey::new("Grep", &json!({"pattern": "fn main", "path": "src/ü"}));
        let repeat = |n| reminder_at(&vec![key.clone(); n]);

        let gentle = repeat(3);
        assert_eq!((gentle.level, gentle.period), (ReminderLevel::Gentle, 1));
        assert!(gentle.text.starts_with("\n\n<system-reminder>\n"));
        assert!(gentle.text.ends_with("\n</system-reminder>"));

        let firm = repeat(6);
        assert_eq!(firm.level, ReminderLevel::Firm);
        assert!(firm.text.contains("- tool: Grep\n"), "{}", firm.text);
        assert!(firm.text.contains("- repeated_times: 6\n"), "{}", firm.text);
        assert!(
            firm.text
                .contains(r#"- arguments: {"path":"src/ü","pattern":"fn main"}"#),
            "{}",
            firm.text
        );

        let stop = repeat(8);
        assert_eq!(stop.level, ReminderLevel::Stop);
        assert!(stop.text.contains("Make no more tool calls"));
        assert!(stop.text.contains("plain text only"));
        assert_eq!(repeat(12).text, stop.text);

        let other = CallKey::new("ReadFile", &json!({"path": "a"}));
        let cycle: Vec<CallKey> = [&key, &other].into_iter().cycle().take(6).cloned().collect();
        let firm_cycle = reminder_at(&cycle);
        assert_eq!(
            (firm_cycle.level, firm_cycle.period, firm_cycle.streak),
            (ReminderLevel::Firm, 2, 5)
        );
        assert!(firm_cycle.text.contains("loop of 2 steps"), "{}", firm_cycle.text);
        assert!(
            firm_cycle.text.contains("- tool: ReadFile\n"),
            "{}",
            firm_cycle.text
        );

        let huge = CallKey::new("WriteFile", &json!({"content": "x".repeat(5000)}));
        let firm_huge = reminder_at(&vec![huge; 5]);
        assert!(firm_huge.text.contains("… (truncated)"));
        assert!(firm_huge.text.len() < 2000);
    }

    #[test]
    fn append_reminder_placement() {
        let reminder = Reminder {
            level: ReminderLevel::Gentle,
            text: "\n\nR".to_owned(),
            streak: 3,
            period: 1,
        };
        let image = ContentPart::ImageUrl(ImageUrlPart {
            image_url: MediaUrl::new("data:image/png;base64,AA=="),
        });
        let text = |t: &str| ContentPart::Text(TextPart { text: t.to_owned() });
        let rows: Vec<(&str, ToolOutput, ToolOutput)> = vec![
            (
                "text output",
                ToolOutput::Text("out".into()),
                ToolOutput::Text("out\n\nR".into()),
            ),
            (
                "empty text output",
                ToolOutput::Text(String::new()),
                ToolOutput::Text("\n\nR".into()),
            ),
            (
                "last part is text",
                ToolOutput::Parts(vec![image.clone(), text("a")]),
                ToolOutput::Parts(vec![image.clone(), text("a\n\nR")]),
            ),
            (
                "last part is media",
                ToolOutput::Parts(vec![text("a"), image.clone()]),
                ToolOutput::Parts(vec![text("a"), image, text("\n\nR")]),
            ),
            (
                "no parts",
                ToolOutput::Parts(Vec::new()),
                ToolOutput::Parts(vec![text("\n\nR")]),
            ),
        ];
        for (name, output, expected) in rows {
            let mut value = ToolReturnValue::ok(output, "msg");
            append_reminder(&mut value, &reminder);
            assert_eq!(value.output, expected, "{name}");
            assert_eq!(value.message, "msg", "{name}");
        }
    }
}
