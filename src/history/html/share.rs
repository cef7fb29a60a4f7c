//! A conversation as one self-contained HTML file, to share: its styles inline, no script,
//! nothing the browser fetches (a policy in the file says so, and the images it shows are
//! the `data:` URLs the records hold), its tool output folded as the web view folds it.

use super::message;
use crate::archive::Archive;
use crate::consumers::redact::Redactor;
use crate::consumers::sessions::query::{MessageRecord, Session, format_time};
use crate::error::Result;
use maud::{DOCTYPE, Markup, PreEscaped, html};

/// The file's only styles.
const STYLE: &str = include_str!("share.css");

/// What the file lets the browser do: apply its own styles and show `data:` images; fetch,
/// run or frame nothing.
const POLICY: &str = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; \
                      form-action 'none'; base-uri 'none'";

/// One conversation of a shared file: a session and its messages, in order.
pub(crate) struct Conversation<'a> {
    pub(crate) session: &'a Session,
    pub(crate) messages: &'a [MessageRecord],
}

/// The file that shares session `s` (and its subagents' conversations after its own, with
/// `subagents`), read from `archive`, every secret replaced when a `redactor` is given, as
/// exported at `exported_ms`. Every face that shares a session writes this file, so that
/// the same session and options give the same file, but for the time of its export. `Err`
/// when the archive cannot be read.
pub(crate) fn shared_file(
    archive: &mut Archive,
    s: &Session,
    subagents: bool,
    redactor: Option<&Redactor>,
    exported_ms: i64,
) -> Result<String> {
    let read = crate::history::conversations(archive, s, subagents, redactor)?;
    let conversations: Vec<Conversation> = (read.iter())
        .map(|(session, messages)| Conversation { session, messages })
        .collect();
    Ok(document(&conversations, redactor.is_some(), exported_ms))
}

/// The file that shares `conversations` (a session, then any subagents of it), exported at
/// `exported_ms`; `redacted` says whether its secrets were replaced, which its header says.
pub(crate) fn document(conversations: &[Conversation], redacted: bool, exported_ms: i64) -> String {
    let Some(first) = conversations.first() else {
        return String::new();
    };
    let title = title_of(first.session);
    let exported = format_time(exported_ms);
    let secrets = match redacted {
        true => "secrets redacted",
        false => "not redacted: it may hold secrets",
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta http-equiv="Content-Security-Policy" content=(POLICY);
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="generator" content="transcript-sync";
                title { (title) }
                style { (PreEscaped(STYLE)) }
            }
            body {
                main {
                    p.exported {
                        "A conversation with a coding agent, archived by transcript-sync and exported "
                        time.exported datetime=(exported) { (exported) } " (" (secrets) ")."
                    }
                    h1 { (title) }
                    (heading(first.session))
                    (conversation(first))
                    @for sub in &conversations[1..] {
                        h2 { "Subagent: " (title_of(sub.session)) }
                        (heading(sub.session))
                        (conversation(sub))
                    }
                }
            }
        }
    }
    .into_string()
}

fn title_of(s: &Session) -> &str {
    s.title.as_deref().unwrap_or("(untitled)")
}

/// Who, where and when: the agent, project, times, models and id of session `s`.
fn heading(s: &Session) -> Markup {
    let time = |t: Option<i64>| t.map(format_time).unwrap_or_else(|| "-".into());
    html! {
        dl.meta {
            dt { "Agent" } dd { (s.harness) }
            dt { "Project" } dd { (s.project.as_deref().unwrap_or("-")) }
            @if let Some(b) = &s.branch { dt { "Branch" } dd { (b) } }
            dt { "Started" } dd { (time(s.started)) }
            dt { "Last active" } dd { (time(s.last_activity)) }
            dt { "Messages" } dd { (s.user_messages) " from the user, " (s.assistant_messages) " from the assistant" }
            @if !s.models.is_empty() { dt { "Models" } dd { (s.models.join(", ")) } }
            dt { "Session" } dd { code { (s.id) } }
        }
    }
}

fn conversation(c: &Conversation) -> Markup {
    html! {
        section.conversation {
            @for m in c.messages { (message(m.seq, &m.harness, &m.role, m.at_ms, &m.record)) }
        }
    }
}
