//! Where the filesystems under a root are mounted, for `doctor`'s network-filesystem check
//! (what statfs and statvfs say about a path is in `sys`).

use std::path::{Path, PathBuf};

/// Mount points strictly below `dir`, from `/proc/self/mountinfo` (none where it is missing).
pub(super) fn mounts_below(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|l| l.split(' ').nth(4))
        .map(|p| PathBuf::from(unescape_mount_point(p)))
        .filter(|p| p != dir && p.starts_with(dir))
        .collect()
}

/// Mount points in mountinfo escape space, tab, newline and backslash as `\ooo`.
fn unescape_mount_point(field: &str) -> String {
    field
        .replace("\\040", " ")
        .replace("\\011", "\t")
        .replace("\\012", "\n")
        .replace("\\134", "\\")
}

/// The path itself if it exists, else its nearest existing ancestor.
pub(super) fn nearest_existing(path: &Path) -> Option<&Path> {
    path.ancestors().find(|p| p.exists())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_points_with_spaces_are_unescaped() {
        assert_eq!(unescape_mount_point("/mnt/a\\040b"), "/mnt/a b");
    }
}
