//! SQLite's settings for the whole process, made before its first connection.
#![allow(unsafe_code)] // sqlite3_config: C only, rusqlite has no wrapper for this option

use rusqlite::ffi;

/// Turns off SQLite's count of the memory it holds (`SQLITE_CONFIG_MEMSTATUS`), which nothing
/// here reads: with it, each of SQLite's allocations and frees takes a process-wide mutex, and
/// the full-text index allocates and frees for each term it writes and each row it reads.
/// Called before SQLite is first used (it is then refused, and left as it was).
pub(crate) fn without_memory_statistics() {
    // SAFETY: `sqlite3_config` is safe to call before SQLite is initialized, from one thread;
    // once it is, the call is refused with SQLITE_MISUSE and changes nothing. Its one variadic
    // argument for this option is an int.
    let rc = unsafe { ffi::sqlite3_config(ffi::SQLITE_CONFIG_MEMSTATUS, 0 as std::ffi::c_int) };
    if rc != ffi::SQLITE_OK {
        log::debug!("SQLite's memory statistics left on (code {rc})");
    }
}
