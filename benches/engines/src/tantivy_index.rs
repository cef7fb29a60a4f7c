//! tantivy on the same messages: one text field with positions, the message number as a fast
//! field, and the nearest tokenizer to FTS5's `unicode61 remove_diacritics 2` it ships with.

use crate::report::Measured;
use crate::{Probe, Result, Search};
use std::path::Path;
use std::time::Instant;
use tantivy::collector::{Count, TopDocs};
use tantivy::columnar::Column;
use tantivy::query::{PhrasePrefixQuery, Query, QueryParser};
use tantivy::schema::{FAST, Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    AsciiFoldingFilter, LowerCaser, RemoveLongFilter, SimpleTokenizer, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// The name the tokenizer is registered under, in the schema and in each opened index.
const TOKENIZER: &str = "unicode61ish";

/// Splits on what is not alphanumeric (FTS5 unicode61 splits on what is not a letter, number
/// or private-use character), lowercases, folds diacritics and ligatures to ASCII; drops
/// tokens of 255 bytes or more (FTS5 keeps them; tantivy caps a term at 65,530 bytes).
fn tokenizer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(255))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .build()
}

/// How many indexing threads `Index::writer` starts on this machine (its rule: the cores,
/// at most 8).
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
}

fn schema() -> (Schema, Field, Field) {
    let mut builder = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(TOKENIZER)
        .set_index_option(IndexRecordOption::WithFreqsAndPositions);
    let body = builder.add_text_field(
        "body",
        TextOptions::default().set_indexing_options(indexing),
    );
    let id = builder.add_u64_field("id", FAST);
    (builder.build(), body, id)
}

/// Builds an index in `dir` from `texts`, id = message number, with `threads` indexing
/// threads (`None`: tantivy's default) sharing `budget` bytes. The time is adding every
/// document, the commit and the merges it starts; the size is the directory's files.
pub fn build(
    dir: &Path,
    texts: &[String],
    threads: Option<usize>,
    budget: usize,
) -> Result<Measured> {
    let (schema, body, id) = schema();
    let index = Index::create_in_dir(dir, schema)?;
    index.tokenizers().register(TOKENIZER, tokenizer());
    let mut writer: IndexWriter = match threads {
        Some(n) => index.writer_with_num_threads(n, budget)?,
        None => index.writer(budget)?,
    };
    let start = Instant::now();
    for (n, text) in texts.iter().enumerate() {
        let mut doc = TantivyDocument::new();
        doc.add_text(body, text);
        doc.add_u64(id, n as u64 + 1);
        writer.add_document(doc)?;
    }
    writer.commit()?;
    writer.wait_merging_threads()?;
    let secs = start.elapsed().as_secs_f64();
    let files = walkdir::WalkDir::new(dir).into_iter().flatten();
    let bytes = files
        .filter_map(|e| e.metadata().ok())
        .filter(|m| m.is_file())
        .map(|m| m.len());
    Ok(Measured {
        secs,
        bytes: bytes.sum(),
        segments: Some(index.searchable_segment_ids()?.len()),
    })
}

/// A built index, open for queries.
pub struct TantivyIndex {
    reader: IndexReader,
    parser: QueryParser,
    body: Field,
    /// The `id` column of each segment, by segment ordinal.
    ids: Vec<Column<u64>>,
}

impl TantivyIndex {
    pub fn open(dir: &Path) -> Result<TantivyIndex> {
        let index = Index::open_in_dir(dir)?;
        index.tokenizers().register(TOKENIZER, tokenizer());
        let body = index.schema().get_field("body")?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        let searcher = reader.searcher();
        let ids = searcher
            .segment_readers()
            .iter()
            .map(|s| s.fast_fields().u64("id"));
        Ok(TantivyIndex {
            ids: ids.collect::<tantivy::Result<_>>()?,
            parser: QueryParser::for_index(&index, vec![body]),
            reader,
            body,
        })
    }

    /// `probe` as a query: its `QueryParser` syntax, or a prefix of one term (which the parser
    /// refuses: its `"wo"*` needs two terms), every term of the prefix, unscored.
    fn query(&self, probe: &Probe) -> Result<Box<dyn Query>> {
        let prefix = probe.tantivy.strip_suffix('*');
        if let Some(prefix) = prefix.filter(|p| p.chars().all(char::is_alphanumeric)) {
            let term = Term::from_field_text(self.body, prefix);
            let mut query = PhrasePrefixQuery::new(vec![term]);
            query.set_max_expansions(u32::MAX);
            return Ok(Box::new(query));
        }
        Ok(self.parser.parse_query(probe.tantivy)?)
    }
}

impl Search for TantivyIndex {
    fn count(&self, probe: &Probe) -> Result<u64> {
        let count = self
            .reader
            .searcher()
            .search(&*self.query(probe)?, &Count)?;
        Ok(count as u64)
    }

    fn top(&self, probe: &Probe) -> Result<Vec<u64>> {
        let top20 = TopDocs::with_limit(20).order_by_score();
        let hits = self
            .reader
            .searcher()
            .search(&*self.query(probe)?, &top20)?;
        let id = |(_, at): (f32, tantivy::DocAddress)| {
            self.ids[at.segment_ord as usize].first(at.doc_id)
        };
        Ok(hits.into_iter().filter_map(id).collect())
    }
}
