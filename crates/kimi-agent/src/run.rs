//! Serving a wire session: the session is built by `kimi_core::assemble` with kimi-tools' built-in
//! tools, then served on stdin/stdout until the client goes away or a signal ends it.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Result;
use kimi_core::Config;
use kimi_core::{RunOptions, assemble};
use kimi_wire::IdleSignal;
use kimi_wire::server::writer::Output;

/// Builds the session `options` name and serves it over stdin/stdout; `idle` is the runtime's park
/// signal, which wakes the stdout writer once per burst of events instead of once per event.
pub async fn serve(options: RunOptions, config: Config, share_dir: PathBuf, idle: IdleSignal) -> Result<()> {
    let agent = assemble(options, config, share_dir, Arc::new(kimi_tools::Builtins), idle).await?;
    agent
        .serve(tokio::io::stdin(), Output::stdout(), shutdown_signal())
        .await;
    Ok(())
}

/// Resolves on SIGINT, SIGTERM or SIGHUP: each ends the session like EOF does (the running turn is
/// cancelled and its `prompt` answered `cancelled`, children are stopped, exit 0). SIGHUP is what a
/// closing terminal or editor sends; left to its default action it kills the process before the pending
/// `prompt` is answered, and the reference does not handle it.
async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        // Without signal handlers we simply never shut down by signal.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => tracing::info!("SIGINT received"),
        _ = term.recv() => tracing::info!("SIGTERM received"),
        _ = hup.recv() => tracing::info!("SIGHUP received"),
    }
}
