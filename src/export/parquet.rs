//! A table as Apache Parquet, through the Arrow writer: rows gathered into batches of
//! [`BATCH_ROWS`], encoded on a thread of their own (pages compressed with zstd, strings
//! dictionary-encoded). What each column
//! and metric means is in the file's key-value metadata (`strata.column.NAME`,
//! `strata.metric.NAME`), the same in the Arrow schema's, and in each Arrow field's own
//! (`description`): DuckDB's `parquet_kv_metadata` and pyarrow's `read_metadata` read the
//! file's, pyarrow's `schema.metadata` and fields the Arrow schema's.

use super::tables::{self, Cell, Kind, Table};
use super::{Origin, TableWriter};
use arrow_array::builder::{BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, RecordBatch};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;
use std::fs::File;
use std::io;
use std::sync::mpsc::SyncSender;
use std::sync::Arc;
use std::thread::JoinHandle;

/// Rows gathered before they are handed to the writer as one batch.
const BATCH_ROWS: usize = 64 * 1024;

/// zstd's level for the pages: 3, its own default.
const ZSTD_LEVEL: i32 = 3;

enum Builder {
    Float(Float64Builder),
    Int(Int64Builder),
    Bool(BooleanBuilder),
    Text(StringBuilder),
}

impl Builder {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Float => Builder::Float(Float64Builder::with_capacity(BATCH_ROWS)),
            Kind::Int => Builder::Int(Int64Builder::with_capacity(BATCH_ROWS)),
            Kind::Bool => Builder::Bool(BooleanBuilder::with_capacity(BATCH_ROWS)),
            Kind::Text => Builder::Text(StringBuilder::with_capacity(BATCH_ROWS, 32 * BATCH_ROWS)),
        }
    }

    fn push(&mut self, cell: &Cell) -> io::Result<()> {
        match (self, cell) {
            (Builder::Float(b), Cell::Float(v)) => b.append_option(*v),
            (Builder::Int(b), Cell::Int(v)) => b.append_option(*v),
            (Builder::Bool(b), Cell::Bool(v)) => b.append_option(*v),
            (Builder::Text(b), Cell::Text(v)) => b.append_option(v.as_deref()),
            (_, cell) => {
                return Err(io::Error::other(format!(
                    "a cell of the wrong kind for its column: {cell:?}"
                )))
            }
        }
        Ok(())
    }

    fn finish(&mut self) -> ArrayRef {
        match self {
            Builder::Float(b) => Arc::new(b.finish()),
            Builder::Int(b) => Arc::new(b.finish()),
            Builder::Bool(b) => Arc::new(b.finish()),
            Builder::Text(b) => Arc::new(b.finish()),
        }
    }
}

/// Batches handed to the encoding thread and not yet taken, at most: rows keep being
/// gathered while the thread encodes, within a bound.
const BATCHES_AHEAD: usize = 2;

pub(crate) struct ParquetTable {
    table: &'static Table,
    schema: SchemaRef,
    builders: Vec<Builder>,
    pending: usize,
    rows: u64,
    /// To the thread that encodes and writes the batches (beside the pipeline's, which
    /// makes the rows); `None` once finished.
    batches: Option<SyncSender<RecordBatch>>,
    /// That thread: the file, written whole and synced, or why not.
    encoder: Option<JoinHandle<io::Result<()>>>,
}

fn parquet_error(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(format!("Parquet: {e}"))
}

/// The Arrow schema of `table`, each field with its meaning.
pub(crate) fn schema(table: &Table) -> Schema {
    let fields: Vec<Field> = table
        .columns
        .iter()
        .map(|c| {
            let data_type = match c.kind {
                Kind::Float => DataType::Float64,
                Kind::Int => DataType::Int64,
                Kind::Bool => DataType::Boolean,
                Kind::Text => DataType::Utf8,
            };
            Field::new(c.name, data_type, c.nullable)
                .with_metadata([("description", c.meaning.to_string())])
        })
        .collect();
    Schema::new(fields)
}

/// The file's key-value metadata: the schema, the table, each column's meaning and (for the
/// processes) each metric's unit and meaning, and where the tables came from.
pub(crate) fn key_values(table: &Table, origin: &Origin) -> Vec<KeyValue> {
    let mut kv = vec![
        KeyValue::new("strata.schema".into(), tables::SCHEMA.to_string()),
        KeyValue::new("strata.table".into(), table.name.to_string()),
        KeyValue::new("strata.table.meaning".into(), table.meaning.to_string()),
        KeyValue::new(
            "strata.version".into(),
            crate::version::DESCRIBE.to_string(),
        ),
        KeyValue::new(
            "strata.recording".into(),
            crate::text::clean(&origin.recording).into_owned(),
        ),
    ];
    for c in table.columns {
        kv.push(KeyValue::new(
            format!("strata.column.{}", c.name),
            c.meaning.to_string(),
        ));
    }
    if table.name == tables::PROCESSES.name {
        for (name, unit, meaning) in tables::METRICS {
            kv.push(KeyValue::new(
                format!("strata.metric.{name}"),
                format!("{unit}: {meaning}"),
            ));
        }
    }
    kv
}

impl ParquetTable {
    pub(crate) fn new(table: &'static Table, file: File, origin: &Origin) -> io::Result<Self> {
        let key_values = key_values(table, origin);
        // The Arrow schema carries them too: pyarrow's `schema.metadata` is read from it.
        let schema = Arc::new(
            schema(table).with_metadata(
                key_values
                    .iter()
                    .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
                    .collect::<std::collections::HashMap<String, String>>(),
            ),
        );
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(
                ZstdLevel::try_new(ZSTD_LEVEL).map_err(parquet_error)?,
            ))
            .set_created_by(format!("strata {}", crate::version::DESCRIBE))
            .set_key_value_metadata(Some(key_values))
            .build();
        let mut writer =
            ArrowWriter::try_new(file, schema.clone(), Some(props)).map_err(parquet_error)?;
        let (batches, receive) = std::sync::mpsc::sync_channel::<RecordBatch>(BATCHES_AHEAD);
        let encoder = std::thread::Builder::new()
            .name(format!("strata-export-{}", table.name))
            .spawn(move || {
                for batch in receive {
                    writer.write(&batch).map_err(parquet_error)?;
                }
                // Every batch is in: the footer, then the file made durable.
                writer.into_inner().map_err(parquet_error)?.sync_all()
            })?;
        Ok(ParquetTable {
            table,
            schema,
            builders: table.columns.iter().map(|c| Builder::new(c.kind)).collect(),
            pending: 0,
            rows: 0,
            batches: Some(batches),
            encoder: Some(encoder),
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        let columns = self.builders.iter_mut().map(Builder::finish).collect();
        let batch = RecordBatch::try_new(self.schema.clone(), columns).map_err(parquet_error)?;
        self.pending = 0;
        let sent = match &self.batches {
            Some(batches) => batches.send(batch).is_ok(),
            None => false,
        };
        if sent {
            Ok(())
        } else {
            // The thread stopped on an error (a full disk): that is the error.
            self.batches = None;
            Err(self.join())
        }
    }

    /// The encoding thread's end: its error, or that it stopped without one.
    fn join(&mut self) -> io::Error {
        match self.encoder.take().map(JoinHandle::join) {
            Some(Ok(Err(e))) => e,
            Some(Err(_)) => io::Error::other("the Parquet writer's thread panicked"),
            Some(Ok(Ok(()))) | None => io::Error::other("the Parquet writer stopped"),
        }
    }
}

impl TableWriter for ParquetTable {
    fn row(&mut self, cells: &[Cell]) -> io::Result<()> {
        if cells.len() != self.table.columns.len() {
            return Err(io::Error::other(format!(
                "a row of {} cells for the {} columns of {}",
                cells.len(),
                self.table.columns.len(),
                self.table.name
            )));
        }
        for (builder, cell) in self.builders.iter_mut().zip(cells) {
            builder.push(cell)?;
        }
        self.pending += 1;
        self.rows += 1;
        if self.pending >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn finish(mut self: Box<Self>) -> io::Result<u64> {
        self.flush()?;
        // The last batch sent: the thread writes the footer and ends.
        self.batches = None;
        match self.encoder.take().map(JoinHandle::join) {
            Some(Ok(Ok(()))) => Ok(self.rows),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(io::Error::other("the Parquet writer's thread panicked")),
            None => Err(io::Error::other("the Parquet writer stopped")),
        }
    }
}
