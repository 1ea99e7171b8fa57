//! Streamed tool-call deltas turned into [`StreamEvent::ToolCall`] and
//! [`StreamEvent::ToolCallPart`] events.
//!
//! A chat-completions stream describes each tool call in pieces: the first
//! delta usually carries `id` and `function.name`, later ones only
//! `function.arguments`, all tagged with the call's `index`. Gateways differ:
//! some reuse index 0 for every call (so only the id tells calls apart), some
//! repeat the id and name on every delta, some send an empty id on
//! continuation deltas. So a delta is routed by its id first, then by its
//! index, and otherwise continues the most recent call.
//!
//! The events are flat (a `ToolCallPart` extends the most recent
//! `ToolCall`), and the loop starts a call as soon as the next one begins. A
//! call is therefore announced once its name is known, and arguments that
//! arrive for an earlier call after a later one was announced cannot be
//! delivered: that is reported as an error rather than silently running a
//! call with half its arguments. No known server interleaves calls this way.

use std::collections::HashMap;

use kimi_wire::message::{ToolCall, ToolCallPart};

use crate::{ChatError, StreamEvent};

/// One tool-call fragment as a chunk carries it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ToolCallDelta<'a> {
    /// Position of the call in the message, when the server gives one.
    pub index: Option<u64>,
    /// The call's id; empty counts as absent.
    pub id: Option<&'a str>,
    /// The function name; empty counts as absent.
    pub name: Option<&'a str>,
    /// The next piece of the arguments text.
    pub arguments: Option<&'a str>,
}

#[derive(Debug)]
struct Call {
    id: String,
    name: Option<String>,
    /// Arguments received before the call could be announced.
    pending: String,
    /// Whether any `arguments` field was seen before the announcement.
    saw_arguments: bool,
    announced: bool,
}

/// Tool-call assembly state for one streamed message.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    calls: Vec<Call>,
    by_id: HashMap<String, usize>,
    by_index: HashMap<u64, usize>,
    /// The call that received the last delta.
    last: Option<usize>,
    /// The call announced most recently; only it may still grow.
    open: Option<usize>,
}

impl Assembler {
    /// Routes one delta and appends the events it produces to `out`.
    pub(crate) fn push(
        &mut self,
        delta: ToolCallDelta<'_>,
        out: &mut Vec<StreamEvent>,
    ) -> Result<(), ChatError> {
        let id = delta.id.filter(|s| !s.is_empty());
        let name = delta.name.filter(|s| !s.is_empty());
        let slot = self.route(id, delta.index, name);
        self.last = Some(slot);
        let open = self.open;
        let call = &mut self.calls[slot];
        if call.name.is_none() {
            call.name = name.map(str::to_owned);
        }
        if call.announced {
            let Some(piece) = delta.arguments.filter(|s| !s.is_empty()) else {
                return Ok(());
            };
            if open != Some(slot) {
                let later = open.map(|i| self.calls[i].id.as_str()).unwrap_or("");
                return Err(ChatError::provider(format!(
                    "Tool call deltas out of order: call {} received arguments after call {later} began",
                    self.calls[slot].id
                )));
            }
            out.push(StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some(piece.to_owned()),
            }));
            return Ok(());
        }
        if let Some(piece) = delta.arguments {
            call.saw_arguments = true;
            call.pending.push_str(piece);
        }
        if let Some(name) = call.name.clone() {
            call.announced = true;
            let arguments = call.saw_arguments.then(|| std::mem::take(&mut call.pending));
            out.push(StreamEvent::ToolCall(ToolCall::new(
                call.id.clone(),
                name,
                arguments,
            )));
            self.open = Some(slot);
        }
        Ok(())
    }

    /// Ends the message: calls that never got a name cannot be run and are
    /// dropped with a warning.
    pub(crate) fn finish(&mut self) {
        for call in self.calls.iter().filter(|c| !c.announced) {
            tracing::warn!(id = %call.id, "dropping a streamed tool call that never got a name");
        }
    }

    fn route(&mut self, id: Option<&str>, index: Option<u64>, name: Option<&str>) -> usize {
        if let Some(id) = id {
            let slot = match self.by_id.get(id) {
                Some(&slot) => slot,
                None => self.start(id.to_owned()),
            };
            if let Some(index) = index {
                self.by_index.insert(index, slot);
            }
            return slot;
        }
        let existing = match index {
            Some(index) => self.by_index.get(&index).copied(),
            None => self.last,
        };
        match existing {
            // Without an id, a second name on a named call means a new call
            // (the reference starts a call at every name).
            Some(slot) if !(name.is_some() && self.calls[slot].name.is_some()) => slot,
            _ => {
                let slot = self.start(uuid::Uuid::new_v4().to_string());
                if let Some(index) = index {
                    self.by_index.insert(index, slot);
                }
                slot
            }
        }
    }

    fn start(&mut self, id: String) -> usize {
        let slot = self.calls.len();
        self.by_id.insert(id.clone(), slot);
        self.calls.push(Call {
            id,
            name: None,
            pending: String::new(),
            saw_arguments: false,
            announced: false,
        });
        slot
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn d<'a>(
        index: Option<u64>,
        id: Option<&'a str>,
        name: Option<&'a str>,
        arguments: Option<&'a str>,
    ) -> ToolCallDelta<'a> {
        ToolCallDelta {
            index,
            id,
            name,
            arguments,
        }
    }

    fn run(deltas: &[ToolCallDelta<'_>]) -> Result<Vec<StreamEvent>, ChatError> {
        let mut asm = Assembler::default();
        let mut out = Vec::new();
        for delta in deltas {
            asm.push(*delta, &mut out)?;
        }
        asm.finish();
        Ok(out)
    }

    fn call(id: &str, name: &str, args: Option<&str>) -> StreamEvent {
        StreamEvent::ToolCall(ToolCall::new(id, name, args.map(str::to_owned)))
    }

    fn part(piece: &str) -> StreamEvent {
        StreamEvent::ToolCallPart(ToolCallPart {
            arguments_part: Some(piece.to_owned()),
        })
    }

    #[test]
    fn openai_shape_by_index() {
        let out = run(&[
            d(Some(0), Some("a"), Some("Read"), Some("")),
            d(Some(0), None, None, Some("{\"p\":")),
            d(Some(0), None, None, Some("1}")),
            d(Some(1), Some("b"), Some("Grep"), Some("{}")),
        ]);
        assert_eq!(
            out,
            Ok(vec![
                call("a", "Read", Some("")),
                part("{\"p\":"),
                part("1}"),
                call("b", "Grep", Some("{}")),
            ])
        );
    }

    #[test]
    fn reused_index_zero_is_split_by_id() {
        let out = run(&[
            d(Some(0), Some("a"), Some("Read"), None),
            d(Some(0), Some(""), None, Some("{}")),
            d(Some(0), Some("b"), Some("Grep"), None),
            d(Some(0), None, None, Some("{\"q\":1}")),
        ]);
        assert_eq!(
            out,
            Ok(vec![
                call("a", "Read", None),
                part("{}"),
                call("b", "Grep", None),
                part("{\"q\":1}"),
            ])
        );
    }

    #[test]
    fn repeated_id_and_name_continue_the_call() {
        let out = run(&[
            d(None, Some("a"), Some("Read"), Some("{\"p\"")),
            d(None, Some("a"), Some("Read"), Some(":1}")),
        ]);
        assert_eq!(out, Ok(vec![call("a", "Read", Some("{\"p\"")), part(":1}")]));
    }

    #[test]
    fn name_arriving_late_releases_buffered_arguments() {
        let out = run(&[
            d(Some(0), Some("a"), None, Some("{\"p\"")),
            d(Some(0), None, Some("Read"), Some(":1}")),
            d(Some(0), None, None, Some("")),
        ]);
        assert_eq!(out, Ok(vec![call("a", "Read", Some("{\"p\":1}"))]));
    }

    #[test]
    fn no_id_no_index_names_start_new_calls() {
        let out = run(&[
            d(None, None, Some("A"), Some("{}")),
            d(None, None, Some("B"), None),
            d(None, None, None, Some("{}")),
        ]);
        let Ok(events) = out else {
            panic!("assembly failed: {out:?}");
        };
        assert_eq!(events.len(), 3);
        assert!(matches!(&events[0], StreamEvent::ToolCall(c) if c.function.name == "A"));
        assert!(matches!(&events[1], StreamEvent::ToolCall(c) if c.function.name == "B"));
        assert_eq!(events[2], part("{}"));
    }

    #[test]
    fn interleaved_arguments_are_an_error() {
        let out = run(&[
            d(Some(0), Some("a"), Some("A"), Some("{")),
            d(Some(1), Some("b"), Some("B"), Some("{")),
            d(Some(0), None, None, Some("}")),
        ]);
        assert_eq!(
            out,
            Err(ChatError::provider(
                "Tool call deltas out of order: call a received arguments after call b began"
            ))
        );
    }

    #[test]
    fn nameless_call_is_dropped() {
        assert_eq!(run(&[d(Some(0), Some("a"), None, Some("{}"))]), Ok(vec![]));
    }
}
