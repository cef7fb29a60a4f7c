//! Markdown as HTML that is safe to put in a page: a transcript is untrusted input. HTML
//! written in the text is shown as text, a link goes only to `http`, `https` or `mailto`
//! (else it becomes plain text in the page), and an image is a link to it, never loaded.

use pulldown_cmark::{CowStr, Event, Options, Parser, Tag, TagEnd};

/// `text`, written as Markdown, as sanitised HTML.
pub(crate) fn to_html(text: &str) -> String {
    let options = Options::ENABLE_TABLES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_TASKLISTS
        | Options::ENABLE_GFM;
    let mut html = String::with_capacity(text.len() * 5 / 4);
    let mut unsafe_links = Vec::new();
    let events = Parser::new_ext(text, options).filter_map(|event| match event {
        // HTML in the text is shown as written.
        Event::Html(raw) | Event::InlineHtml(raw) => Some(Event::Text(raw)),
        // A link, or an image shown as a link to it; an unsafe one as its text only.
        Event::Start(
            Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }
            | Tag::Image {
                link_type,
                dest_url,
                title,
                id,
            },
        ) => {
            let safe = is_safe(&dest_url);
            unsafe_links.push(!safe);
            safe.then_some(Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }))
        }
        Event::End(TagEnd::Link | TagEnd::Image) => match unsafe_links.pop() {
            Some(true) => None,
            _ => Some(Event::End(TagEnd::Link)),
        },
        other => Some(other),
    });
    pulldown_cmark::html::push_html(&mut html, events);
    html
}

/// Whether a link may go to `url`: `http:`, `https:` or `mailto:`, or a place in the page.
fn is_safe(url: &CowStr) -> bool {
    // Browsers skip control characters and spaces inside a scheme (`java\tscript:`).
    let scheme: String = (url.chars())
        .filter(|c| !c.is_ascii_control() && !c.is_whitespace())
        .take_while(|c| *c != ':')
        .collect::<String>()
        .to_ascii_lowercase();
    let has_scheme = url.contains(':') && !scheme.contains(['/', '?', '#']);
    match has_scheme {
        true => ["http", "https", "mailto"].contains(&scheme.as_str()),
        false => url.starts_with('#'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_and_script_in_a_transcript_are_text() {
        let html = to_html("hi <script>alert(1)</script> <img src=x onerror=alert(2)>\n\n<b>x</b>");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
    }

    #[test]
    fn only_web_and_mail_links_are_links() {
        for bad in [
            "[x](javascript:alert(1))",
            "[x](JaVaScRiPt:alert(1))",
            "[x](java\tscript:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "[x](vbscript:x)",
            "![x](javascript:alert(1))",
            "<javascript:alert(1)>",
            "[x](&#106;avascript:alert(1))",
            "[x](jav&#x09;ascript:alert(1))",
            "[x][r]\n\n[r]: javascript:alert(1)",
            "[x](<javascript:alert(1)>)",
        ] {
            let html = to_html(bad);
            assert!(!html.contains("href"), "{bad}: {html}");
        }
        let good = to_html("[docs](https://example.com/a?b=1) ![pic](https://example.com/p.png)");
        assert!(
            good.contains("<a href=\"https://example.com/a?b=1\">docs</a>"),
            "{good}"
        );
        assert!(!good.contains("<img"), "{good}");
    }

    #[test]
    fn markdown_is_rendered() {
        let html = to_html("# Title\n\n**bold** and `code`\n\n```rust\nfn main() {}\n```");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(
            html.contains("<pre><code class=\"language-rust\">"),
            "{html}"
        );
    }
}
