//! The spawner: a small process, confined once, that starts the confined commands of the session
//! (docs/sandbox.md, "How it is enforced").
//!
//! Confining each command in its own child needs code between `fork` and `exec`, and with such code
//! std forks the whole agent (page tables copied, the child waiting for a core) instead of using
//! `posix_spawn`: that cost 0.8 to 3 ms per command here (docs/benchmarks.md). The spawner pays the
//! confinement once: it is this binary re-executed with a hidden argument ([`SUBCOMMAND`]), with the
//! children's environment (so no secret and none of the agent's memory), which confines *itself*
//! (`setsid`, the private network, `no_new_privs`, Landlock) and then starts every command with a plain
//! `posix_spawn`, which inherits all of it.
//!
//! - `wire`: the messages, on a socket pair (the command's stdio travels as `SCM_RIGHTS`);
//! - `serve`: the spawner process;
//! - `client`: the agent's end: start, requests, the reader thread, [`SpawnedChild`].
//!
//! One spawner serves one policy: the Landlock ABI and the writable roots (the network namespace is
//! the session's). [`Spawners`] keeps the current one and starts another when the roots change
//! (`/add-dir`) or the spawner died; the old one finishes with the commands it started. Fail closed: a
//! spawner that cannot start or confine itself, or dies, makes the command fail with an error; it is
//! never run another way.

mod client;
mod serve;
mod wire;

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use client::{Launcher, Policy, Spawner};
pub use client::{SpawnRequest, SpawnStdio, SpawnedChild, null};

use super::child::PrivateNetwork;

/// The hidden argument that runs the spawner (`kimi-agent __sandbox-spawner`).
pub const SUBCOMMAND: &str = "__sandbox-spawner";

/// Entry point for `kimi-agent __sandbox-spawner`: serves the agent on stdin until it is done.
pub fn main() {
    serve::main();
}

/// The session's spawners: the one in use, started on the first confined command.
#[derive(Debug)]
pub(crate) struct Spawners {
    launcher: Launcher,
    network: Option<Arc<PrivateNetwork>>,
    current: tokio::sync::Mutex<Option<Arc<Spawner>>>,
}

impl Spawners {
    /// Spawners of this binary, joining `network` when the network is cut.
    pub(crate) fn new(network: Option<Arc<PrivateNetwork>>) -> Self {
        Self::with_launcher(Launcher::this_binary(), network)
    }

    fn with_launcher(launcher: Launcher, network: Option<Arc<PrivateNetwork>>) -> Self {
        Self {
            launcher,
            network,
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// The running spawner for `abi` (0: files not confined) and `roots`, started if there is none, or
    /// the one there confines to other roots or has died.
    async fn get(&self, abi: u32, roots: &[PathBuf]) -> io::Result<Arc<Spawner>> {
        let mut current = self.current.lock().await;
        if let Some(spawner) = current.as_ref()
            && spawner.serves(abi, roots)
        {
            return Ok(Arc::clone(spawner));
        }
        // Retire the old one first: a spawner that fails to start leaves none behind.
        *current = None;
        let policy = Policy {
            abi,
            roots: roots.to_vec(),
            network: self.network.clone(),
        };
        let spawner = Arc::new(Spawner::start(&self.launcher, policy).await?);
        tracing::debug!(roots = ?roots, "sandbox spawner started");
        *current = Some(Arc::clone(&spawner));
        Ok(spawner)
    }

    /// Starts `request` confined to `abi` and `roots`.
    pub(crate) async fn spawn(
        &self,
        abi: u32,
        roots: &[PathBuf],
        request: SpawnRequest,
        stdio: SpawnStdio,
    ) -> io::Result<SpawnedChild> {
        let spawner = self.get(abi, roots).await?;
        spawner.spawn(request, stdio).await
    }
}

#[cfg(test)]
mod tests;
