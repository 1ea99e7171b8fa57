//! The YAML front matter at the top of a Markdown file (reference `utils/frontmatter.py`): a first line
//! of `---`, the YAML, and a closing `---` line. Without a closing line there is no front matter.

use serde_yaml_ng::{Mapping, Value};

/// Why a front matter block could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrontmatterError {
    /// The block is not valid YAML.
    #[error("Invalid frontmatter YAML.")]
    InvalidYaml,
    /// The block is YAML but not a mapping (`- a` or a bare scalar).
    #[error("Frontmatter YAML must be a mapping.")]
    NotAMapping,
}

/// The lines between the opening and closing `---`, or `None` when `text` has no complete block.
fn block(text: &str) -> Option<(Vec<&str>, usize)> {
    let mut lines = text.lines();
    if lines.next()?.trim() != "---" {
        return None;
    }
    let mut inner = Vec::new();
    for line in lines {
        if line.trim() == "---" {
            let consumed = inner.len() + 2;
            return Some((inner, consumed));
        }
        inner.push(line);
    }
    None
}

/// The front matter of `text` as a mapping; `Ok(None)` when there is none or it is empty.
pub fn parse(text: &str) -> Result<Option<Mapping>, FrontmatterError> {
    let Some((lines, _)) = block(text) else {
        return Ok(None);
    };
    let yaml = lines.join("\n");
    let yaml = yaml.trim();
    if yaml.is_empty() {
        return Ok(None);
    }
    match serde_yaml_ng::from_str::<Value>(yaml) {
        Ok(Value::Mapping(map)) => Ok(Some(map)),
        // `---\n~\n---` loads as None in PyYAML, which the reference treats as "not a mapping" too.
        Ok(_) => Err(FrontmatterError::NotAMapping),
        Err(_) => Err(FrontmatterError::InvalidYaml),
    }
}

/// `text` without its front matter block (unchanged when it has none).
pub fn strip(text: &str) -> &str {
    let Some((_, consumed)) = block(text) else {
        return text;
    };
    // Skip `consumed` lines, keeping the line endings of what follows.
    let mut rest = text;
    for _ in 0..consumed {
        match rest.find('\n') {
            Some(end) => rest = &rest[end + 1..],
            None => return "",
        }
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn get<'a>(map: &'a Mapping, key: &str) -> Option<&'a Value> {
        map.get(Value::String(key.to_owned()))
    }

    #[test]
    fn reads_a_mapping_between_the_fences() {
        let map = parse("---\nname: x\ntype: flow\n---\nbody\n").unwrap().unwrap();
        assert_eq!(get(&map, "name"), Some(&Value::String("x".into())));
        assert_eq!(get(&map, "type"), Some(&Value::String("flow".into())));
    }

    #[test]
    fn no_block_means_no_front_matter() {
        assert_eq!(parse("body only"), Ok(None));
        assert_eq!(parse("---\nname: x\nno closing line"), Ok(None));
        assert_eq!(parse("---\n\n---\nbody"), Ok(None));
        assert_eq!(parse(""), Ok(None));
        // The opening fence must be the very first line.
        assert_eq!(parse("\n---\nname: x\n---\n"), Ok(None));
    }

    #[test]
    fn broken_yaml_and_non_mappings_are_errors() {
        assert_eq!(
            parse("---\nname: [unclosed\n---\n"),
            Err(FrontmatterError::InvalidYaml)
        );
        assert_eq!(parse("---\n- a\n- b\n---\n"), Err(FrontmatterError::NotAMapping));
        assert_eq!(parse("---\njust text\n---\n"), Err(FrontmatterError::NotAMapping));
    }

    #[test]
    fn strip_keeps_everything_after_the_block() {
        assert_eq!(strip("---\na: 1\n---\nline 1\r\nline 2\n"), "line 1\r\nline 2\n");
        assert_eq!(strip("---\na: 1\n---"), "");
        assert_eq!(strip("no block\n"), "no block\n");
        assert_eq!(strip("---\nunclosed\n"), "---\nunclosed\n");
    }
}
