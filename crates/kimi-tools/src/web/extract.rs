//! The main content of an HTML page, as Markdown with a short metadata header.
//!
//! The reference uses trafilatura (plain text with a `---` metadata block). We use `dom_smoothie`, a
//! port of Mozilla's Readability, which picks the article out of navigation, footers and ads and writes
//! it as Markdown (headings, links, lists, code blocks and tables survive, which plain text loses).
//! When Readability finds no article (short pages, link lists), the whole `<body>` is converted instead,
//! without scripts, styles and other invisible parts. The header keeps trafilatura's shape and key
//! names (`title`, `author`, `url`, `description`, `sitename`, `date`), each present only when known.
//!
//! Parsing is CPU work on up to the body cap, so callers run [`main_content`] on a blocking thread.

use dom_smoothie::{Article, Config, Readability, TextMode};

/// Where pages declare their description, most specific first.
const DESCRIPTIONS: &[&str] = &[
    r#"meta[name="description"]"#,
    r#"meta[property="og:description"]"#,
    r#"meta[name="twitter:description"]"#,
];

/// Elements whose content a reader never sees; left out of the fallback conversion.
const INVISIBLE: &[&str] = &[
    "head", "script", "style", "meta", "noscript", "template", "svg", "iframe", "object",
];

/// The page's main content as Markdown, preceded by its metadata; `None` when the page has no text
/// (an empty shell filled in by JavaScript, for instance).
pub(super) fn main_content(html: &str, url: &str) -> Option<String> {
    let (metadata, body) = match article(html, url) {
        Some((article, description)) => {
            let body = article.text_content.trim().to_owned();
            (metadata_of(&article, &description, url), body)
        }
        None => whole_body(html, url),
    };
    if body.is_empty() {
        return None;
    }
    Some(format!("{metadata}{body}"))
}

/// Readability's article, if it finds one with text, and the description the page declares.
fn article(html: &str, url: &str) -> Option<(Article, String)> {
    let document = dom_query::Document::from(html);
    // Readability's excerpt falls back to the first paragraph, which would repeat the text: only a
    // description the page declares is worth a line.
    let description = DESCRIPTIONS
        .iter()
        .map(|selector| document.select(selector).attr_or("content", "").to_string())
        .find(|d| !d.trim().is_empty())
        .unwrap_or_default();
    let config = Config {
        text_mode: TextMode::Markdown,
        ..Config::default()
    };
    // The URL makes relative links absolute; Readability only takes absolute http(s) URLs.
    let base = reqwest::Url::parse(url)
        .is_ok_and(|u| matches!(u.scheme(), "http" | "https"))
        .then_some(url);
    let mut readability = Readability::with_document(document, base, Some(config)).ok()?;
    match readability.parse() {
        Ok(article) if !article.text_content.trim().is_empty() => Some((article, description)),
        Ok(_) => None,
        Err(e) => {
            tracing::debug!(error = %e, url, "no article found; converting the whole page");
            None
        }
    }
}

/// The metadata block and the Markdown of the whole `<body>` (or document, when there is no body).
fn whole_body(html: &str, url: &str) -> (String, String) {
    let document = dom_query::Document::from(html);
    let title = document.select("title").text().to_string();
    let body = document.select("body");
    let markdown = match body.nodes().first() {
        Some(node) => node.md(Some(INVISIBLE)),
        None => document.md(Some(INVISIBLE)),
    };
    let body = markdown.trim().to_owned();
    let metadata = header(&[("title", title.as_str()), ("url", url)]);
    (metadata, body)
}

fn metadata_of(article: &Article, description: &str, url: &str) -> String {
    header(&[
        ("title", &article.title),
        ("author", article.byline.as_deref().unwrap_or_default()),
        ("url", url),
        ("description", description),
        ("sitename", article.site_name.as_deref().unwrap_or_default()),
        ("date", article.published_time.as_deref().unwrap_or_default()),
    ])
}

/// `---`, one `key: value` line per non-empty value (on one line), `---`; empty when nothing is known.
fn header(fields: &[(&str, &str)]) -> String {
    let lines: Vec<String> = fields
        .iter()
        .map(|(key, value)| (key, value.split_whitespace().collect::<Vec<_>>().join(" ")))
        .filter(|(_, value)| !value.is_empty())
        .map(|(key, value)| format!("{key}: {value}\n"))
        .collect();
    if lines.is_empty() {
        return String::new();
    }
    format!("---\n{}---\n", lines.concat())
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const URL: &str = "https://example.com/blog/post";

    const ARTICLE: &str = r#"<!doctype html><html><head><title>Release notes</title>
<meta name="description" content="What changed in this release">
<meta name="author" content="Ferris Crab"></head>
<body><nav><a href="/">Home</a> | <a href="/blog">Blog</a></nav>
<article><h1>Version 2 is out</h1>
<p>The team is happy to announce a new version of <a href="/tool">the tool</a>. It is faster, smaller and
easier to use than any version before it, and it fixes many long-standing bugs.</p>
<h2>Highlights</h2>
<p>This release adds <strong>streaming</strong> everywhere, which lets clients show progress early.</p>
<ul><li>Streaming</li><li>Smaller binaries</li></ul>
<pre><code>tool --stream &amp;&amp; echo done</code></pre>
<table><tr><th>Feature</th><th>Status</th></tr><tr><td>streaming</td><td>stable</td></tr></table>
</article>
<footer>Copyright footer text</footer><script>var tracking = 1;</script></body></html>"#;

    #[test]
    fn an_article_becomes_markdown_with_its_metadata() {
        let text = main_content(ARTICLE, URL).unwrap();
        assert!(
            text.starts_with(
                "---\ntitle: Release notes\nauthor: Ferris Crab\nurl: https://example.com/blog/post\n\
                 description: What changed in this release\n---\n"
            ),
            "{text}"
        );
        for expected in [
            "## Highlights",
            "**streaming**",
            "[the tool](https://example.com/tool)",
            "- Streaming",
            "```\ntool --stream && echo done\n```",
            "| streaming | stable |",
        ] {
            assert!(text.contains(expected), "{expected:?} missing from:\n{text}");
        }
        for noise in ["Copyright footer", "tracking", "<p>", "Home"] {
            assert!(!text.contains(noise), "{noise:?} kept in:\n{text}");
        }
    }

    #[test]
    fn a_page_without_an_article_is_converted_whole() {
        let html = "<html><head><title>Links</title><style>p{}</style></head><body>\
                    <ul><li><a href=\"https://a.example/\">A</a></li><li><a href=\"https://b.example/\">B</a></li></ul>\
                    <script>x()</script></body></html>";
        let text = main_content(html, URL).unwrap();
        assert!(
            text.starts_with("---\ntitle: Links\nurl: https://example.com/blog/post\n---\n"),
            "{text}"
        );
        assert!(text.contains("[A](https://a.example/)"), "{text}");
        assert!(!text.contains("x()") && !text.contains("p{}"), "{text}");
    }

    #[test]
    fn a_script_shell_has_no_content() {
        let html = "<html><head><title>App</title><script src=\"a.js\"></script></head>\
                    <body><div id=\"root\"></div><noscript>Enable JavaScript.</noscript></body></html>";
        assert_eq!(main_content(html, URL), None);
        assert_eq!(main_content("", URL), None);
    }

    #[test]
    fn a_short_page_keeps_its_text_once() {
        let text = main_content("<html><body><p>Hello short page.</p></body></html>", URL).unwrap();
        assert_eq!(text.matches("Hello short page.").count(), 1, "{text}");
        assert!(text.ends_with("Hello short page."), "{text}");
    }

    #[test]
    fn header_lines_are_single_lines() {
        assert_eq!(
            header(&[("title", " a\n b "), ("author", "")]),
            "---\ntitle: a b\n---\n"
        );
        assert_eq!(header(&[("title", "  ")]), "");
    }
}
