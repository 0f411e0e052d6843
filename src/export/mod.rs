//! `strata export FILE --to parquet|csv OUT`: a recording as tidy tables for a notebook,
//! one file each in the directory OUT: `devices` (each device's layers at each sample),
//! `processes` (each process's figures, long form) and `findings` (the episodes `strata
//! analyze` finds). One pass through the same pipeline as `strata analyze`, with the same
//! reading of bad input; the tables ([`tables`]) are the same in either format.

pub mod command;
mod csv;
mod out;
#[cfg(feature = "parquet")]
mod parquet;
pub(crate) mod tables;

use std::fs::File;
use std::io;
use tables::{Cell, Table};

/// The format of the tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Apache Parquet (zstd), with each column's meaning in the file's key-value metadata.
    Parquet,
    /// CSV with a header row: the column names carry the units.
    Csv,
}

impl Format {
    /// The tables' file extension.
    pub(crate) fn extension(self) -> &'static str {
        match self {
            Format::Parquet => "parquet",
            Format::Csv => "csv",
        }
    }

    /// Whether this build can write it (Parquet is the cargo feature `parquet`).
    pub(crate) fn available(self) -> bool {
        match self {
            Format::Parquet => cfg!(feature = "parquet"),
            Format::Csv => true,
        }
    }
}

/// What every table's metadata says of its origin (Parquet's key-value metadata).
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    /// The recording's path, as given.
    // Read by the Parquet writer only.
    #[cfg_attr(not(feature = "parquet"), allow(dead_code))]
    pub(crate) recording: String,
}

/// A table being written, row by row, then finished whole.
pub(crate) trait TableWriter {
    fn row(&mut self, cells: &[Cell]) -> io::Result<()>;
    /// Flushes the rest to the file and makes it durable; returns the rows written.
    fn finish(self: Box<Self>) -> io::Result<u64>;
}

/// A writer of `table` in `format` into `file`.
pub(crate) fn writer(
    format: Format,
    table: &'static Table,
    file: File,
    origin: &Origin,
) -> io::Result<Box<dyn TableWriter>> {
    match format {
        Format::Csv => Ok(Box::new(csv::CsvTable::new(table, file)?)),
        #[cfg(feature = "parquet")]
        Format::Parquet => Ok(Box::new(parquet::ParquetTable::new(table, file, origin)?)),
        #[cfg(not(feature = "parquet"))]
        Format::Parquet => {
            let _ = origin;
            Err(io::Error::other(
                "this strata was built without Parquet (the cargo feature `parquet`)",
            ))
        }
    }
}
