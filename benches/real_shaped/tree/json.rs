//! JSON with fields in the agents' order, and one transcript file being written.

use super::Count;
use serde::{Serialize, Serializer};
use std::fs::{self, File};
use std::io::{self, BufWriter, Write};
use std::path::Path;

/// A JSON value whose objects keep their fields in the order written (serde_json's `Value`
/// sorts them, and the agents do not).
#[derive(Clone, Debug)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Int(u64),
    Float(f64),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(&'static str, Json)>),
    /// An object whose keys are data (file paths).
    Map(Vec<(String, Json)>),
}

pub(super) type Fields = Vec<(&'static str, Json)>;

macro_rules! obj {
    ($($key:literal: $value:expr),* $(,)?) => {
        Json::Obj(vec![$(($key, Json::from($value))),*])
    };
}
pub(super) use obj;

impl Serialize for Json {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Json::Null => s.serialize_unit(),
            Json::Bool(b) => s.serialize_bool(*b),
            Json::Int(n) => s.serialize_u64(*n),
            Json::Float(x) => s.serialize_f64(*x),
            Json::Str(text) => s.serialize_str(text),
            Json::Arr(items) => s.collect_seq(items),
            Json::Obj(fields) => s.collect_map(fields.iter().map(|(k, v)| (k, v))),
            Json::Map(fields) => s.collect_map(fields.iter().map(|(k, v)| (k, v))),
        }
    }
}

impl Json {
    /// Compact JSON text, as Codex stores tool arguments and output: a string inside a record.
    pub(super) fn text(&self) -> String {
        serde_json::to_string(self).expect("a Json value serializes")
    }
}

impl From<&str> for Json {
    fn from(s: &str) -> Json {
        Json::Str(s.to_owned())
    }
}

impl From<String> for Json {
    fn from(s: String) -> Json {
        Json::Str(s)
    }
}

impl From<&String> for Json {
    fn from(s: &String) -> Json {
        Json::Str(s.clone())
    }
}

impl From<Option<String>> for Json {
    fn from(s: Option<String>) -> Json {
        s.map_or(Json::Null, Json::Str)
    }
}

impl From<u64> for Json {
    fn from(n: u64) -> Json {
        Json::Int(n)
    }
}

impl From<usize> for Json {
    fn from(n: usize) -> Json {
        Json::Int(n as u64)
    }
}

impl From<f64> for Json {
    fn from(x: f64) -> Json {
        Json::Float(x)
    }
}

impl From<bool> for Json {
    fn from(b: bool) -> Json {
        Json::Bool(b)
    }
}

impl From<Vec<Json>> for Json {
    fn from(items: Vec<Json>) -> Json {
        Json::Arr(items)
    }
}

impl From<Vec<String>> for Json {
    fn from(items: Vec<String>) -> Json {
        Json::Arr(items.into_iter().map(Json::Str).collect())
    }
}

/// One transcript file being written, and what went into it.
pub(super) struct Transcript {
    out: BufWriter<File>,
    pub(super) count: Count,
}

impl Transcript {
    pub(super) fn create(path: &Path) -> io::Result<Transcript> {
        if let Some(dir) = path.parent() {
            fs::create_dir_all(dir)?;
        }
        let out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let count = Count {
            files: 1,
            ..Count::default()
        };
        Ok(Transcript { out, count })
    }

    pub(super) fn write(&mut self, record: &Json) -> io::Result<()> {
        let mut line = serde_json::to_vec(record)?;
        line.push(b'\n');
        self.out.write_all(&line)?;
        self.count.records += 1;
        self.count.bytes += line.len() as u64;
        Ok(())
    }

    pub(super) fn finish(mut self) -> io::Result<Count> {
        self.out.flush()?;
        Ok(self.count)
    }
}
