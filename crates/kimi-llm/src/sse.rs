//! A streamed answer read as server-sent events and turned into [`StreamEvent`]s by a provider's
//! decoder.
//!
//! Every provider here streams SSE (chat completions, Anthropic's Messages, OpenAI's Responses,
//! Gemini's `streamGenerateContent?alt=sse`); only the meaning of each event differs. A provider
//! supplies a [`Decode`] and this module does the rest: the transport, the framing, turning a broken
//! connection into a retryable [`ChatError::Connection`], and stopping at the first error.

use std::collections::VecDeque;

use eventsource_stream::{EventStreamError, Eventsource as _};
use futures::StreamExt as _;
use futures::stream::BoxStream;

use crate::http::from_stream_transport;
use crate::{ChatError, ChatStream, StreamEvent};

/// Whether more events are expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Flow {
    /// Keep reading.
    More,
    /// The answer is complete; whatever follows is ignored.
    Done,
}

/// A provider's reading of its own event stream.
pub(crate) trait Decode: Send + 'static {
    /// Handles one event (`event` is the SSE event name, empty when the server sent none) and appends
    /// what it produced to `out`.
    fn on_event(&mut self, event: &str, data: &str, out: &mut Vec<StreamEvent>) -> Result<Flow, ChatError>;

    /// The body ended before [`Flow::Done`]: either the answer is complete anyway, or it was cut off
    /// (then a retryable error).
    fn on_eof(&mut self, out: &mut Vec<StreamEvent>) -> Result<(), ChatError>;
}

/// The text of the error for a body that ended before the answer did.
pub(crate) const TRUNCATED: &str =
    "Connection error: the response stream ended before the answer was complete.";

/// The error for a body cut off before the answer was complete.
pub(crate) fn truncated() -> ChatError {
    ChatError::Connection {
        message: TRUNCATED.to_owned(),
    }
}

/// How a body that ended before the decoder said [`Flow::Done`] ends the answer: complete when the
/// answer said it was (`complete`, e.g. a finish reason was seen) or when nothing came at all (the loop
/// then reports an empty answer), cut off otherwise.
pub(crate) fn ended(saw_event: bool, complete: bool) -> Result<(), ChatError> {
    if saw_event && !complete {
        Err(truncated())
    } else {
        Ok(())
    }
}

/// The error for an event whose data is not the JSON it should be: a mangled stream, retried.
pub(crate) fn malformed(error: &serde_json::Error, data: &str) -> ChatError {
    tracing::warn!(error = %error, data, "malformed event in the response stream");
    ChatError::Connection {
        message: format!("Connection error: malformed chunk in the response stream ({error})."),
    }
}

struct State<D> {
    events: BoxStream<'static, Result<eventsource_stream::Event, EventStreamError<reqwest::Error>>>,
    decoder: D,
    queue: VecDeque<StreamEvent>,
    done: bool,
}

/// The events of a streamed answer. The response body lives inside the returned stream, so dropping
/// the stream closes the connection.
pub(crate) fn events<D: Decode>(response: reqwest::Response, decoder: D) -> ChatStream {
    let state = State {
        events: response.bytes_stream().eventsource().boxed(),
        decoder,
        queue: VecDeque::new(),
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        loop {
            if let Some(event) = st.queue.pop_front() {
                return Some((Ok(event), st));
            }
            if st.done {
                return None;
            }
            let mut out = Vec::new();
            let step = match st.events.next().await {
                Some(Ok(event)) => st.decoder.on_event(&event.event, &event.data, &mut out),
                Some(Err(EventStreamError::Transport(e))) => Err(from_stream_transport(&e)),
                Some(Err(e)) => Err(ChatError::Connection {
                    message: format!("Connection error: malformed response stream ({e})."),
                }),
                None => st.decoder.on_eof(&mut out).map(|()| Flow::Done),
            };
            st.queue.extend(out);
            match step {
                Ok(Flow::More) => {}
                Ok(Flow::Done) => st.done = true,
                Err(error) => {
                    st.done = true;
                    st.queue.clear();
                    return Some((Err(error), st));
                }
            }
        }
    })
    .boxed()
}

/// Test support: feeds `(event, data)` pairs to a decoder as the stream would, then the end of the
/// body, and returns what it produced and how it ended.
#[cfg(test)]
pub(crate) fn replay<D: Decode>(
    decoder: &mut D,
    events: &[(&str, &str)],
) -> (Vec<StreamEvent>, Result<(), ChatError>) {
    let mut out = Vec::new();
    for (event, data) in events {
        match decoder.on_event(event, data, &mut out) {
            Ok(Flow::More) => {}
            Ok(Flow::Done) => return (out, Ok(())),
            Err(e) => return (out, Err(e)),
        }
    }
    let end = decoder.on_eof(&mut out);
    (out, end)
}
