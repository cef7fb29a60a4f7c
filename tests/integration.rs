//! Integration tests: the real binary on real files in temp directories.

mod agents;
mod archive;
mod chaos;
mod cli;
mod compression;
mod config;
mod doctor;
mod faults;
mod generations;
mod identity;
mod live;
mod model;
mod reading;
mod redact;
mod rejects;
mod seeding;
mod service;
mod sessions;
mod ship;
mod snapshots;
mod supervision;
mod tail;
mod team;
mod usage;
mod util;
mod watchers;
