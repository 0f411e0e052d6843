//! A table as CSV: a header row of the column names (which carry the units), then one row
//! each; null is an empty field, a boolean `true` or `false`, a float the shortest text that
//! reads back to the same bits (`1767258000.0`: a float even when whole).

use super::tables::{Cell, Table};
use super::TableWriter;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufWriter};

pub(crate) struct CsvTable {
    out: csv::Writer<BufWriter<File>>,
    field: String,
    rows: u64,
}

impl CsvTable {
    pub(crate) fn new(table: &Table, file: File) -> io::Result<Self> {
        let mut out = csv::WriterBuilder::new()
            .buffer_capacity(1 << 16)
            .from_writer(BufWriter::with_capacity(1 << 16, file));
        out.write_record(table.columns.iter().map(|c| c.name))?;
        Ok(CsvTable {
            out,
            field: String::new(),
            rows: 0,
        })
    }
}

/// The cell's text into `field` (cleared first).
fn format(cell: &Cell, field: &mut String) {
    field.clear();
    // Writing into a String cannot fail.
    let _ = match cell {
        // Debug: the shortest text that reads back to the same bits, with `.0` on a whole
        // number, so that a reader types the column as floats from its first row on.
        Cell::Float(Some(v)) => write!(field, "{v:?}"),
        Cell::Int(Some(v)) => write!(field, "{v}"),
        Cell::Bool(Some(v)) => write!(field, "{v}"),
        Cell::Text(Some(v)) => {
            field.push_str(v);
            Ok(())
        }
        Cell::Float(None) | Cell::Int(None) | Cell::Bool(None) | Cell::Text(None) => Ok(()),
    };
}

impl TableWriter for CsvTable {
    fn row(&mut self, cells: &[Cell]) -> io::Result<()> {
        for cell in cells {
            format(cell, &mut self.field);
            self.out.write_field(&self.field)?;
        }
        self.out.write_record(None::<&[u8]>)?;
        self.rows += 1;
        Ok(())
    }

    fn finish(self: Box<Self>) -> io::Result<u64> {
        let rows = self.rows;
        let file = self
            .out
            .into_inner()
            .map_err(|e| io::Error::other(e.to_string()))?
            .into_inner()
            .map_err(|e| e.into_error())?;
        file.sync_all()?;
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::borrow::Cow;

    #[test]
    fn nulls_are_empty_and_floats_read_back_to_their_bits() {
        let mut field = String::new();
        for v in [0.1 + 0.2, 1_767_225_600.123_456_7, 1e-300, 1e21, 0.0] {
            format(&Cell::Float(Some(v)), &mut field);
            assert_eq!(field.parse::<f64>().ok(), Some(v), "{field}");
        }
        format(&Cell::Float(Some(1_767_258_000.0)), &mut field);
        assert_eq!(field, "1767258000.0", "a whole time reads as a float");
        for null in [
            Cell::Float(None),
            Cell::Int(None),
            Cell::Bool(None),
            Cell::Text(None),
        ] {
            format(&null, &mut field);
            assert_eq!(field, "");
        }
        format(&Cell::Int(Some(0)), &mut field);
        assert_eq!(field, "0", "a known 0 is not null");
        format(&Cell::Bool(Some(false)), &mut field);
        assert_eq!(field, "false");
        format(&Cell::Text(Some(Cow::Borrowed("a,\"b\""))), &mut field);
        assert_eq!(field, "a,\"b\"", "quoting is the csv writer's");
    }
}
