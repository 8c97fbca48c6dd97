// Package export writes a trace's records in formats other programs read: JSON lines and
// CSV (a row per record, stable column names), fio's iolog (for fio --read_iolog) and
// Chrome trace-event JSON (for ui.perfetto.dev and chrome://tracing).
//
// # Views and columns
//
// A view is what one record stands for: a FUSE request as recorded (ViewRequests), or a
// system call of the application, found by folding the requests as the report and replay
// do (ViewSyscalls, package trace/fold). Each view has one table of columns
// (requestColumns, syscallColumns in columns.go): a column's name, type and meaning, and
// the function that gives its value for a record. The table is the only list of a view's
// columns: the row formats write it, the command's help lists it, the manual documents it.
// Columns are a stable interface: never rename or reorder them; add new ones at the end.
//
// # Formats
//
// Formats (export.go) lists every format. A row format implements RowWriter and takes a
// view's columns and then its rows, one []Value per record in the columns' order (jsonl.go,
// csv.go); the other formats take the view's requests or calls in start order as spans,
// whatever columns the views have (fio.go, perfetto.go). A new format is one file and one
// entry in Formats.
//
// # Names
//
// Names (paths, command names) are bytes, not necessarily UTF-8. CSV writes them unchanged.
// JSON strings must be UTF-8, so JSON lines write a byte that is not part of a valid UTF-8
// sequence, 0xXY, as the escape \udcXY (appendJSONString): every name reads back to its
// bytes. Perfetto's viewers show text, so that format writes U+FFFD for such bytes.
//
// # Streaming
//
// Write reads the trace once and keeps no record after writing it: the row formats hold one
// row; the syscalls view holds the folder's window (trace/fold); fio holds a name per file
// and handle; Perfetto holds a track per thread and the per-interval statistics of package
// trace/stats, whose series it writes as counters at the end.
//
// # Errors
//
// An error reading the trace is a *ReadError, returned after the records read before it are
// written in an output complete as a file of its format (a Perfetto file is closed as
// JSON). An error writing is wrapped as "write output: ...". A cancelled context stops the
// export with the context's error.
package export
