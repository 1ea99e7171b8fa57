//! `_chaos`: a provider wrapper that fails on purpose, to exercise the loop's
//! retries.
//!
//! Reference: kosong's `ChaosChatProvider`, which swaps the HTTP transport
//! for one answering 429/500/503 with OpenAI-style bodies and trims the last
//! `}` off some tool-call arguments. This wrapper produces the same
//! [`ChatError`]s without touching the network (the request is never sent,
//! as with the reference's transport) and adds one fault the reference
//! lacks: a stream cut off after a few events, reported as the same
//! retryable error a real truncated stream gives. Decisions come from a small
//! seeded generator, so a test with a fixed seed sees the same faults each run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt as _;
use kimi_wire::message::ToolCallPart;

use crate::openai::errors;
use crate::sse::TRUNCATED;
use crate::{ChatError, ChatProvider, ChatRequest, ChatStream, StreamEvent};

/// What to inject and how often. Probabilities are in `[0, 1]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ChaosConfig {
    /// Chance that a call fails at once with an HTTP status error.
    pub error_probability: f64,
    /// The statuses to pick from (429, 500, 502 and 503 get the reference's bodies).
    pub error_types: Vec<u16>,
    /// The `Retry-After` a 429 carries.
    pub retry_after: Duration,
    /// Seed for reproducible faults; `None` seeds from a random id.
    pub seed: Option<u64>,
    /// Chance, per tool-call event, of dropping the closing `}` of its arguments.
    pub corrupt_tool_call_probability: f64,
    /// Chance that a call's stream is cut off after 0 to 3 events.
    pub truncate_probability: f64,
}

impl Default for ChaosConfig {
    /// The `_chaos` provider type's settings in the reference (80% errors among
    /// 429/500/503, `Retry-After: 2`, 10% corrupted tool calls), plus 10%
    /// truncated streams.
    fn default() -> Self {
        Self {
            error_probability: 0.8,
            error_types: vec![429, 500, 503],
            retry_after: Duration::from_secs(2),
            seed: None,
            corrupt_tool_call_probability: 0.1,
            truncate_probability: 0.1,
        }
    }
}

impl ChaosConfig {
    /// Applies `CHAOS_ERROR_PROBABILITY`, `CHAOS_ERROR_TYPES` (comma
    /// separated), `CHAOS_RETRY_AFTER` (seconds), `CHAOS_SEED`,
    /// `CHAOS_CORRUPT_TOOL_CALL_PROBABILITY` and `CHAOS_TRUNCATE_PROBABILITY`
    /// as `lookup` finds them; values that do not parse are ignored.
    pub fn with_env(mut self, lookup: impl Fn(&str) -> Option<String>) -> Self {
        let float = |key: &str| lookup(key).and_then(|v| v.trim().parse::<f64>().ok());
        if let Some(p) = float("CHAOS_ERROR_PROBABILITY") {
            self.error_probability = p;
        }
        if let Some(types) = lookup("CHAOS_ERROR_TYPES") {
            let parsed: Option<Vec<u16>> = types.split(',').map(|t| t.trim().parse().ok()).collect();
            if let Some(parsed) = parsed.filter(|p| !p.is_empty()) {
                self.error_types = parsed;
            }
        }
        if let Some(secs) = lookup("CHAOS_RETRY_AFTER").and_then(|v| v.trim().parse::<u64>().ok()) {
            self.retry_after = Duration::from_secs(secs);
        }
        if let Some(seed) = lookup("CHAOS_SEED").and_then(|v| v.trim().parse::<u64>().ok()) {
            self.seed = Some(seed);
        }
        if let Some(p) = float("CHAOS_CORRUPT_TOOL_CALL_PROBABILITY") {
            self.corrupt_tool_call_probability = p;
        }
        if let Some(p) = float("CHAOS_TRUNCATE_PROBABILITY") {
            self.truncate_probability = p;
        }
        self
    }
}

/// SplitMix64: tiny, fast, and good enough to pick faults.
#[derive(Debug, Clone)]
struct Rng(u64);

impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A float in `[0, 1)`.
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    fn chance(&mut self, probability: f64) -> bool {
        probability > 0.0 && self.next_f64() < probability
    }

    fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        usize::try_from(self.next_u64() % n as u64).unwrap_or(0)
    }
}

/// The `_chaos` wrapper; see the module docs.
#[derive(Debug)]
pub struct ChaosProvider {
    inner: Arc<dyn ChatProvider>,
    config: ChaosConfig,
    /// One generator for all calls: a std mutex, held only to draw numbers.
    rng: Mutex<Rng>,
    model_name: String,
}

impl ChaosProvider {
    /// Wraps `inner`.
    pub fn new(inner: Arc<dyn ChatProvider>, config: ChaosConfig) -> Self {
        let seed = config
            .seed
            .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0);
        let noisy = config.error_probability > 0.0
            || config.corrupt_tool_call_probability > 0.0
            || config.truncate_probability > 0.0;
        let model_name = if noisy {
            format!("chaos({})", inner.model_name())
        } else {
            inner.model_name().to_owned()
        };
        Self {
            inner,
            config,
            rng: Mutex::new(Rng(seed)),
            model_name,
        }
    }

    fn draw<T>(&self, f: impl FnOnce(&mut Rng) -> T) -> T {
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        f(&mut rng)
    }

    fn injected_error(&self, status: u16) -> ChatError {
        let body = match status {
            429 => r#"{"error": {"code": "rate_limit_exceeded", "message": "Rate limit exceeded"}}"#,
            500 => r#"{"error": {"code": "internal_error", "message": "Internal server error"}}"#,
            502 => r#"{"error": {"code": "bad_gateway", "message": "Bad gateway"}}"#,
            503 => {
                r#"{"error": {"code": "service_unavailable", "message": "Service temporarily unavailable"}}"#
            }
            _ => r#"{"error": {"message": "Unknown error"}}"#,
        };
        ChatError::Status {
            status,
            message: errors::status_message(status, body),
            retry_after: (status == 429).then_some(self.config.retry_after),
            request_id: None,
        }
    }
}

#[async_trait::async_trait]
impl ChatProvider for ChaosProvider {
    fn model_name(&self) -> &str {
        &self.model_name
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let config = &self.config;
        let (fail, stream_rng) = self.draw(|rng| {
            let fail = rng
                .chance(config.error_probability)
                .then(|| {
                    config
                        .error_types
                        .get(rng.below(config.error_types.len()))
                        .copied()
                })
                .flatten();
            (fail, Rng(rng.next_u64()))
        });
        if let Some(status) = fail {
            tracing::info!(status, "chaos: injecting an HTTP error");
            return Err(self.injected_error(status));
        }
        let inner = self.inner.generate(request).await?;
        Ok(chaotic(inner, stream_rng, config.clone()))
    }
}

struct Chaotic {
    inner: ChatStream,
    rng: Rng,
    corrupt: f64,
    /// Events still allowed through before the cut, when this stream is cut.
    cut_after: Option<usize>,
    done: bool,
}

fn chaotic(inner: ChatStream, mut rng: Rng, config: ChaosConfig) -> ChatStream {
    let cut_after = rng.chance(config.truncate_probability).then(|| rng.below(4));
    let state = Chaotic {
        inner,
        rng,
        corrupt: config.corrupt_tool_call_probability,
        cut_after,
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        if st.cut_after == Some(0) {
            st.done = true;
            tracing::info!("chaos: cutting the stream");
            let error = ChatError::Connection {
                message: TRUNCATED.to_owned(),
            };
            return Some((Err(error), st));
        }
        match st.inner.next().await {
            None if st.cut_after.is_some() => {
                // The answer ended before the planned cut: lose its end instead.
                st.cut_after = Some(0);
                st.done = true;
                let error = ChatError::Connection {
                    message: TRUNCATED.to_owned(),
                };
                Some((Err(error), st))
            }
            None => None,
            Some(Ok(event)) => {
                if let Some(n) = st.cut_after.as_mut() {
                    *n -= 1;
                }
                let corrupt = st.corrupt;
                let event = corrupt_tool_call(event, || st.rng.chance(corrupt));
                Some((Ok(event), st))
            }
            Some(Err(error)) => {
                st.done = true;
                Some((Err(error), st))
            }
        }
    })
    .boxed()
}

/// Drops the closing `}` of a tool call's arguments when `roll` says so.
fn corrupt_tool_call(event: StreamEvent, roll: impl FnOnce() -> bool) -> StreamEvent {
    match event {
        StreamEvent::ToolCall(mut call) => {
            if call
                .function
                .arguments
                .as_deref()
                .is_some_and(|a| a.ends_with('}'))
                && roll()
                && let Some(arguments) = call.function.arguments.as_mut()
            {
                arguments.pop();
            }
            StreamEvent::ToolCall(call)
        }
        StreamEvent::ToolCallPart(ToolCallPart {
            arguments_part: Some(mut piece),
        }) if piece.ends_with('}') => {
            if roll() {
                piece.pop();
            }
            StreamEvent::ToolCallPart(ToolCallPart {
                arguments_part: Some(piece),
            })
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::echo::ScriptedEchoProvider;
    use pretty_assertions::assert_eq;

    #[test]
    fn env_overrides() {
        let env = |key: &str| match key {
            "CHAOS_ERROR_PROBABILITY" => Some("0.25".to_owned()),
            "CHAOS_ERROR_TYPES" => Some("429, 502".to_owned()),
            "CHAOS_SEED" => Some("7".to_owned()),
            "CHAOS_RETRY_AFTER" => Some("x".to_owned()),
            _ => None,
        };
        let config = ChaosConfig::default().with_env(env);
        assert_eq!(config.error_probability, 0.25);
        assert_eq!(config.error_types, vec![429, 502]);
        assert_eq!(config.seed, Some(7));
        assert_eq!(config.retry_after, Duration::from_secs(2));
    }

    #[test]
    fn corruption_only_touches_closing_braces() {
        let call = StreamEvent::ToolCall(kimi_wire::message::ToolCall::new("a", "A", Some("{}".into())));
        let StreamEvent::ToolCall(c) = corrupt_tool_call(call, || true) else {
            panic!("not a call");
        };
        assert_eq!(c.function.arguments.as_deref(), Some("{"));
        let part = StreamEvent::ToolCallPart(ToolCallPart {
            arguments_part: Some("1,".into()),
        });
        assert_eq!(corrupt_tool_call(part.clone(), || true), part);
    }

    #[tokio::test]
    async fn same_seed_same_faults() {
        async fn outcomes(seed: u64) -> Vec<String> {
            let scripts: Vec<String> = (0..20).map(|i| format!("text: t{i}")).collect();
            let inner = Arc::new(ScriptedEchoProvider::from_scripts(scripts));
            let config = ChaosConfig {
                error_probability: 0.4,
                truncate_probability: 0.4,
                seed: Some(seed),
                ..ChaosConfig::default()
            };
            let chaos = ChaosProvider::new(inner, config);
            assert_eq!(chaos.model_name(), "chaos(scripted_echo)");
            let history = [crate::Message::user_text("hi")];
            let mut seen = Vec::new();
            for _ in 0..20 {
                let request = ChatRequest {
                    system_prompt: "",
                    tools: &[],
                    history: &history,
                };
                let outcome = match chaos.generate(request).await {
                    Err(e) => format!("{}:{:?}", e.error_type(), e.status_code()),
                    Ok(stream) => {
                        let items: Vec<_> = stream.collect().await;
                        match items.last() {
                            Some(Err(e)) => format!("{}:cut", e.error_type()),
                            _ => "ok".to_owned(),
                        }
                    }
                };
                seen.push(outcome);
            }
            seen
        }
        let first = outcomes(42).await;
        assert_eq!(first, outcomes(42).await);
        assert!(first.iter().any(|o| o == "ok"), "{first:?}");
        assert!(first.iter().any(|o| o.starts_with("APIStatusError")), "{first:?}");
        assert!(first.iter().any(|o| o == "APIConnectionError:cut"), "{first:?}");
    }
}
