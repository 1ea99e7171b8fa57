//! The six method names a client may call, and the two the server sends.

/// Handshake.
pub const INITIALIZE: &str = "initialize";
/// Run one turn.
pub const PROMPT: &str = "prompt";
/// Add input to the running turn.
pub const STEER: &str = "steer";
/// Re-send the recorded session.
pub const REPLAY: &str = "replay";
/// Cancel the running turn or replay.
pub const CANCEL: &str = "cancel";
/// Turn plan mode on or off.
pub const SET_PLAN_MODE: &str = "set_plan_mode";
/// Server -> client notification carrying an event.
pub const EVENT: &str = "event";
/// Server -> client request (approval, external tool, question, hook).
pub const REQUEST: &str = "request";
