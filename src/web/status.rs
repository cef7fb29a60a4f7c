//! The status page: the archive's status (the service's [`Status`]) as the web view shows it,
//! a summary and tables of the sinks, the machines pulled and the sources.

use crate::history::status::{Status, megabytes, share_of};
use maud::{Markup, html};

/// The status as the page's body.
pub(super) fn body(st: &Status) -> Markup {
    let daemon = match (st.running_pid, &st.caught_up) {
        (Some(pid), Some(_)) => format!("running (pid {pid}), caught up"),
        (Some(pid), None) => format!("running (pid {pid}), backfilling"),
        (None, _) => "not running".to_owned(),
    };
    let t = &st.totals;
    let i = &st.index;
    html! {
        h1 { "Status" }
        div #status {
            dl.status {
                dt { "Archive" } dd { code { (st.archive) } }
                dt { "Daemon" } dd { (daemon) }
                dt { "Subscribers" } dd { code { (st.socket) } @if !st.socket_present { " (no socket)" } }
                dt { "Session index" } dd {
                    @match i.behind {
                        0 => { "up to date at seq " (i.seq) }
                        n => { "at seq " (i.seq) ", " (n) " records to index" }
                    }
                    " (" (megabytes(i.bytes)) ", " code { (i.path) } ")"
                }
                @if let Some(s) = &st.storage {
                    dt { "Storage" } dd {
                        (megabytes(s.stored_bytes)) " for " (megabytes(s.record_bytes)) " of records"
                        (share_of(s.stored_bytes, s.record_bytes)) ", " (s.dictionaries) " dictionaries"
                    }
                }
                dt { "Sources" } dd { (t.sources) " (" (t.gone) " gone)" }
                dt { "Records" } dd { (t.records) " archived, " (t.rejects) " rejected" }
                dt { "Not yet archived" } dd { (t.lag) " bytes, " (t.held_back) " held back" }
                dt { "Events" } dd { (t.events) }
            }
            @for s in st.sources.iter().filter(|s| s.invalid.is_some()) {
                p.error { "Source " (s.source) " is not read: its cursor row is invalid (" (s.invalid.as_deref().unwrap_or_default()) ")." }
            }
            (sinks(st))
            (pulled(st))
            (sources(st))
        }
    }
}

fn sinks(st: &Status) -> Markup {
    html! {
        @if !st.sinks.is_empty() {
            h2 { "Sinks" }
            table.sinks {
                thead { tr { th { "Name" } th { "Type" } th { "To" } th.num { "Seq" } th.num { "Behind" } th { "Waiting since" } th { "Last success" } th { "Failing since" } th { "Last error" } th.num { "Dead letters" } } }
                tbody {
                    @for s in &st.sinks {
                        tr {
                            td { (s.name) } td { (s.kind) } td { code { (s.target) } }
                            td.num { (s.seq) }
                            td.num { (s.lag_records) " records" @if let Some(b) = s.lag_bytes { ", " (b) " bytes" } }
                            td { (s.waiting_since.as_deref().unwrap_or("-")) }
                            td { (s.last_success.as_deref().unwrap_or("never")) }
                            td { (s.failing_since.as_deref().unwrap_or("-")) }
                            td { (s.last_error.as_deref().unwrap_or("")) }
                            td.num { (s.dead_letters) }
                        }
                    }
                }
            }
            @if st.sinks.iter().any(|s| s.dead_letters > 0) {
                p { "A sink's dead letters are shipped again by " code { "transcript-sync sink retry NAME" } "." }
            }
        }
    }
}

fn pulled(st: &Status) -> Markup {
    html! {
        @if !st.pulled.is_empty() {
            h2 { "Other machines" }
            table.pulled {
                thead { tr { th { "Machine" } th { "UUID" } th { "Sink" } th.num { "Sources" } th.num { "Records" } th { "Last pulled" } th { "Last shipped" } th.num { "Lag (s)" } } }
                tbody {
                    @for p in &st.pulled {
                        tr {
                            td { (p.machine) } td { code { (p.uuid) } } td { (p.sink.as_deref().unwrap_or("-")) }
                            td.num { (p.sources) } td.num { (p.records) }
                            td { (p.last_pulled.as_deref().unwrap_or("never")) }
                            td { (p.last_shipped.as_deref().unwrap_or("-")) }
                            td.num { (p.lag_seconds.map_or_else(|| "-".to_owned(), |l| format!("{l:.1}"))) }
                        }
                    }
                }
            }
        }
    }
}

fn sources(st: &Status) -> Markup {
    html! {
        @if !st.sources.is_empty() {
            h2 { "Sources" }
            table.sources {
                thead { tr { th.num { "Id" } th { "Agent" } th { "Path" } th.num { "Generation" } th.num { "Cursor" } th.num { "Size" } th.num { "Records" } th.num { "Rejects" } th.num { "Behind" } th.num { "Held back" } th { "Last archived" } th { "State" } } }
                tbody {
                    @for s in &st.sources {
                        tr {
                            td.num { (s.source) } td { (s.harness) } td { code { (s.path) } }
                            td.num { (s.generation) } td.num { (s.cursor) }
                            td.num { (s.size.map_or_else(|| "-".to_owned(), |n| n.to_string())) }
                            td.num { (s.records) } td.num { (s.rejects) }
                            td.num { (s.lag.map_or_else(|| "-".to_owned(), |l| l.to_string())) }
                            td.num { (s.held_back) }
                            td { (s.last_archived.as_deref().unwrap_or("-")) }
                            td { @if s.invalid.is_some() { "not read" } @else if s.gone { "gone" } @else { "live" } }
                        }
                    }
                }
            }
        }
    }
}
