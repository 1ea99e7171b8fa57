//! Task ids: the kind, a dash and eight random lower-case letters or digits (`bash-k3x9a0qz`), as the
//! reference makes them.

use super::model::TaskKind;

const ALPHABET: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";
const SUFFIX_LEN: usize = 8;

/// A fresh id for a task of `kind`.
pub fn new_task_id(kind: TaskKind) -> String {
    let mut id = String::with_capacity(kind.as_str().len() + 1 + SUFFIX_LEN);
    id.push_str(kind.as_str());
    id.push('-');
    let mut taken = 0;
    while taken < SUFFIX_LEN {
        for byte in uuid::Uuid::new_v4().into_bytes() {
            // 252 = 7 × 36: bytes above it would favour the first letters.
            if byte < 252 && taken < SUFFIX_LEN {
                id.push(char::from(ALPHABET[usize::from(byte % 36)]));
                taken += 1;
            }
        }
    }
    id
}

/// Whether `id` may name a task directory (reference: `^[a-z0-9][a-z0-9\-]{1,24}$`). Anything else,
/// such as a path, is treated as an unknown task.
pub fn is_valid_task_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    let allowed = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    (2..=25).contains(&bytes.len())
        && bytes.first().is_some_and(allowed)
        && bytes[1..].iter().all(|b| allowed(b) || *b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_have_the_reference_shape() {
        for kind in [TaskKind::Bash, TaskKind::Agent] {
            let id = new_task_id(kind);
            let (prefix, suffix) = id.split_once('-').unwrap();
            assert_eq!(prefix, kind.as_str());
            assert_eq!(suffix.len(), 8);
            assert!(suffix.bytes().all(|b| ALPHABET.contains(&b)), "{id}");
            assert!(is_valid_task_id(&id));
        }
        assert_ne!(new_task_id(TaskKind::Bash), new_task_id(TaskKind::Bash));
    }

    #[test]
    fn validation_follows_the_reference_pattern() {
        for ok in ["bash-abc12345", "ab", "a-", "0123456789012345678901234"] {
            assert!(is_valid_task_id(ok), "{ok}");
        }
        for bad in [
            "",
            "a",
            "-abc",
            "Bash-1",
            "../etc",
            "a/b",
            "bash_1",
            "01234567890123456789012345",
        ] {
            assert!(!is_valid_task_id(bad), "{bad}");
        }
    }
}
