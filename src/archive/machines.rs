//! What the archive keeps of other machines, whose records a sink with `pull = true` brings
//! here: the machines (`machines`), where each pull stands (`pulls`), and the sources pulled
//! (sources whose `machine` is not 0, this machine).

use super::{Archive, path_from_blob};
use crate::domain::SourceId;
use crate::error::Result;
use std::path::PathBuf;

/// Another machine, as the archive knows it.
#[derive(Debug, Clone)]
pub struct MachineRow {
    /// Its id in this archive (0 is this machine, never a row).
    pub id: i64,
    /// Its UUID, the machine id of its own archive.
    pub uuid: String,
    /// Its host name, a label.
    pub host: String,
}

/// A source pulled from another machine.
#[derive(Debug, Clone)]
pub struct PulledSource {
    /// Its id here (negative).
    pub id: SourceId,
    /// The machine's id here.
    pub machine: i64,
    /// Its id on its machine.
    pub remote_id: i64,
    /// Its generation.
    pub generation: i64,
    /// Its path on its machine.
    pub path: PathBuf,
}

/// Where a pull from one machine stands.
#[derive(Debug, Clone)]
pub struct PullPlace {
    /// The machine's id here.
    pub machine: i64,
    /// The last id pulled from the store.
    pub pulled_id: i64,
    /// Where its sessions were last read, as the store orders them.
    pub sessions_at: String,
}

/// A machine with what has been pulled of it, for `status`.
#[derive(Debug, Clone)]
pub struct PulledMachine {
    /// Its host name.
    pub host: String,
    /// Its UUID.
    pub uuid: String,
    /// The sink it is pulled from, if a pull has recorded its place.
    pub sink: Option<String>,
    /// Its records pulled.
    pub records: i64,
    /// When records of it were last pulled (Unix ms).
    pub last_pulled_ms: Option<i64>,
    /// When the last record pulled was shipped by its machine (Unix ms).
    pub last_shipped_ms: Option<i64>,
    /// Its sources here.
    pub sources: i64,
}

impl Archive {
    /// Every other machine known here, by id. An archive of an earlier schema, read without
    /// upgrading it, knows none.
    pub fn machines(&self) -> Result<Vec<MachineRow>> {
        if !self.has_table("machines")? {
            return Ok(Vec::new());
        }
        self.rows("SELECT id, uuid, host FROM machines ORDER BY id", [], |r| {
            Ok(MachineRow {
                id: r.get(0)?,
                uuid: r.get(1)?,
                host: r.get(2)?,
            })
        })
    }

    /// Every source pulled from another machine.
    pub fn pulled_sources(&self) -> Result<Vec<PulledSource>> {
        let sql = "SELECT id, machine, remote_id, generation, path FROM sources WHERE machine <> 0";
        self.rows(sql, [], |r| {
            Ok(PulledSource {
                id: r.get(0)?,
                machine: r.get(1)?,
                remote_id: r.get(2)?,
                generation: r.get(3)?,
                path: path_from_blob(r.get(4)?),
            })
        })
    }

    /// Where sink `sink`'s pull stands, machine by machine.
    pub fn pull_places(&self, sink: &str) -> Result<Vec<PullPlace>> {
        let sql = "SELECT machine, pulled_id, sessions_at FROM pulls WHERE sink = ?1";
        self.rows(sql, [sink], |r| {
            Ok(PullPlace {
                machine: r.get(0)?,
                pulled_id: r.get(1)?,
                sessions_at: r.get(2)?,
            })
        })
    }

    /// The lowest source id in the archive (pulled sources count down from -1), 0 for none.
    pub fn lowest_source_id(&self) -> Result<SourceId> {
        let sql = "SELECT coalesce(min(id), 0) FROM sources";
        self.db(self.conn.query_row(sql, [], |r| r.get(0)))
    }

    /// Every other machine with what has been pulled of it, by host name.
    pub fn pulled_machines(&self) -> Result<Vec<PulledMachine>> {
        if !self.has_table("machines")? {
            return Ok(Vec::new());
        }
        let sql = "SELECT m.host, m.uuid, p.sink, coalesce(p.records, 0), p.last_pulled_ms,
                    p.last_shipped_ms, (SELECT count(*) FROM sources s WHERE s.machine = m.id)
             FROM machines m LEFT JOIN pulls p ON p.machine = m.id
             ORDER BY m.host, m.uuid";
        self.rows(sql, [], |r| {
            Ok(PulledMachine {
                host: r.get(0)?,
                uuid: r.get(1)?,
                sink: r.get(2)?,
                records: r.get(3)?,
                last_pulled_ms: r.get(4)?,
                last_shipped_ms: r.get(5)?,
                sources: r.get(6)?,
            })
        })
    }

    /// The machine (its id here and host name) of pulled source `source`; `None` for this
    /// machine's sources and unknown ones.
    pub fn machine_of_source(&self, source: SourceId) -> Result<Option<(i64, String)>> {
        let sql = "SELECT s.machine, m.host FROM sources s JOIN machines m ON m.id = s.machine
                   WHERE s.id = ?1";
        let found = self.rows(sql, [source], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(found.into_iter().next())
    }
}
