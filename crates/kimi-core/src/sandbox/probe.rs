//! The start-up trial: can this kernel confine a command as the policy asks?
//!
//! Landlock's ABI is asked of the kernel directly; the rest can only be learnt by doing it, so a
//! trial command (`/bin/sh -c 'exit 0'`) is started exactly as a model's command would be (same
//! session, namespace and ruleset steps) and must exit successfully.

use std::io;
use std::process::Stdio;

use super::{CommandSandbox, Enforcement, Sandbox, rules};

/// The trial's shell: present on every Linux system the agent runs on.
const TRIAL_SHELL: &str = "/bin/sh";

/// The verdict for `sandbox`'s policy (which confines something).
pub(super) fn run(sandbox: &Sandbox) -> Enforcement {
    let landlock_abi = if sandbox.policy.mode.confines_files() {
        match rules::kernel_abi() {
            Some(abi) => Some(abi),
            None => {
                return Enforcement::Unavailable(
                    "this kernel has no Landlock (Linux 5.13 or later with Landlock enabled is needed to \
                     confine writes)"
                        .to_owned(),
                );
            }
        }
    } else {
        None
    };
    let network_cut = !sandbox.policy.network;
    let confinement = sandbox.confinement(landlock_abi, vec![sandbox.temp_dir()]);
    match trial(&confinement) {
        Ok(()) => Enforcement::Enforced {
            landlock_abi,
            network_cut,
        },
        Err(e) => Enforcement::Unavailable(format!("a trial command could not be confined ({e})")),
    }
}

fn trial(confinement: &CommandSandbox) -> io::Result<()> {
    let mut cmd = std::process::Command::new(TRIAL_SHELL);
    cmd.args(["-c", "exit 0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    confinement.confine(&mut cmd)?;
    let status = cmd.status()?;
    if status.success() {
        Ok(())
    } else {
        Err(io::Error::other(format!("it ended with {status}")))
    }
}
