//! The reading tools' gate, decided on the real path before anything is read: a secret is refused, a
//! file outside the workspace (and outside the other places reads need no approval: skills, the
//! session directory, plans) asks first, under its own action so that "approve for session" covers
//! every later read outside.

use std::path::PathBuf;
use std::sync::Arc;

use kimi_core::Environment;
use kimi_core::{ApprovalAsk, Plan};
use kimi_wire::message::ToolReturnValue;

use super::FileSettings;
use super::paths::is_within_workspace;
use super::scope::{Roots, Target};
use super::{blocking, tool_error};

/// The approval action for reads whose real target lies outside the workspace (also the "approve for
/// session" key).
pub const ACTION_READ_OUTSIDE: &str = "read file outside of working directory";

/// A read the gate let through: what to open, and the question to ask first when it is outside.
#[derive(Debug)]
pub(crate) struct Admitted {
    pub target: Target,
    pub ask: Option<ApprovalAsk>,
}

impl Admitted {
    /// The plan: read-only inside, a side effect (asked) outside.
    pub(crate) fn plan(self, run: futures::future::BoxFuture<'static, ToolReturnValue>) -> Plan {
        match self.ask {
            None => Plan::read_only(run),
            Some(ask) => Plan::side_effect(ask, run),
        }
    }
}

/// The refusal for a secret, with the reference's text (quoting the path as the model wrote it).
pub(crate) fn secret_refused(raw: &str) -> ToolReturnValue {
    tool_error(
        format!(
            "`{raw}` appears to contain secrets (matched sensitive file pattern). Reading this file is blocked to protect credentials."
        ),
        "Sensitive file",
    )
}

/// Resolves `named` (the lexical form of what the model wrote as `raw`) and decides. `describe` words
/// the approval question from the path as shown (e.g. ``Read file `/etc/hosts` ``). Secrets are
/// refused, by the path named and by the real one.
///
/// A path that cannot be resolved (a missing directory) is let through as named: the tool then
/// reports it missing, as the reference does.
pub(crate) async fn admit_read(
    raw: &str,
    named: PathBuf,
    env: &Arc<Environment>,
    settings: &FileSettings,
    describe: impl FnOnce(&str) -> String,
) -> Result<Admitted, ToolReturnValue> {
    if settings.secrets.is_secret(&named) {
        return Err(secret_refused(raw));
    }
    let admitted = admit(raw, named, env, settings, describe).await?;
    if settings.secrets.is_secret(&admitted.target.real) {
        return Err(secret_refused(raw));
    }
    Ok(admitted)
}

/// [`admit_read`] without the secret check, for a tool that leaves secrets out itself (Grep).
pub(crate) async fn admit(
    raw: &str,
    named: PathBuf,
    env: &Arc<Environment>,
    settings: &FileSettings,
    describe: impl FnOnce(&str) -> String,
) -> Result<Admitted, ToolReturnValue> {
    let (env, settings_for_io) = (Arc::clone(env), settings.clone());
    let resolved = blocking(move || {
        let target = match Target::resolve(named.clone(), &env, &settings_for_io.read_roots) {
            Ok(target) => target,
            // Nothing to read there: judged as named, the tool then reports it missing.
            Err(_) => Target {
                real: named.clone(),
                shown: named.clone(),
                in_workspace: is_within_workspace(&named, &env) || Roots::workspace(&env).contains(&named),
                named,
            },
        };
        let free = target.in_workspace
            || Roots::default()
                .and(std::iter::once(&env.session_dir).chain(&settings_for_io.read_roots))
                .contains(&target.real);
        (target, free)
    })
    .await
    .map_err(|e| tool_error(format!("Failed to read {raw}. Error: {e}"), "Failed to read file"))?;
    let (target, free) = resolved;
    let ask = (!free).then(|| ApprovalAsk {
        action: ACTION_READ_OUTSIDE.to_owned(),
        description: describe(&target.shown.to_string_lossy()),
        display: Vec::new(),
        detail_display: Vec::new(),
        writes: Vec::new(),
    });
    Ok(Admitted { target, ask })
}
