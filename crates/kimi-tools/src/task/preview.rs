//! The end of a task's output as `TaskOutput` shows it, in both tool sets' formats: how much, and the
//! hint for reading the rest.

/// Bytes of output shown (the end of the log; reference `TASK_OUTPUT_PREVIEW_BYTES`).
pub const PREVIEW_BYTES: u64 = 32 << 10;

/// Lines per `ReadFile` page suggested for reading the whole log (reference `TASK_OUTPUT_READ_HINT_LINES`).
pub(crate) const READ_HINT_LINES: u32 = 300;

/// The end of a task's output.
pub(crate) struct Preview {
    /// The last [`PREVIEW_BYTES`] of the log, without its final line break.
    pub text: String,
    /// The log file.
    pub path: std::path::PathBuf,
    /// Its size.
    pub size: u64,
    /// Bytes of it in `text`.
    pub shown: u64,
    /// Whether `text` leaves out the start of the log.
    pub truncated: bool,
}
