"""Reads the tables `strata export` wrote into DIR back with real readers, and prints them as
one JSON object on stdout, for tests/integration/export_tables.rs to compare:

    python read_tables.py DIR parquet|csv

{"versions": {"pyarrow": ..., "duckdb": ...},
 "pyarrow": {TABLE: {"columns": [...], "types": [...], "rows": [[...], ...]}},
 "duckdb":  {TABLE: {"columns": [...], "types": [...], "rows": [[...], ...]}},
 "metadata": {TABLE: {key: value}},        (Parquet: the file's key-value metadata)
 "schema_metadata": {TABLE: {key: value}}, (the Arrow schema's, as pyarrow reads it)
 "field_metadata": {TABLE: {column: {key: value}}}}

Each reader opens the files as a user would, with nothing said of their schema.
"""

import json
import math
import os
import sys

import duckdb
import pyarrow
import pyarrow.csv
import pyarrow.parquet

TABLES = ("devices", "processes", "findings")


def plain(value):
    """A cell as JSON can hold it; NaN (which no table holds) would be a failure to see."""
    if isinstance(value, float) and math.isnan(value):
        raise ValueError("a NaN cell")
    return value


def with_pyarrow(path, fmt):
    if fmt == "parquet":
        table = pyarrow.parquet.read_table(path)
    else:
        # An empty field is null; pyarrow reads it as "" in a text column unless told.
        options = pyarrow.csv.ConvertOptions(strings_can_be_null=True)
        table = pyarrow.csv.read_csv(path, convert_options=options)
    columns = table.column_names
    data = [table.column(c).to_pylist() for c in columns]
    rows = [[plain(v) for v in row] for row in zip(*data)]
    return {
        "columns": columns,
        "types": [str(table.schema.field(c).type) for c in columns],
        "rows": rows,
    }


def with_duckdb(path, fmt):
    reader = "read_parquet" if fmt == "parquet" else "read_csv"
    con = duckdb.connect()
    result = con.execute(f"SELECT * FROM {reader}(?)", [path])
    columns = [d[0] for d in result.description]
    types = [str(d[1]) for d in result.description]
    rows = [[plain(v) for v in row] for row in result.fetchall()]
    con.close()
    return {"columns": columns, "types": types, "rows": rows}


def metadata(path):
    meta = pyarrow.parquet.read_metadata(path).metadata or {}
    return {k.decode(): v.decode() for k, v in meta.items() if not k.startswith(b"ARROW:")}


def main():
    directory, fmt = sys.argv[1], sys.argv[2]
    out = {
        "versions": {"pyarrow": pyarrow.__version__, "duckdb": duckdb.__version__},
        "pyarrow": {},
        "duckdb": {},
        "metadata": {},
        "field_metadata": {},
        "schema_metadata": {},
    }
    for name in TABLES:
        path = os.path.join(directory, f"{name}.{fmt}")
        out["pyarrow"][name] = with_pyarrow(path, fmt)
        out["duckdb"][name] = with_duckdb(path, fmt)
        if fmt == "parquet":
            out["metadata"][name] = metadata(path)
            schema = pyarrow.parquet.read_schema(path)
            out["schema_metadata"][name] = {
                k.decode(): v.decode() for k, v in (schema.metadata or {}).items()
            }
            out["field_metadata"][name] = {
                f.name: {k.decode(): v.decode() for k, v in (f.metadata or {}).items()}
                for f in schema
            }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
