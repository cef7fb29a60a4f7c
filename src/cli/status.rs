//! `status` for people: the archive's status as text.

use crate::history::status::*;
use std::io::{self, Write};

/// Writes the status for people: a summary, and with `sources` a row for every source.
pub(crate) fn write_text(out: &mut impl Write, st: &Status, sources: bool) -> io::Result<()> {
    match (st.running_pid, &st.caught_up) {
        (Some(pid), Some(c)) => writeln!(
            out,
            "archive {} (run active, pid {pid}; caught up sources={} records={}{})",
            st.archive,
            c["sources"],
            c["records"],
            match st.index.behind {
                0 => String::new(),
                n => format!("; the session index is {n} records behind"),
            }
        )?,
        (Some(pid), None) => writeln!(
            out,
            "archive {} (run active, pid {pid}; backfilling)",
            st.archive
        )?,
        (None, _) => writeln!(out, "archive {} (no run active)", st.archive)?,
    }
    let listening = match (st.running_pid, st.socket_present) {
        (Some(_), true) => "subscribers attach at",
        (Some(_), false) => {
            "no socket for subscribers (a run --once, or one that could not make it) at"
        }
        (None, _) => "a run listens for subscribers at",
    };
    writeln!(out, "{listening} {}", st.socket)?;
    if sources {
        write_sources(out, st)?;
    }
    for s in st.sources.iter().filter(|s| s.invalid.is_some()) {
        let why = s.invalid.as_deref().unwrap_or_default();
        writeln!(
            out,
            "source {} is not read: its cursor row is invalid ({why}); see the invalid_cursor \
             event",
            s.source
        )?;
    }
    let t = &st.totals;
    writeln!(
        out,
        "total: sources={} gone={} records={} rejects={} held_back={} lag={} events={}",
        t.sources, t.gone, t.records, t.rejects, t.held_back, t.lag, t.events
    )?;
    if !sources && !st.sources.is_empty() {
        writeln!(out, "(a row for each source: status --sources)")?;
    }
    if let Some(s) = &st.storage {
        writeln!(out, "{}", storage_line(s))?;
    }
    let i = &st.index;
    match i.behind {
        0 => writeln!(
            out,
            "session index: up to date at seq {} ({}, {})",
            i.seq,
            megabytes(i.bytes),
            i.path
        )?,
        n => writeln!(
            out,
            "session index: at seq {}, {n} records to index ({}, {})",
            i.seq,
            megabytes(i.bytes),
            i.path
        )?,
    }
    st.sinks.iter().try_for_each(|s| write_sink(out, s))?;
    for p in &st.pulled {
        let never = || "never".to_owned();
        write!(
            out,
            "pulled from machine {} ({}): {} records of {} transcripts; last pulled {}",
            p.machine,
            p.uuid,
            p.records,
            p.sources,
            p.last_pulled.clone().unwrap_or_else(never)
        )?;
        match p.lag_seconds {
            Some(lag) => writeln!(out, ", {lag:.3}s after it was shipped")?,
            None => writeln!(out)?,
        }
    }
    Ok(())
}

/// One sink's lines: where it stands, how it last went, its dead letters.
fn write_sink(out: &mut impl Write, s: &SinkStatus) -> io::Result<()> {
    let at = |t: &Option<String>| t.clone().unwrap_or_else(|| "never".into());
    write!(
        out,
        "sink {} ({} {}): shipped to seq {}",
        s.name, s.kind, s.target, s.seq
    )?;
    let bytes = match s.lag_bytes {
        Some(b) => indicatif::HumanBytes(b as u64).to_string(),
        None => "bytes not counted".into(),
    };
    match (s.lag_records, &s.waiting_since) {
        (0, _) => write!(out, ", up to date")?,
        (n, Some(since)) => write!(out, ", {n} records ({bytes}) waiting since {since}")?,
        (n, None) => write!(out, ", {n} records ({bytes}) waiting")?,
    }
    writeln!(out, "; last success {}", at(&s.last_success))?;
    if let (Some(since), Some(error)) = (&s.failing_since, &s.last_error) {
        writeln!(out, "  failing since {since}: {error}")?;
    } else if let Some(error) = &s.last_error {
        writeln!(out, "  last error at {}: {error}", at(&s.last_error_at))?;
    }
    if s.dead_letters > 0 {
        writeln!(
            out,
            "  {} dead letters (records refused for good); `transcript-sync sink retry {}` ships them again",
            s.dead_letters, s.name
        )?;
    }
    Ok(())
}

/// The table of sources, one row each.
fn write_sources(out: &mut impl Write, st: &Status) -> io::Result<()> {
    writeln!(
        out,
        "{:>6} {:>4} {:>12} {:>12} {:>10} {:>8} {:>9} {:>7}  {:<20}  {:<11}  PATH",
        "SOURCE",
        "GEN",
        "CURSOR",
        "SIZE",
        "LAG",
        "HELD",
        "RECORDS",
        "REJECTS",
        "LAST ARCHIVED",
        "HARNESS"
    )?;
    for s in &st.sources {
        let dash = || "-".to_string();
        let size = if s.gone {
            "gone".into()
        } else {
            s.size.map_or_else(dash, |v| v.to_string())
        };
        writeln!(
            out,
            "{:>6} {:>4} {:>12} {:>12} {:>10} {:>8} {:>9} {:>7}  {:<20}  {:<11}  {}",
            s.source,
            s.generation,
            s.cursor,
            size,
            s.lag.map_or_else(dash, |v| v.to_string()),
            s.held_back,
            s.records,
            s.rejects,
            s.last_archived.clone().unwrap_or_else(dash),
            s.harness,
            s.path
        )?;
    }
    writeln!(
        out,
        "GEN, CURSOR and HELD are the current generation's; RECORDS and REJECTS count every \
         generation"
    )?;
    Ok(())
}

fn storage_line(s: &crate::archive::Storage) -> String {
    format!(
        "storage: records {} stored in {}{}; {} compression dictionar{}",
        megabytes(s.record_bytes),
        megabytes(s.stored_bytes),
        share_of(s.stored_bytes, s.record_bytes),
        s.dictionaries,
        if s.dictionaries == 1 { "y" } else { "ies" }
    )
}
