//! The mirror destination: each source's archived lines, appended as they commit, to
//! `DIR/<harness>/<path under its root>`, byte for byte, each with its `\n`.
//!
//! A file's length is committed with the sink's cursor. When the sink starts, a longer file
//! (lines written after the last acknowledged batch) is cut back to that length, and lines
//! past it are written again; a shorter one (changed behind the mirror's back) is written
//! again from the archive. When a source starts a new generation, the earlier one is kept as
//! `<name>.gen<N>.jsonl`; when another source takes a mirrored path (the file was replaced),
//! the earlier source's copy is kept as `<name>.source<ID>.jsonl` (a name already taken gets
//! the source and generation both). Each rename is recorded in the archive before it is
//! made, and the record is cleared by the commit that follows it: a rename found recorded at
//! the next start was never committed, and is undone.

use super::{Destination, Failure};
use crate::archive::marks::MarksNow;
use crate::archive::{Archive, ExportRow};
use crate::consumers::redact::Redactor;
use crate::error::{IoContext, Result, error_chain};
use serde::{Deserialize, Serialize};
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// Where a source's current generation is mirrored, and how much of it is written.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct FileState {
    /// Relative to the mirror's directory.
    path: PathBuf,
    generation: i64,
    length: u64,
}

/// A rename of a mirrored file (paths relative to the mirror's directory).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Rename {
    from: PathBuf,
    to: PathBuf,
}

/// The `sink_state` key of the renames made since the last commit.
const RENAMES: &str = "renames";

/// A mirror directory.
pub(super) struct Mirror {
    name: String,
    dir: PathBuf,
    roots: Vec<(PathBuf, String)>,
    /// Reads records for rewrites, and records renames before they are made.
    archive: Archive,
    /// Each source's current file, as written.
    files: HashMap<i64, FileState>,
    /// As committed with the cursor.
    committed: HashMap<i64, FileState>,
    changed: BTreeSet<i64>,
    /// Made since the last commit, in order.
    renames: Vec<Rename>,
    /// Redacts what a rewrite reads from the archive (records to deliver come redacted).
    redact: Option<Arc<Redactor>>,
}

impl Mirror {
    /// Opens the mirror `name` into `dir`, putting back every file to what the archive says
    /// was shipped to it.
    pub(super) fn open(
        name: &str,
        dir: &Path,
        roots: Vec<(PathBuf, String)>,
        db: &Path,
        redact: Option<Arc<Redactor>>,
    ) -> Result<Mirror> {
        std::fs::create_dir_all(dir).at_path(dir)?;
        let archive = Archive::open(db)?;
        let (committed, renames) = load_state(&archive, name)?;
        let mut mirror = Mirror {
            name: name.to_owned(),
            dir: dir.to_owned(),
            roots,
            archive,
            files: committed.clone(),
            committed,
            changed: BTreeSet::new(),
            renames,
            redact,
        };
        let sources: Vec<i64> = mirror.committed.keys().copied().collect();
        mirror.restore(&sources)?;
        Ok(mirror)
    }

    /// Undoes the renames not committed, then puts the files of `sources` back to their
    /// committed lengths.
    fn restore(&mut self, sources: &[i64]) -> Result<()> {
        for r in std::mem::take(&mut self.renames).iter().rev() {
            let (to, from) = (self.dir.join(&r.to), self.dir.join(&r.from));
            // Names are chosen free, so a file at `to` is the one this rename moved.
            if to.exists() {
                std::fs::rename(&to, &from).at_path(&to)?;
            }
        }
        self.record_renames()?;
        self.files.clone_from(&self.committed);
        self.changed.clear();
        for source in sources {
            if let Some(state) = self.committed.get(source).cloned() {
                self.restore_file(*source, &state)?;
            }
        }
        Ok(())
    }

    fn restore_file(&mut self, source: i64, state: &FileState) -> Result<()> {
        let path = self.dir.join(&state.path);
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
            let written = self.rewrite(source, state, &path)?;
            if written != state.length {
                // What the archive holds is what the file now holds: its length from here on.
                let adopted = FileState {
                    length: written,
                    ..state.clone()
                };
                self.files.insert(source, adopted.clone());
                self.committed.insert(source, adopted);
                self.changed.insert(source);
            }
        }
        Ok(())
    }

    /// Records [`Mirror::renames`] in the archive, before a rename is made (and empty, once
    /// they are undone).
    fn record_renames(&mut self) -> Result<()> {
        let value = serde_json::to_string(&self.renames).expect("renames serialize");
        self.archive.set_sink_state(&self.name, RENAMES, &value)
    }

    /// Writes `path` again from the archive's records of `source` and the state's generation
    /// that the sink has shipped; returns its length.
    fn rewrite(&self, source: i64, state: &FileState, path: &Path) -> Result<u64> {
        let archive = &self.archive;
        let done =
            (archive.consumer_seq(&crate::archive::sinks::sink_consumer(&self.name))?).unwrap_or(0);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).at_path(parent)?;
        }
        let temp = path.with_extension("jsonl.partial");
        let mut out = std::io::BufWriter::new(File::create(&temp).at_path(&temp)?);
        let mut written = 0;
        archive.source_records(source, state.generation, done, |record| {
            let record = match &self.redact {
                Some(r) => r.redact_record(record),
                None => std::borrow::Cow::Borrowed(record),
            };
            written += record.len() as u64 + 1;
            (out.write_all(&record))
                .and_then(|()| out.write_all(b"\n"))
                .at_path(&temp)
        })?;
        let file = (out.into_inner().map_err(|e| e.into_error())).at_path(&temp)?;
        file.sync_all().at_path(&temp)?;
        std::fs::rename(&temp, path).at_path(path)?;
        Ok(written)
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
                let kept = self.free_name(
                    &plain,
                    &format!("gen{}", old.generation),
                    row.source,
                    old.generation,
                );
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
            let generation = self.files[&other].generation;
            let kept = self.free_name(&plain, &format!("source{other}"), other, generation);
            self.displace(other, &plain, &kept, dirs)?;
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

    /// `path` relative to the mirror's directory, as states and renames keep it.
    fn in_dir(&self, path: &Path) -> PathBuf {
        path.strip_prefix(&self.dir).unwrap_or(path).to_owned()
    }

    /// `<stem>.<tag>.jsonl` beside `plain`, or, when a file or another state has that name,
    /// one with the source and generation both (and a number, if need be).
    fn free_name(&self, plain: &Path, tag: &str, source: i64, generation: i64) -> PathBuf {
        let taken = |p: &Path| {
            let rel = self.in_dir(p);
            p.exists() || self.files.values().any(|f| f.path == rel)
        };
        let exact = format!("source{source}.gen{generation}");
        let candidates = [tag.to_owned(), exact.clone()].into_iter();
        let numbered = (2..).map(|n| format!("{exact}.{n}"));
        (candidates.chain(numbered))
            .map(|t| beside(plain, &t))
            .find(|p| !taken(p))
            .expect("an endless list of names has a free one")
    }

    /// Renames source `source`'s copy from `from` to `to`, and its state with it; the rename
    /// is recorded in the archive first.
    fn displace(
        &mut self,
        source: i64,
        from: &Path,
        to: &Path,
        dirs: &mut BTreeSet<PathBuf>,
    ) -> std::io::Result<()> {
        let rename = Rename {
            from: self.in_dir(from),
            to: self.in_dir(to),
        };
        self.renames.push(rename.clone());
        self.record_renames().map_err(std::io::Error::other)?;
        if from.exists() {
            std::fs::rename(from, to)?;
        }
        if let Some(parent) = to.parent() {
            dirs.insert(parent.to_owned());
        }
        if let Some(state) = self.files.get_mut(&source) {
            state.path = rename.to;
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
    fn deliver_marks(&mut self, _: &[MarksNow]) -> std::result::Result<(), Failure> {
        // Its configuration check refuses `marks` (see `spec`): a mirror holds transcripts
        // byte for byte, and marks are in none of them.
        Err(Failure::Refused {
            message: "a mirror takes no marks".into(),
        })
    }

    fn deliver(&mut self, batch: &[ExportRow]) -> std::result::Result<(), Failure> {
        let Err(e) = self.write(batch) else {
            return Ok(());
        };
        let message = format!("writing into {}: {e}", self.dir.display());
        // Back to what was committed, so that the batch is written again from there.
        let touched: Vec<i64> = self.changed.iter().copied().collect();
        if let Err(r) = self.restore(&touched) {
            return Err(Failure::transient(format!(
                "{message}; then {}",
                error_chain(&r)
            )));
        }
        Err(Failure::transient(message))
    }

    fn idle(&mut self, _shipped: i64) -> std::result::Result<bool, Failure> {
        // A file rewritten at the start with another length than recorded.
        Ok(!self.changed.is_empty())
    }

    fn take_state(&mut self) -> Vec<(String, String)> {
        let changed = std::mem::take(&mut self.changed);
        let mut state = Vec::new();
        if !std::mem::take(&mut self.renames).is_empty() {
            // Committed with the states they led to: nothing to undo any more.
            state.push((RENAMES.to_owned(), "[]".to_owned()));
        }
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

/// The mirror's committed file states, and the renames made after them.
fn load_state(archive: &Archive, name: &str) -> Result<(HashMap<i64, FileState>, Vec<Rename>)> {
    let (mut states, mut renames) = (HashMap::new(), Vec::new());
    archive.sink_state(name, |key, value| {
        if key == RENAMES {
            match serde_json::from_str(value) {
                Ok(list) => renames = list,
                Err(_) => log::warn!("sink {name}: ignoring renames it cannot read: {value}"),
            }
            return;
        }
        let source = key.strip_prefix("source:").and_then(|s| s.parse().ok());
        match (source, serde_json::from_str(value)) {
            (Some(source), Ok(state)) => {
                states.insert(source, state);
            }
            _ => log::warn!("sink {name}: ignoring a state row it cannot read: {key}"),
        }
    })?;
    Ok((states, renames))
}

/// `<stem>.<tag>.<ext>` beside `path`.
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
            beside(p, "gen0"),
            Path::new("/m/claude-code/proj/abc.gen0.jsonl")
        );
        assert_eq!(
            beside(p, "source7.gen2"),
            Path::new("/m/claude-code/proj/abc.source7.gen2.jsonl")
        );
    }
}
