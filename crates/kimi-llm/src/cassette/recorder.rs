//! `--record-llm FILE`: every model call, of every provider, appended to a cassette.
//!
//! [`RecordingProvider`] wraps any [`ChatProvider`], so all of them are recorded the same way, at the
//! boundary the loop sees: the request as the loop made it and the answer assembled from what the
//! provider streamed. One line is written when the call ends (its stream ended, failed, or was
//! dropped by the agent). Nothing below the trait reaches the file: no HTTP headers, so no
//! `Authorization`; the provider's key is also blanked wherever an error text repeats it.

use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::Stream;
use futures::StreamExt as _;

use super::format::{CallRecord, RecordedError, RecordedRequest, RunPaths, VERSION};
use crate::{Answer, ChatError, ChatProvider, ChatRequest, ChatStream, StreamEvent};

/// What replaces a secret in a cassette.
const REDACTED: &str = "[redacted]";

/// Appends call records to one cassette file; shared by every provider of a run.
#[derive(Debug)]
pub struct CassetteWriter {
    path: PathBuf,
    /// A std mutex: held only for one `write` of a line, never across an await.
    file: Mutex<File>,
}

impl CassetteWriter {
    /// Opens `path` for appending (created 0600 when missing: a cassette holds the conversation).
    pub fn open(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt as _;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(path)?;
        Ok(Self {
            path: path.to_path_buf(),
            file: Mutex::new(file),
        })
    }

    /// The file written.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `record` as one line (one `write`, so concurrent calls never interleave), with each of
    /// `secrets` blanked. A failure is logged: recording must not stop the agent.
    fn append(&self, record: &CallRecord, secrets: &[String]) {
        let mut line = match serde_json::to_string(record) {
            Ok(line) => line,
            Err(e) => {
                tracing::error!(error = %e, "cassette record not serialized");
                return;
            }
        };
        for secret in secrets {
            line = line.replace(secret.as_str(), REDACTED);
        }
        line.push('\n');
        let mut file = kimi_wire::sync::lock(&self.file);
        if let Err(e) = file.write_all(line.as_bytes()) {
            tracing::error!(path = %self.path.display(), error = %e, "cassette record not written");
        }
    }
}

/// What a recording provider writes beside each call.
#[derive(Debug, Clone)]
pub struct RecordingMeta {
    /// The provider type (`kimi`, `anthropic`, ...).
    pub provider: String,
    /// The model name.
    pub model: String,
    /// The configured generation parameters, as the reader should see them.
    pub parameters: serde_json::Value,
    /// Where this run is.
    pub paths: RunPaths,
    /// Values never to write (the provider's key); values shorter than 8 characters are ignored.
    pub secrets: Vec<String>,
}

/// A provider that records every call of the one it wraps.
#[derive(Debug)]
pub struct RecordingProvider {
    inner: Arc<dyn ChatProvider>,
    writer: Arc<CassetteWriter>,
    meta: Arc<RecordingMeta>,
}

impl RecordingProvider {
    /// Records `inner`'s calls to `writer`.
    pub fn new(inner: Arc<dyn ChatProvider>, writer: Arc<CassetteWriter>, mut meta: RecordingMeta) -> Self {
        meta.secrets.retain(|s| s.len() >= 8);
        Self {
            inner,
            writer,
            meta: Arc::new(meta),
        }
    }
}

#[async_trait::async_trait]
impl ChatProvider for RecordingProvider {
    fn model_name(&self) -> &str {
        self.inner.model_name()
    }

    async fn generate(&self, request: ChatRequest<'_>) -> Result<ChatStream, ChatError> {
        let mut call = Call {
            writer: Arc::clone(&self.writer),
            meta: Arc::clone(&self.meta),
            request: Some(RecordedRequest::of(&request)),
            answer: Answer::default(),
            started: false,
        };
        match self.inner.generate(request).await {
            Ok(stream) => Ok(Box::pin(Recording { inner: stream, call })),
            Err(error) => {
                call.finish(Some(&error), false);
                Err(error)
            }
        }
    }
}

/// One call in progress: written once, when it ends.
struct Call {
    writer: Arc<CassetteWriter>,
    meta: Arc<RecordingMeta>,
    /// Taken when the record is written.
    request: Option<RecordedRequest>,
    answer: Answer,
    /// Whether anything arrived.
    started: bool,
}

impl Call {
    fn finish(&mut self, error: Option<&ChatError>, abandoned: bool) {
        let Some(request) = self.request.take() else {
            return;
        };
        let record = CallRecord {
            cassette: VERSION,
            provider: self.meta.provider.clone(),
            model: self.meta.model.clone(),
            parameters: self.meta.parameters.clone(),
            paths: self.meta.paths.clone(),
            request,
            answer: self.started.then(|| std::mem::take(&mut self.answer)),
            error: error.map(RecordedError::from),
            abandoned,
        };
        self.writer.append(&record, &self.meta.secrets);
    }
}

/// The wrapped stream: passes every event on and assembles the answer to record.
struct Recording {
    inner: ChatStream,
    call: Call,
}

impl Stream for Recording {
    type Item = Result<StreamEvent, ChatError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        let item = futures::ready!(this.inner.poll_next_unpin(cx));
        match &item {
            Some(Ok(event)) => {
                this.call.started = true;
                this.call.answer.push(event.clone());
            }
            Some(Err(error)) => this.call.finish(Some(error), false),
            None => this.call.finish(None, false),
        }
        Poll::Ready(item)
    }
}

impl Drop for Recording {
    /// The agent stopped reading (a cancelled turn): what arrived is recorded as abandoned.
    fn drop(&mut self) {
        self.call.finish(None, true);
    }
}
