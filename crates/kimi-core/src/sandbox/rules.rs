//! Landlock: which ABI the kernel offers, and the ruleset of one command.
//!
//! The ruleset handles every file right of the ABI in use (so refer, truncate and device ioctl where the
//! kernel has them) and grants: reading and executing everywhere; everything beneath each writable
//! root; reading and writing the few device files every shell expects (`/dev/null` and friends); and
//! the single files a command may write besides (a background task's log). Everything else is denied.
//! The ruleset is built in the agent, before the fork; the child only applies it.

use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, LandlockStatus, PathBeneath, PathFd,
    RestrictSelf, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError,
};

/// The newest ABI whose rights we hand out. ABI 9 adds a right for connecting to Unix sockets, which
/// would change what confined commands can reach (an agent's socket, a database's); it stays off until
/// it has been tried on such a kernel.
const NEWEST: ABI = ABI::V8;

/// Device files commands write to all the time: discarding output, reading zeros and randomness.
const DEVICES: [&str; 5] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
];

/// The kernel's Landlock ABI, or `None` without Landlock (not built in, or not enabled at boot). Asked
/// without restricting anything: no `no_new_privs`, no flags, so no system call but the version query.
pub(crate) fn kernel_abi() -> Option<ABI> {
    let status = RestrictSelf::default().no_new_privs(false).apply().ok()?;
    match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => Some(effective_abi),
        LandlockStatus::NotEnabled | LandlockStatus::NotImplemented => None,
        // A status this crate version does not know yet: not something to rely on.
        #[allow(unreachable_patterns)]
        _ => None,
    }
}

/// The ABI whose rights the rules use on a kernel offering `kernel`: the kernel's, up to [`NEWEST`].
pub(crate) fn rights_abi(kernel: ABI) -> ABI {
    kernel.min(NEWEST)
}

/// Every ABI this crate version knows, oldest first: ABI `n` is at index `n - 1`.
const KNOWN: [ABI; 10] = [
    ABI::V1,
    ABI::V2,
    ABI::V3,
    ABI::V4,
    ABI::V5,
    ABI::V6,
    ABI::V7,
    ABI::V8,
    ABI::V9,
    ABI::V10,
];

/// The number of `abi`, for people and the protocol.
pub(crate) fn abi_number(abi: ABI) -> u32 {
    KNOWN
        .iter()
        .position(|a| *a == abi)
        .and_then(|i| u32::try_from(i + 1).ok())
        .unwrap_or(0)
}

/// The ABI numbered `number` ([`abi_number`]'s inverse), as the spawner receives it.
pub(crate) fn abi_from_number(number: u32) -> Option<ABI> {
    let index = usize::try_from(number).ok()?.checked_sub(1)?;
    KNOWN.get(index).copied()
}

/// The rights on a single file (device files, a task's log): no execution.
fn file_rights(abi: ABI) -> BitFlags<AccessFs> {
    AccessFs::from_file(abi) & !AccessFs::Execute
}

/// The ruleset of one command: see the module doc. `roots` and `files` that cannot be opened (gone
/// since they were listed) are left out, which only takes rights away.
pub(crate) fn ruleset(
    abi: ABI,
    roots: &[PathBuf],
    files: &[PathBuf],
) -> Result<RulesetCreated, RulesetError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))?
        .create()?;
    if let Some(fd) = open(Path::new("/")) {
        ruleset = ruleset.add_rule(PathBeneath::new(fd, AccessFs::from_read(abi)))?;
    }
    for root in roots {
        let Some(fd) = open(root) else { continue };
        // A configured root may be a single file: only file rights apply to it.
        let rights = if root.is_dir() {
            AccessFs::from_all(abi)
        } else {
            AccessFs::from_file(abi)
        };
        ruleset = ruleset.add_rule(PathBeneath::new(fd, rights))?;
    }
    let devices = DEVICES.iter().map(Path::new);
    for file in devices.chain(files.iter().map(PathBuf::as_path)) {
        if let Some(fd) = open(file) {
            ruleset = ruleset.add_rule(PathBeneath::new(fd, file_rights(abi)))?;
        }
    }
    Ok(ruleset)
}

fn open(path: &Path) -> Option<PathFd> {
    match PathFd::new(path) {
        Ok(fd) => Some(fd),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "not in the sandbox rules");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn abi_numbers_and_the_rights_in_use() {
        assert_eq!(abi_number(ABI::V1), 1);
        assert_eq!(abi_number(ABI::V7), 7);
        assert_eq!(abi_number(ABI::V10), 10);
        assert_eq!(rights_abi(ABI::V5), ABI::V5);
        assert_eq!(rights_abi(ABI::V10), NEWEST);
        for abi in KNOWN {
            assert_eq!(abi_from_number(abi_number(abi)), Some(abi));
        }
        assert_eq!(abi_from_number(0), None);
        assert_eq!(abi_from_number(11), None);
    }
}
