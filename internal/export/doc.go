// Package export writes a trace's records in formats other programs read: JSON lines, CSV
// and Apache Parquet (a row per record, a versioned schema: docs/export.md), fio's iolog
// (for fio --read_iolog) and Chrome trace-event JSON (for ui.perfetto.dev and
// chrome://tracing); and the summary of many traces (iotap summary).
//
// # Views and columns
//
// A view is what one row stands for: a FUSE request as recorded (ViewRequests), a system
// call of the application, found by folding the requests as the report and replay do
// (ViewSyscalls, package trace/fold), a process or a path with its requests' figures
// (ViewProcesses, ViewFiles: the report's statistics, package trace/stats). Each view has
// one table of columns (views.go, tables.go; the summary's in summary.go): a column's name,
// type, whether it may be NULL, its meaning, and the function that gives its value for a
// record. The table is the only list of a view's columns: the row formats write it, the
// command's help lists it, docs/export.md is generated from it, and TestSchema fails on
// any change of it against testdata/schema.txt (SchemaVersion says which). Every view ends
// with the trace's identity (identity.go), so that many traces' rows query as one table.
//
// # Formats
//
// Formats (export.go) lists every format. A row format implements RowWriter: it takes a
// view's Table, then its rows, one []Value per record in the columns' order (jsonl.go,
// csv.go, parquet.go). JSON lines and Parquet also take a view's records themselves
// (copyRows: writeRecordJSONL, copyParquet), each column's value going from the column
// table's function to the output without a row between: the same bytes, at less cost
// (TestRowsGolden, TestParquetReadsBack, BenchmarkExport). A record holds everything its
// columns' functions read, so that Parquet's encoders can make the values of a copy of it
// in goroutines of their own. The other formats take the view's requests or calls in start order
// as spans, whatever columns the views have (fio.go, perfetto.go). A new format is one file
// and one entry in Formats.
//
// # Many traces
//
// DatasetPath (dataset.go) places each trace's file in a Hive-style partitioned dataset,
// host=HOST/job=JOB/TRACE_ID.EXT; the command reads the traces concurrently and writes each
// to its place. A Summary (summary.go) is the row of a trace or a job: it keeps the row's
// statistics until written, and a job's merge its traces'.
//
// # Names
//
// Names (paths, command names, hosts) are bytes, not necessarily UTF-8 (Type Name). CSV
// writes them unchanged. JSON strings must be UTF-8, so JSON lines write a byte that is not
// part of a valid UTF-8 sequence, 0xXY, as the escape \udcXY (appendJSONString). Parquet's
// STRING holds the name with such bytes replaced by U+FFFD, and a <name>_raw column its exact
// bytes. Perfetto's viewers show text: that format writes U+FFFD for such bytes.
//
// # Streaming and memory
//
// Write reads the trace once and keeps no record after writing it: the JSON lines and CSV
// formats hold one row; Parquet the row group being written (ParquetRowGroupRows rows, as
// compressed pages, and each column's dictionary) and a few batches of 256 records, whose
// columns goroutines of its own encode; the syscalls view the folder's window
// (trace/fold); the processes and files views, the report's statistics of the trace (a row
// per process and per path); fio a name per file and handle; Perfetto a track per thread
// and the per-interval statistics of package trace/stats, written as counters at the end.
//
// # Errors
//
// An error reading the trace is a *ReadError, returned after the records read before it are
// written in an output complete as a file of its format (a Perfetto file is closed as JSON,
// a Parquet file gets its footer). An error writing is wrapped as "write output: ...". A
// cancelled context stops the export with the context's error.
package export
