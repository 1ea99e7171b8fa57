//! One step: a model call streamed to the client, the tool calls it asked for, and the context growth.
//!
//! Each tool call is handed to the step's scheduler the moment the model finishes streaming it: a plain
//! read may start while the rest of the answer still streams; anything else (a write, a command, a
//! question, a subagent, a client's tool) waits until the answer is complete, so an attempt that fails
//! leaves no side effect and no request behind. `ToolResult` events go out in completion order and
//! results reach the context in call order. The step's `StatusUpdate` goes out after the stream ends and
//! before the waiting calls are released (reference order). Retryable provider failures are retried
//! here, with a `StepRetry` before each wait; nothing of a failed attempt reaches the context, and each
//! of its calls the client saw gets an error `ToolResult` saying it was dropped.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use kimi_llm::{ChatError, ChatProvider, ChatRequest, Message, StreamEvent, push_part};
use kimi_wire::message::{
    ContentPart, Event, StatusUpdate, StepRetry, TokenUsage, ToolCall, ToolResult, ToolReturnValue,
};
use tokio_util::sync::CancellationToken;

use super::message::tool_result_message;
use super::{Soul, TurnError};
use crate::approval::ApprovalSource;
use crate::sync::lock;
use crate::toolset::{CallResult, Dispatch, StepCalls, StepVerdict};

/// Whether the loop goes on after a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum StepOutcome {
    /// The model asked for tools: another step follows.
    Continue,
    /// The model is done (or the repeat guard stopped it).
    Stop,
    /// The user rejected a call without saying why: the turn stops.
    Rejected,
}

/// What one successful model call produced.
struct Streamed {
    parts: Vec<ContentPart>,
    tool_calls: Vec<ToolCall>,
    message_id: Option<String>,
    usage: Option<TokenUsage>,
    results: Vec<Option<CallResult>>,
    running: FuturesUnordered<BoxFuture<'static, (usize, CallResult)>>,
    calls: StepCalls,
}

impl Soul {
    pub(super) async fn step(
        &self,
        n: u32,
        source: &ApprovalSource,
        cancel: &CancellationToken,
    ) -> Result<StepOutcome, TurnError> {
        let llm = self.llm.clone().ok_or(TurnError::LlmNotSet)?;
        self.deliver_notifications().await?;
        self.remind().await?;
        let (system_prompt, history) = {
            let context = self.context.lock().await;
            let history = crate::reminders::merged(context.history());
            (context.system_prompt().to_owned(), history)
        };
        let tools = self.toolset.specs();
        let dispatch = Dispatch::for_step(
            Arc::clone(&self.toolset),
            Arc::clone(&self.approvals),
            Arc::clone(&self.hooks),
            source.clone(),
            cancel.clone(),
        )
        .with_plan_mode(Arc::clone(&self.plan));
        let request = ChatRequest {
            system_prompt: &system_prompt,
            tools: &tools,
            history: &history,
        };
        let max_attempts = self.settings.max_retries_per_step.max(1);
        let mut attempt = 1;
        let mut streamed = loop {
            lock(&self.dedup).begin_step();
            let result = self.stream_once(llm.as_ref(), &request, &dispatch).await;
            if result.is_err() {
                // The attempt's calls are gone with it; the client still hears about each it saw.
                self.close_open_calls(Unfinished::Dropped).await;
            }
            match result {
                Ok(streamed) => break streamed,
                Err(e) if e.is_retryable() && attempt < max_attempts => {
                    let wait = self.settings.retry_backoff.wait(attempt, e.retry_after());
                    tracing::warn!(step = n, attempt, error = %e, "retrying step");
                    self.events
                        .emit(Event::StepRetry(StepRetry {
                            n,
                            next_attempt: attempt + 1,
                            max_attempts,
                            wait_s: wait.as_secs_f64(),
                            error_type: e.error_type().to_owned(),
                            status_code: e.status_code(),
                        }))
                        .await;
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                }
                Err(e) => return Err(TurnError::Provider(e)),
            }
        };
        // The model has answered: release the snapshot, so growing the context below copies nothing.
        drop(history);

        self.events
            .emit(Event::StatusUpdate(self.status_update(&streamed)))
            .await;
        // Only now may writes, commands, questions and approvals go ahead.
        streamed.calls.answer_complete();
        let plan_mode_before = self.plan_mode();
        while let Some((index, result)) = streamed.running.next().await {
            self.emit_result(&result).await;
            streamed.results[index] = Some(result);
        }
        // A tool (EnterPlanMode, ExitPlanMode) changed plan mode: the client learns it now (reference).
        if self.plan_mode() != plan_mode_before {
            let update = StatusUpdate {
                plan_mode: Some(self.plan_mode()),
                ..StatusUpdate::default()
            };
            self.events.emit(Event::StatusUpdate(update)).await;
        }
        let results: Vec<CallResult> = streamed.results.into_iter().flatten().collect();
        let repeat_stop = lock(&self.dedup).end_step() == StepVerdict::ForceStop;
        if repeat_stop {
            tracing::warn!(step = n, "the same tool calls kept repeating; ending the turn");
        }
        // A subagent goes on after a rejection and finds another way (reference).
        let rejected = self.subagent.is_none() && results.iter().any(|r| r.rejected_without_feedback);
        let has_calls = !streamed.tool_calls.is_empty();
        self.grow_context(streamed.parts, streamed.tool_calls, streamed.usage, results)
            .await?;
        Ok(if rejected {
            StepOutcome::Rejected
        } else if has_calls && !repeat_stop {
            StepOutcome::Continue
        } else {
            StepOutcome::Stop
        })
    }

    /// One attempt: streams the answer, emitting each part and starting each finished tool call.
    async fn stream_once(
        &self,
        llm: &dyn ChatProvider,
        request: &ChatRequest<'_>,
        dispatch: &Dispatch,
    ) -> Result<Streamed, ChatError> {
        let mut stream = llm.generate(ChatRequest { ..*request }).await?;
        let mut streamed = Streamed {
            parts: Vec::new(),
            tool_calls: Vec::new(),
            message_id: None,
            usage: None,
            results: Vec::new(),
            running: FuturesUnordered::new(),
            calls: dispatch.attempt(),
        };
        // The call still receiving argument deltas.
        let mut open_call: Option<ToolCall> = None;
        loop {
            let event = tokio::select! {
                event = stream.next() => event,
                Some((index, result)) = streamed.running.next(), if !streamed.running.is_empty() => {
                    self.emit_result(&result).await;
                    streamed.results[index] = Some(result);
                    continue;
                }
            };
            let Some(event) = event else { break };
            match event? {
                StreamEvent::ToolCallPart(part) => {
                    if let (Some(call), Some(piece)) = (open_call.as_mut(), part.arguments_part.as_deref()) {
                        call.function
                            .arguments
                            .get_or_insert_with(String::new)
                            .push_str(piece);
                    }
                    self.events.emit(Event::ToolCallPart(part)).await;
                    continue;
                }
                StreamEvent::ToolCall(call) => {
                    self.start_call(&mut streamed, open_call.take());
                    lock(&self.open_calls).push(call.id.clone());
                    self.events.emit(Event::ToolCall(call.clone())).await;
                    open_call = Some(call);
                }
                StreamEvent::Part(part) => {
                    self.start_call(&mut streamed, open_call.take());
                    self.events.emit(Event::ContentPart(part.clone())).await;
                    push_part(&mut streamed.parts, part);
                }
                StreamEvent::MessageId(id) => streamed.message_id = Some(id),
                StreamEvent::Usage(usage) => streamed.usage = Some(usage),
                StreamEvent::Finish(_) => {}
            }
        }
        self.start_call(&mut streamed, open_call.take());
        if let Some(message) = empty_answer(&streamed) {
            return Err(ChatError::EmptyResponse {
                message: message.to_owned(),
            });
        }
        Ok(streamed)
    }

    /// Hands a finished tool call (if any) to the scheduler and remembers it in call order.
    fn start_call(&self, streamed: &mut Streamed, call: Option<ToolCall>) {
        let Some(call) = call else { return };
        let index = streamed.results.len();
        streamed.results.push(None);
        streamed.tool_calls.push(call.clone());
        let running = streamed.calls.start(call, &mut lock(&self.dedup));
        streamed
            .running
            .push(Box::pin(async move { (index, running.await) }));
    }

    fn status_update(&self, streamed: &Streamed) -> StatusUpdate {
        let max = self.model.max_context_size;
        let tokens = streamed.usage.as_ref().map(TokenUsage::input);
        StatusUpdate {
            context_usage: tokens.filter(|_| max > 0).map(|t| t as f64 / max as f64),
            context_tokens: tokens,
            max_context_tokens: tokens.map(|_| max),
            token_usage: streamed.usage,
            message_id: streamed.message_id.clone(),
            plan_mode: Some(self.plan_mode()),
            mcp_status: None,
        }
    }

    async fn emit_result(&self, result: &CallResult) {
        {
            let mut open = lock(&self.open_calls);
            if let Some(i) = open.iter().position(|id| *id == result.tool_call_id) {
                open.remove(i);
            }
        }
        self.events
            .emit(Event::ToolResult(ToolResult {
                tool_call_id: result.tool_call_id.clone(),
                return_value: result.value.clone(),
            }))
            .await;
    }

    /// Appends the step to the context. Nothing here awaits once the lock is held, so a cancel cannot
    /// leave a tool call without its result in the history (reference: shielded).
    async fn grow_context(
        &self,
        parts: Vec<ContentPart>,
        tool_calls: Vec<ToolCall>,
        usage: Option<TokenUsage>,
        results: Vec<CallResult>,
    ) -> Result<(), TurnError> {
        let mut messages = vec![Message::assistant(parts, tool_calls)];
        messages.extend(
            results
                .iter()
                .map(|r| tool_result_message(&r.tool_call_id, &r.model_value)),
        );
        let mut context = self.context.lock().await;
        if let Some(usage) = &usage {
            context.update_token_count(usage.input())?;
        }
        let mut messages = messages.into_iter();
        if let Some(assistant) = messages.next() {
            context.append(assistant)?;
        }
        if let Some(usage) = &usage {
            context.update_token_count(usage.total())?;
        }
        for message in messages {
            context.append(message)?;
        }
        Ok(())
    }
}

/// Why a call the client saw ends without running to the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unfinished {
    /// The model's answer broke off (the attempt failed): the call was dropped with it.
    Dropped,
    /// The turn was cancelled while the call waited or ran.
    Cancelled,
}

impl Unfinished {
    fn result(self) -> ToolReturnValue {
        match self {
            Self::Dropped => ToolReturnValue::error(
                "",
                "This call was dropped: the model's answer broke off before it was complete.",
                "Dropped",
            ),
            Self::Cancelled => ToolReturnValue::error(
                "",
                "The turn was cancelled before this call finished.",
                "Cancelled",
            ),
        }
    }
}

impl Soul {
    /// Sends an error `ToolResult` for every call the client saw whose result it has not seen, so each
    /// `ToolCall` is answered before `TurnEnd`. Nothing here enters the context: the step it belongs to
    /// is not recorded there.
    pub(super) async fn close_open_calls(&self, why: Unfinished) {
        let open = std::mem::take(&mut *lock(&self.open_calls));
        for tool_call_id in open {
            self.events
                .emit(Event::ToolResult(ToolResult {
                    tool_call_id,
                    return_value: why.result(),
                }))
                .await;
        }
    }
}

/// Why an answer without tool calls is unusable, with the reference's texts (kosong `generate`): nothing
/// at all, or thinking without visible text (a stream cut short or a budget spent on reasoning).
fn empty_answer(streamed: &Streamed) -> Option<&'static str> {
    if !streamed.tool_calls.is_empty() {
        return None;
    }
    if streamed.parts.is_empty() {
        return Some("The API returned an empty response.");
    }
    let has_think = streamed.parts.iter().any(|p| matches!(p, ContentPart::Think(_)));
    let has_text = streamed
        .parts
        .iter()
        .any(|p| matches!(p, ContentPart::Text(t) if !t.text.trim().is_empty()));
    (has_think && !has_text).then_some(
        "The API returned a response containing only thinking content without any text or tool calls. \
         This usually indicates the stream was interrupted or the output token budget was exhausted \
         during reasoning.",
    )
}
