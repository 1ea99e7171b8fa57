//! The first place where two JSON values differ, as a JSON path and two short excerpts.

use serde_json::Value;

/// Where a replayed request first differs from the recorded one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// JSON path (`$.messages[3].content[0].text`).
    pub path: String,
    /// What the recording has there (an excerpt; `nothing` when absent).
    pub recorded: String,
    /// What this run has there.
    pub got: String,
}

/// Characters of context shown on each side of the first differing character of two strings.
const CONTEXT: usize = 30;
/// Longest excerpt of a non-string value.
const MAX_EXCERPT: usize = 80;

/// The first difference between `recorded` and `got`, in document order (object keys in the
/// recording's order, then keys only this run has); `None` when they are equal.
pub fn first_difference(recorded: &Value, got: &Value) -> Option<Difference> {
    let mut path = "$".to_owned();
    find(recorded, got, &mut path)
}

fn find(recorded: &Value, got: &Value, path: &mut String) -> Option<Difference> {
    match (recorded, got) {
        (Value::Object(a), Value::Object(b)) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(*k)));
            for key in keys {
                let found = within(path, &format!(".{key}"), |path| match (a.get(key), b.get(key)) {
                    (Some(x), Some(y)) => find(x, y, path),
                    (x, y) => Some(absent(path, x, y)),
                });
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(a), Value::Array(b)) => {
            for i in 0..a.len().max(b.len()) {
                let found = within(path, &format!("[{i}]"), |path| match (a.get(i), b.get(i)) {
                    (Some(x), Some(y)) => find(x, y, path),
                    (x, y) => Some(absent(path, x, y)),
                });
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::String(a), Value::String(b)) if a != b => {
            let (recorded, got) = excerpts(a, b);
            Some(Difference {
                path: path.clone(),
                recorded,
                got,
            })
        }
        (a, b) if a != b => Some(Difference {
            path: path.clone(),
            recorded: short(a),
            got: short(b),
        }),
        _ => None,
    }
}

fn within<T>(path: &mut String, step: &str, f: impl FnOnce(&mut String) -> T) -> T {
    let len = path.len();
    path.push_str(step);
    let found = f(path);
    path.truncate(len);
    found
}

fn absent(path: &str, recorded: Option<&Value>, got: Option<&Value>) -> Difference {
    let show = |v: Option<&Value>| v.map_or_else(|| "nothing".to_owned(), short);
    Difference {
        path: path.to_owned(),
        recorded: show(recorded),
        got: show(got),
    }
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= MAX_EXCERPT {
        return text;
    }
    let cut: String = text.chars().take(MAX_EXCERPT).collect();
    format!("{cut}…")
}

/// Both strings around their first differing character, quoted as JSON.
fn excerpts(a: &str, b: &str) -> (String, String) {
    let common = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    let excerpt = |s: &str| {
        let start = common.saturating_sub(CONTEXT);
        let total = s.chars().count();
        let end = (common + CONTEXT).min(total);
        let middle: String = s.chars().skip(start).take(end - start).collect();
        let mut text = Value::String(middle).to_string();
        if start > 0 {
            text.insert(1, '…');
        }
        if end < total {
            text.insert(text.len() - 1, '…');
        }
        text
    };
    (excerpt(a), excerpt(b))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn names_the_first_difference_in_document_order() {
        let recorded = json!({"system_prompt": "s", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "list the files please"}]},
        ]});
        assert_eq!(first_difference(&recorded, &recorded), None);
        let got = json!({"system_prompt": "s", "messages": [
            {"role": "user", "content": [{"type": "text", "text": "list the folders please"}]},
        ]});
        assert_eq!(
            first_difference(&recorded, &got),
            Some(Difference {
                path: "$.messages[0].content[0].text".into(),
                recorded: "\"list the files please\"".into(),
                got: "\"list the folders please\"".into(),
            })
        );
        let longer = json!({"system_prompt": "s", "messages": [recorded["messages"][0], {"role": "user"}]});
        let found = first_difference(&recorded, &longer).unwrap();
        assert_eq!(found.path, "$.messages[1]");
        assert_eq!(found.recorded, "nothing");
        let found = first_difference(&json!({"a": 1}), &json!({"a": 1, "b": true})).unwrap();
        assert_eq!((found.path.as_str(), found.got.as_str()), ("$.b", "true"));
    }

    #[test]
    fn long_strings_are_cut_around_the_difference() {
        let a = format!("{}A{}", "x".repeat(100), "y".repeat(100));
        let b = format!("{}B{}", "x".repeat(100), "y".repeat(100));
        let found = first_difference(&json!(a), &json!(b)).unwrap();
        assert_eq!(found.path, "$");
        let xs = "x".repeat(30);
        let ys = "y".repeat(29);
        assert_eq!(found.recorded, format!("\"…{xs}A{ys}…\""));
        assert_eq!(found.got, format!("\"…{xs}B{ys}…\""));
    }
}
