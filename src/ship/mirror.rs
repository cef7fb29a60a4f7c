//! The mirror destination: each source's archived lines, appended as they commit, to
//! `DIR/<harness>/<path under its root>`, byte for byte, each with its `\n`.
//!
//! A file's length is committed with the sink's cursor. When the sink starts, a longer file
//! (lines written after the last acknowledged batch) is cut back to that length, and lines
//! past it are written again; a shorter one (changed behind the mirror's back) is written
//! again from the archive. When a source starts a new generation, the earlier one is kept as
//! `<name>.gen<N>.jsonl`; when another source takes a mirrored path (the file was replaced),
//! the earlier source's copy is kept as `<name>.source<ID>.jsonl`. A rename not yet committed
//! is undone at the next start.

use super::{Destination, Failure};
use crate::archive::{Archive, ExportRow};
use crate::error::{IoContext, Result};
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Component, Path, PathBuf};

/// Where a source's current generation is mirrored, and how much of it is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct FileState {
    /// Relative to the mirror's directory.
    path: PathBuf,
    generation: i64,
    length: u64,
}

/// A mirror directory.
pub struct Mirror {
    name: String,
    dir: PathBuf,
    roots: Vec<(PathBuf, String)>,
    db: PathBuf,
    /// Each source's current file, as written.
    files: HashMap<i64, FileState>,
    /// As committed with the cursor.
    committed: HashMap<i64, FileState>,
    changed: BTreeSet<i64>,
}

impl Mirror {
    /// Opens the mirror `name` into `dir`, putting back every file to what the archive says
    /// was shipped to it.
    pub fn open(
        name: &str,
        dir: &Path,
        roots: Vec<(PathBuf, String)>,
        db: &Path,
    ) -> Result<Mirror> {
        std::fs::create_dir_all(dir).at_path(dir)?;
        let archive = Archive::open(db)?;
        let committed = load_state(&archive, name)?;
        let mut mirror = Mirror {
            name: name.to_owned(),
            dir: dir.to_owned(),
            roots,
            db: db.to_owned(),
            files: committed.clone(),
            committed,
            changed: BTreeSet::new(),
        };
        let sources: Vec<i64> = mirror.committed.keys().copied().collect();
        mirror.restore(&sources, &archive)?;
        Ok(mirror)
    }

    /// Puts the files of `sources` back to their committed state.
    fn restore(&mut self, sources: &[i64], archive: &Archive) -> Result<()> {
        self.files.clone_from(&self.committed);
        self.changed.clear();
        for source in sources {
            let Some(state) = self.committed.get(source).cloned() else {
                continue;
            };
            self.restore_file(*source, &state, archive)?;
        }
        Ok(())
    }

    fn restore_file(&self, source: i64, state: &FileState, archive: &Archive) -> Result<()> {
        let path = self.dir.join(&state.path);
        // A displacement not committed: its file goes back where the state says it is.
        for moved in [
            gen_name(&path, state.generation),
            source_name(&path, source),
        ] {
            if moved.exists() {
                std::fs::rename(&moved, &path).at_path(&moved)?;
            }
        }
        let length = std::fs::metadata(&path).map_or(0, |m| m.len());
        if length > state.length {
            let file = OpenOptions::new().write(true).open(&path).at_path(&path)?;
            file.set_len(state.length).at_path(&path)?;
            file.sync_all().at_path(&path)?;
        } else if length < state.length {
            log::warn!(
                "sink {}: {} holds {length} bytes, fewer than the {} shipped to it; writing it again from the archive",
                self.name,
                path.display(),
                state.length
            );
            self.rewrite(source, state, &path, archive)?;
        }
        Ok(())
    }

    /// Writes `path` again from the archive's records of `source` and the state's generation
    /// that the sink has shipped.
    fn rewrite(
        &self,
        source: i64,
        state: &FileState,
        path: &Path,
        archive: &Archive,
    ) -> Result<()> {
        let done = archive
            .consumer_seq(&super::consumer_name(&self.name))?
            .unwrap_or(0);
        let temp = path.with_extension("jsonl.partial");
        let mut out = std::io::BufWriter::new(File::create(&temp).at_path(&temp)?);
        let mut written = 0;
        archive.source_records(source, state.generation, done, |record| {
            written += record.len() as u64 + 1;
            out.write_all(record)
                .and_then(|()| out.write_all(b"\n"))
                .at_path(&temp)
        })?;
        let file = out
            .into_inner()
            .map_err(|e| e.into_error())
            .at_path(&temp)?;
        file.sync_all().at_path(&temp)?;
        std::fs::rename(&temp, path).at_path(path)?;
        if written != state.length {
            log::warn!(
                "sink {}: {} rewritten with {written} bytes where {} were recorded",
                self.name,
                path.display(),
                state.length
            );
        }
        Ok(())
    }

    /// Where `row`'s source is mirrored: `<harness>/<path under its root>`.
    fn relative(&self, row: &ExportRow) -> PathBuf {
        let under = (self.roots.iter())
            .filter(|(_, harness)| *harness == row.harness)
            .find_map(|(root, _)| row.path.strip_prefix(root).ok());
        let rel: PathBuf = under
            .unwrap_or(&row.path)
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        Path::new(&row.harness).join(rel)
    }

    /// Makes the file `row` goes into, displacing what is in the way, unless it is there
    /// already; true when it made one. The state's `length` is where the row is written.
    fn file_for(&mut self, row: &ExportRow, dirs: &mut BTreeSet<PathBuf>) -> std::io::Result<bool> {
        let current = self.files.get(&row.source);
        if current.is_some_and(|f| f.generation == row.generation) {
            return Ok(false);
        }
        let path = match current {
            // A new generation of a mirrored source: the earlier one is kept beside it.
            Some(f) => {
                let old = f.clone();
                let plain = self.dir.join(&old.path);
                let kept = gen_name(&plain, old.generation);
                self.displace(row.source, &plain, &kept, dirs)?;
                old.path
            }
            None => self.relative(row),
        };
        // Another source's copy at this path (its file was replaced): kept beside it.
        let owner = (self.files.iter())
            .find(|(s, f)| **s != row.source && f.path == path)
            .map(|(s, _)| *s);
        if let Some(other) = owner {
            let plain = self.dir.join(&path);
            self.displace(other, &plain, &source_name(&plain, other), dirs)?;
        }
        let full = self.dir.join(&path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
            dirs.insert(parent.to_owned());
        }
        // A file left from an earlier mirror that the archive knows nothing of is replaced.
        File::create(&full)?;
        let state = FileState {
            path,
            generation: row.generation,
            length: 0,
        };
        self.files.insert(row.source, state);
        self.changed.insert(row.source);
        Ok(true)
    }

    /// Renames source `source`'s copy from `from` to `to`, and its state with it.
    fn displace(
        &mut self,
        source: i64,
        from: &Path,
        to: &Path,
        dirs: &mut BTreeSet<PathBuf>,
    ) -> std::io::Result<()> {
        if from.exists() {
            std::fs::rename(from, to)?;
        }
        if let Some(parent) = to.parent() {
            dirs.insert(parent.to_owned());
        }
        if let Some(state) = self.files.get_mut(&source) {
            state.path = to.strip_prefix(&self.dir).unwrap_or(to).to_owned();
            self.changed.insert(source);
        }
        Ok(())
    }

    fn write(&mut self, batch: &[ExportRow]) -> std::io::Result<()> {
        let mut open: HashMap<i64, File> = HashMap::new();
        let mut dirs = BTreeSet::new();
        for row in batch {
            if self.file_for(row, &mut dirs)? {
                // Files were renamed or created: handles opened before name other files now.
                for (_, file) in open.drain() {
                    file.sync_data()?;
                }
            }
            let state = (self.files.get_mut(&row.source)).expect("file_for made the state");
            let file = match open.entry(row.source) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let path = self.dir.join(&state.path);
                    let file = OpenOptions::new().append(true).open(&path)?;
                    // Whatever lies past the state's length was never acknowledged.
                    file.set_len(state.length)?;
                    e.insert(file)
                }
            };
            let mut line = Vec::with_capacity(row.record.len() + 1);
            line.extend_from_slice(&row.record);
            line.push(b'\n');
            file.write_all(&line)?;
            state.length += line.len() as u64;
            self.changed.insert(row.source);
        }
        for file in open.values() {
            file.sync_data()?;
        }
        for dir in dirs {
            File::open(&dir)?.sync_all()?;
        }
        Ok(())
    }
}

impl Destination for Mirror {
    fn deliver(&mut self, batch: &[ExportRow]) -> std::result::Result<(), Failure> {
        let Err(e) = self.write(batch) else {
            return Ok(());
        };
        let message = format!("writing into {}: {e}", self.dir.display());
        // Back to what was committed, so that the batch is written again from there.
        let touched: Vec<i64> = self.changed.iter().copied().collect();
        let restored = Archive::open(&self.db).and_then(|a| self.restore(&touched, &a));
        if let Err(r) = restored {
            return Err(Failure::transient(format!(
                "{message}; then {:#}",
                anyhow::Error::from(r)
            )));
        }
        Err(Failure::transient(message))
    }

    fn take_state(&mut self) -> Vec<(String, String)> {
        let changed = std::mem::take(&mut self.changed);
        let mut state = Vec::new();
        for source in changed {
            let Some(f) = self.files.get(&source) else {
                continue;
            };
            let value = serde_json::to_string(f).expect("a file state serializes");
            state.push((format!("source:{source}"), value));
        }
        self.committed.clone_from(&self.files);
        state
    }

    fn kind(&self) -> &'static str {
        "mirror directory unwritable"
    }
}

/// The mirror's committed file states.
fn load_state(archive: &Archive, name: &str) -> Result<HashMap<i64, FileState>> {
    let mut states = HashMap::new();
    archive.sink_state(name, |key, value| {
        let source = key.strip_prefix("source:").and_then(|s| s.parse().ok());
        match (source, serde_json::from_str(value)) {
            (Some(source), Ok(state)) => {
                states.insert(source, state);
            }
            _ => log::warn!("sink {name}: ignoring a state row it cannot read: {key}"),
        }
    })?;
    Ok(states)
}

/// `<stem>.gen<N>.jsonl` beside `path`.
fn gen_name(path: &Path, generation: i64) -> PathBuf {
    beside(path, &format!("gen{generation}"))
}

/// `<stem>.source<ID>.jsonl` beside `path`.
fn source_name(path: &Path, source: i64) -> PathBuf {
    beside(path, &format!("source{source}"))
}

fn beside(path: &Path, tag: &str) -> PathBuf {
    let stem = path.file_stem().unwrap_or_default();
    let mut name = OsString::from(stem);
    name.push(format!(".{tag}"));
    if let Some(ext) = path.extension() {
        name.push(".");
        name.push(ext);
    }
    path.with_file_name(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earlier_copies_are_named_beside_the_current_one() {
        let p = Path::new("/m/claude-code/proj/abc.jsonl");
        assert_eq!(
            gen_name(p, 0),
            Path::new("/m/claude-code/proj/abc.gen0.jsonl")
        );
        assert_eq!(
            source_name(p, 7),
            Path::new("/m/claude-code/proj/abc.source7.jsonl")
        );
    }
}
