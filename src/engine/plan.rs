//! Planning a pass: which source each file found by the scan is, decided for all of them
//! before anything is read, so that a file moved within the roots keeps its source even when a
//! new file takes its old name in the same pass.
//!
//! An identity (device and inode) names a file only while the file lives: an atomic save frees
//! the old inode, and the filesystem may give it to the next file made, another agent's
//! included. So a file found by identity away from its source's path is that source only with
//! evidence that it is the same document ([`Evidence::same_document`]); without it, it is
//! planned as a file of its own, and the source stays what its own path says.

use crate::capture::discover::Candidate;
use crate::domain::fingerprint::Identity;
use crate::domain::{SourceId, SourceRow};
use crate::engine::sources::Sources;
use crate::error::Result;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// How a file found by the scan relates to the archive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Plan {
    /// Its identity belongs to this source (found where it was, moved, or come back).
    Known(SourceId),
    /// Its identity is new, but this live source had its path: a replacement, or the same
    /// bytes saved anew (told apart when it is read).
    PathMatch(SourceId),
    /// Neither: a new source.
    New,
    /// Its identity carries a prefix mark: a new source starting there, which replaces the
    /// live source that had its path, if the scan found that one nowhere else.
    Marked(Option<SourceId>),
}

/// A file and its plan.
pub(crate) struct Planned {
    /// The file as the scan found it.
    pub candidate: Candidate,
    /// What it is.
    pub plan: Plan,
}

/// What planning asks of a file beyond its identity and path (the engine answers from the
/// archive and the file's bytes).
pub(crate) trait Evidence {
    /// True when `identity` carries a prefix mark.
    fn marked(&self, identity: Identity) -> Result<bool>;

    /// True when the file at `path`, found under root `root` with the identity `src` owned,
    /// is `src`'s document: the same agent's, and its content agreeing with what was last
    /// captured of `src`. Asked only when `path` is not `src`'s path. `Err` is the
    /// archive's.
    fn same_document(&self, path: &Path, root: usize, src: &SourceRow) -> Result<bool>;
}

/// The live source that the file `identity` at `path` (under root `root`) is: the one
/// recorded at `path` with that identity, else one whose document it is shown to be (moved
/// there, or a second name of its file). `Err` is `evidence`'s.
pub(crate) fn owner(
    sources: &Sources,
    identity: Identity,
    path: &Path,
    root: usize,
    evidence: &dyn Evidence,
) -> Result<Option<SourceId>> {
    for id in sources.live_by_identity(identity, path) {
        let Some(src) = sources.get(id) else { continue };
        if src.path == path || evidence.same_document(path, root, src)? {
            return Ok(Some(id));
        }
        log::info!(
            "inode reused path={path:?} identity={}:{} source={id} source_path={:?}: not the \
             same document, so not the same source",
            identity.dev,
            identity.ino,
            src.path
        );
    }
    Ok(None)
}

/// Plans `candidates`: first against live sources by identity (a move or a second name, with
/// `evidence` that it is the same document), then the rest by path (replacements), and only
/// then against gone sources by identity (a file that came back, with the same evidence). A
/// prefix mark on an identity wins over everything but a live source.
///
/// Returns the files in path order, those of known identities first, with the live sources
/// they claim. A file found under a second path is planned once, under the path a live source
/// records for it if one does (so that a second name elsewhere, which may be no evidence of
/// anything, never leaves its source unclaimed). `Err` is `evidence`'s.
pub(crate) fn plan(
    sources: &Sources,
    mut candidates: Vec<Candidate>,
    evidence: &dyn Evidence,
) -> Result<(Vec<Planned>, HashSet<SourceId>)> {
    candidates.sort_by_cached_key(|c| (sources.live_by_path(&c.path).is_none(), c.path.clone()));
    let mut seen = HashMap::<Identity, PathBuf>::new();
    let mut claimed = HashSet::new();
    let (mut planned, mut unknown) = (Vec::new(), Vec::new());
    for c in candidates {
        let identity = Identity::of(&c.meta);
        if let Some(first) = seen.get(&identity) {
            // The same file under another path that another live source records (two agents'
            // folders linked to one file, which no evidence made one source): that source's,
            // so that it is not taken for gone.
            let recorded = (sources.live_by_path(&c.path))
                .filter(|id| sources.get(*id).is_some_and(|s| s.identity == identity));
            if let Some(id) = recorded.filter(|id| claimed.insert(*id)) {
                planned.push(Planned {
                    candidate: c,
                    plan: Plan::Known(id),
                });
                continue;
            }
            // Overlapping roots find one path twice; that is no alias.
            if *first != c.path {
                log::info!(
                    "same file under two paths path={:?} alias_of={first:?}",
                    c.path
                );
            }
            continue;
        }
        seen.insert(identity, c.path.clone());
        let owner = owner(sources, identity, &c.path, c.root, evidence)?;
        match owner.filter(|id| claimed.insert(*id)) {
            Some(id) => planned.push(Planned {
                candidate: c,
                plan: Plan::Known(id),
            }),
            None => unknown.push(c),
        }
    }
    for c in unknown {
        let plan = plan_unknown(sources, &c, &mut claimed, evidence)?;
        planned.push(Planned { candidate: c, plan });
    }
    Ok((planned, claimed))
}

/// A file whose identity no live source owns: a prefix mark on it wins (the user said where
/// it starts); else it may replace the live source at its path, or be a gone source come
/// back (only one that has archived something, and so has content to compare, and whose
/// document it is shown to be); else it is new.
fn plan_unknown(
    sources: &Sources,
    c: &Candidate,
    claimed: &mut HashSet<SourceId>,
    evidence: &dyn Evidence,
) -> Result<Plan> {
    let identity = Identity::of(&c.meta);
    let marked = evidence.marked(identity)?;
    let at_path = (sources.live_by_path(&c.path)).filter(|id| claimed.insert(*id));
    if marked {
        return Ok(Plan::Marked(at_path));
    }
    if let Some(id) = at_path {
        return Ok(Plan::PathMatch(id));
    }
    let returning = sources
        .gone_by_identity(identity)
        .and_then(|id| sources.get(id));
    let Some(src) = returning.filter(|s| s.cursor.position.offset > 0) else {
        return Ok(Plan::New);
    };
    if src.path == c.path || evidence.same_document(&c.path, c.root, src)? {
        return Ok(Plan::Known(src.id));
    }
    Ok(Plan::New)
}

/// The plan for a file whose path, when opened, named another inode than the scan saw: the
/// live source recorded at its path may go on in it (told when it is read); else it is new,
/// unless its identity turns out to be a source's (asked again before it is seeded).
pub(crate) fn replan(sources: &Sources, path: &Path) -> Plan {
    sources
        .live_by_path(path)
        .map_or(Plan::New, Plan::PathMatch)
}

/// True when `src` is found at `path` and its recorded path no longer names its identity:
/// the file moved (rather than being reachable by two paths).
pub(crate) fn moved(src: &SourceRow, path: &Path) -> bool {
    if src.path == path {
        return false;
    }
    match std::fs::symlink_metadata(&src.path) {
        Ok(meta) => Identity::of(&meta) != src.identity,
        Err(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use tempfile::TempDir;

    /// A file under `dir`, as the scan would find it.
    fn found(dir: &TempDir, name: &str) -> Candidate {
        let path = dir.path().join(name);
        if !path.exists() {
            fs::write(&path, b"{}\n").unwrap();
        }
        let meta = fs::symlink_metadata(&path).unwrap();
        Candidate {
            path,
            meta,
            root: 0,
        }
    }

    fn source(id: SourceId, c: &Candidate, path: &Path, gone: bool, offset: u64) -> SourceRow {
        let identity = Identity::of(&c.meta);
        let mut row = SourceRow::new(id, identity, path.to_owned(), "generic".into());
        row.gone = gone;
        row.cursor.position.offset = offset;
        row
    }

    /// Evidence that answers every question of sameness with `same`, and finds a prefix mark
    /// on `marked` only.
    struct Shown {
        same: bool,
        marked: Option<Identity>,
    }

    impl Evidence for Shown {
        fn marked(&self, identity: Identity) -> Result<bool> {
            Ok(self.marked == Some(identity))
        }

        fn same_document(&self, _: &Path, _: usize, _: &SourceRow) -> Result<bool> {
            Ok(self.same)
        }
    }

    const SAME: Shown = Shown {
        same: true,
        marked: None,
    };

    const UNPROVEN: Shown = Shown {
        same: false,
        marked: None,
    };

    fn plans(sources: &Sources, found: Vec<Candidate>) -> Vec<(String, Plan)> {
        plans_with(sources, found, &SAME)
    }

    fn plans_with(
        sources: &Sources,
        found: Vec<Candidate>,
        evidence: &Shown,
    ) -> Vec<(String, Plan)> {
        let (planned, _) = plan(sources, found, evidence).unwrap();
        (planned.into_iter())
            .map(|p| {
                let name = p.candidate.path.file_name().unwrap().to_string_lossy();
                (name.into_owned(), p.plan)
            })
            .collect()
    }

    #[test]
    fn a_file_moved_keeps_its_source_while_a_new_file_takes_its_old_name() {
        let dir = tempfile::tempdir().unwrap();
        let moved_file = found(&dir, "b.jsonl");
        let old_path = dir.path().join("a.jsonl");
        let sources = Sources::new(vec![source(1, &moved_file, &old_path, false, 8)]);
        let newcomer = found(&dir, "a.jsonl");
        assert_eq!(
            plans(&sources, vec![newcomer, moved_file]),
            [
                ("b.jsonl".into(), Plan::Known(1)),
                ("a.jsonl".into(), Plan::New)
            ]
        );
    }

    #[test]
    fn an_identity_found_elsewhere_without_evidence_is_a_new_file_and_the_source_keeps_its_path() {
        // Regression: an atomic save freed source 1's inode, another agent's next file took
        // it, and that file was taken for source 1 moved there, while source 1's own path
        // (holding its next state) was read as a new source.
        let dir = tempfile::tempdir().unwrap();
        let other = found(&dir, "other.json");
        let sources = Sources::new(vec![source(
            1,
            &other,
            &dir.path().join("a.json"),
            false,
            8,
        )]);
        let next_state = found(&dir, "a.json");
        assert_eq!(
            plans_with(&sources, vec![other, next_state], &UNPROVEN),
            [
                ("a.json".into(), Plan::PathMatch(1)),
                ("other.json".into(), Plan::New)
            ]
        );
    }

    #[test]
    fn a_gone_sources_identity_without_evidence_is_a_new_file() {
        let dir = tempfile::tempdir().unwrap();
        let reused = found(&dir, "reused.json");
        let sources = Sources::new(vec![source(
            1,
            &reused,
            &dir.path().join("a.json"),
            true,
            8,
        )]);
        assert_eq!(
            plans_with(&sources, vec![reused], &UNPROVEN),
            [("reused.json".into(), Plan::New)]
        );
    }

    #[test]
    fn a_new_identity_at_a_live_sources_path_may_replace_it() {
        let dir = tempfile::tempdir().unwrap();
        let old = found(&dir, "old.jsonl");
        let path = dir.path().join("a.jsonl");
        let sources = Sources::new(vec![source(1, &old, &path, false, 8)]);
        // Made while the old file still holds its inode, which could be reused otherwise.
        let replacement = found(&dir, "a.jsonl");
        assert_eq!(
            plans(&sources, vec![replacement]),
            [("a.jsonl".into(), Plan::PathMatch(1))]
        );
    }

    #[test]
    fn a_gone_sources_identity_is_its_return_only_if_it_had_archived_something() {
        // With bytes behind its cursor, its marker windows tell a return from a reused inode
        // when the file is read; with none, nothing could, so the file is new.
        let dir = tempfile::tempdir().unwrap();
        let back = found(&dir, "back.jsonl");
        let reused = found(&dir, "reused.jsonl");
        let sources = Sources::new(vec![
            source(1, &back, &back.path, true, 8),
            source(2, &reused, &reused.path, true, 0),
        ]);
        assert_eq!(
            plans(&sources, vec![back, reused]),
            [
                ("back.jsonl".into(), Plan::Known(1)),
                ("reused.jsonl".into(), Plan::New)
            ]
        );
    }

    #[test]
    fn a_prefix_mark_makes_a_file_new_at_a_live_sources_path_replacing_it_unless_found_elsewhere() {
        let dir = tempfile::tempdir().unwrap();
        let old = found(&dir, "old.jsonl");
        let sources = Sources::new(vec![source(1, &old, &dir.path().join("a.jsonl"), false, 8)]);
        let seeded = found(&dir, "a.jsonl");
        let marked = Shown {
            same: true,
            marked: Some(Identity::of(&seeded.meta)),
        };
        let (planned, claimed) = plan(&sources, vec![seeded], &marked).unwrap();
        assert_eq!(planned[0].plan, Plan::Marked(Some(1)));
        assert_eq!(claimed, HashSet::from([1]));
        // Source 1's file is found under another name in the same scan: it moved, and is not
        // replaced.
        let seeded = found(&dir, "a.jsonl");
        let (planned, _) = plan(&sources, vec![seeded, old], &marked).unwrap();
        let plans: Vec<Plan> = planned.iter().map(|p| p.plan).collect();
        assert_eq!(plans, [Plan::Known(1), Plan::Marked(None)]);
    }

    #[test]
    fn one_file_under_two_paths_is_planned_once() {
        let dir = tempfile::tempdir().unwrap();
        let first = found(&dir, "a.jsonl");
        fs::hard_link(&first.path, dir.path().join("b.jsonl")).unwrap();
        let second = found(&dir, "b.jsonl");
        let planned = plans(&Sources::default(), vec![second, first]);
        assert_eq!(planned, [("a.jsonl".into(), Plan::New)]);
    }

    #[test]
    fn one_file_under_two_paths_is_planned_under_the_path_its_source_records() {
        // A second name sorted first (another agent's folder, say) must not leave the source
        // at the other name unclaimed, and so marked gone with its file on disk.
        let dir = tempfile::tempdir().unwrap();
        let recorded = found(&dir, "z.json");
        fs::hard_link(&recorded.path, dir.path().join("a.json")).unwrap();
        let second = found(&dir, "a.json");
        let sources = Sources::new(vec![source(1, &recorded, &recorded.path, false, 8)]);
        assert_eq!(
            plans_with(&sources, vec![second, recorded], &UNPROVEN),
            [("z.json".into(), Plan::Known(1))]
        );
    }

    #[test]
    fn one_file_that_two_sources_record_under_two_paths_is_planned_for_both() {
        let dir = tempfile::tempdir().unwrap();
        let a = found(&dir, "a.json");
        fs::hard_link(&a.path, dir.path().join("z.json")).unwrap();
        let z = found(&dir, "z.json");
        let sources = Sources::new(vec![
            source(1, &a, &a.path, false, 8),
            source(2, &z, &z.path, false, 8),
        ]);
        assert_eq!(
            plans_with(&sources, vec![z, a], &UNPROVEN),
            [
                ("a.json".into(), Plan::Known(1)),
                ("z.json".into(), Plan::Known(2))
            ]
        );
    }

    #[test]
    fn moved_means_the_recorded_path_no_longer_names_the_identity() {
        let dir = tempfile::tempdir().unwrap();
        let a = found(&dir, "a.jsonl");
        fs::hard_link(&a.path, dir.path().join("link.jsonl")).unwrap();
        let src = source(1, &a, &a.path, false, 8);
        assert!(!moved(&src, &a.path), "same path");
        assert!(
            !moved(&src, &dir.path().join("link.jsonl")),
            "a second name"
        );
        fs::rename(&a.path, dir.path().join("c.jsonl")).unwrap();
        assert!(
            moved(&src, &dir.path().join("c.jsonl")),
            "the old path is gone"
        );
        fs::write(&a.path, b"other").unwrap();
        assert!(
            moved(&src, &dir.path().join("c.jsonl")),
            "another file took it"
        );
        let sources = Sources::new(vec![src]);
        // Whether the file now at its path goes on with it is told when that file is read.
        assert_eq!(replan(&sources, &a.path), Plan::PathMatch(1));
        assert_eq!(replan(&sources, &dir.path().join("c.jsonl")), Plan::New);
    }
}
