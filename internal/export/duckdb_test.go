package export

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/iotap/iotap/internal/export/duckdbtest"
	"github.com/iotap/iotap/trace"
	"github.com/iotap/iotap/trace/tracetest"
	"golang.org/x/sys/unix"
)

// duckTypes are the types DuckDB gives each column type of a Parquet export.
var duckTypes = map[Type]string{
	Int:    "BIGINT",
	String: "VARCHAR",
	Name:   "VARCHAR",
	Bool:   "BOOLEAN",
	Time:   "TIMESTAMP WITH TIME ZONE",
	Labels: "MAP(VARCHAR, VARCHAR)",
}

// oddNames are names a job may use that are not plain text: bytes of invalid UTF-8, a
// newline, a quote, a comma, a backslash, non-ASCII text.
var oddNames = []string{"bad\xffname", "new\nline", `quo"te,comma\back`, "naïve 日本", "\xfe\xfd"}

// writeOddTrace writes a trace of the workload, with files of odd names, labels and a
// process of an odd name, to a file, and returns it.
func writeOddTrace(t *testing.T) string {
	t.Helper()
	b := tracetest.NewWithHeader(t, trace.Header{Kind: "record", Hostname: "node\xff7", Target: trace.Target{Path: "/traced", FSType: "fuse.s3fs", Source: "s3fs"},
		Labels:    []trace.Label{{Key: "SLURM_JOB_ID", Value: "77"}, {Key: "team", Value: "genomics"}},
		WallStart: time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), Origin: 1}) // the same trace on every run (TestRowsGolden)
	b.AddProcess(trace.Process{Tid: 40, Pid: 40, PPid: 1, Comm: "we\xffird", Exe: "/bin/we\xffird", Cmdline: []string{"weird", "a b"}})
	tracetest.Workload(b, 3)
	for _, n := range oddNames {
		fh := b.Open(40, "odd/"+n, unix.O_RDONLY)
		b.RW(40, trace.OpRead, "odd/"+n, fh, 0, 4096, 100)
	}
	tr := filepath.Join(t.TempDir(), "odd.iotap")
	if err := os.WriteFile(tr, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return tr
}

// exportFile exports the trace at path in format and view to a file and returns it.
func exportFile(t *testing.T, path, format, view string) string {
	t.Helper()
	r, err := trace.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Close() }() // read-only
	out := filepath.Join(t.TempDir(), view+"."+format)
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Write(context.Background(), r, f, Options{Format: format, View: view}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestParquetInDuckDB: DuckDB reads every view's Parquet file with the schema's columns, in
// order, of the types the schema gives them, with the file's metadata, zstd, dictionary
// encoding of strings and delta encoding of numbers; names of any bytes come back exactly;
// NULLs are NULLs.
func TestParquetInDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	tr := writeOddTrace(t)
	names, _ := Views()
	for _, v := range names {
		t.Run(v, func(t *testing.T) {
			pq := duckdbtest.Literal(exportFile(t, tr, "parquet", v))
			res := duckdbtest.Query(t,
				"DESCRIBE SELECT * FROM "+pq,
				"SELECT key::VARCHAR AS k, value::VARCHAR AS v FROM parquet_kv_metadata("+pq+") ORDER BY k",
				"SELECT DISTINCT path_in_schema AS p, compression AS c, encodings AS e FROM parquet_metadata("+pq+")")
			var want []string
			for _, c := range Columns(v) {
				want = append(want, c.Name+" "+duckTypes[c.Type])
			}
			for _, c := range Columns(v) {
				if c.Type == Name {
					want = append(want, c.Name+RawSuffix+" BLOB")
				}
			}
			var got []string
			for _, r := range res[0] {
				got = append(got, r.Str("column_name")+" "+r.Str("column_type"))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("DuckDB sees the columns\n%s\nthe schema has\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			meta := map[string]string{}
			for _, r := range res[1] {
				meta[r.Str("k")] = r.Str("v")
			}
			if meta["iotap.schema_version"] != fmt.Sprint(SchemaVersion) || meta["iotap.view"] != v {
				t.Errorf("metadata %v", meta)
			}
			for _, r := range res[2] {
				if r.Str("c") != "ZSTD" {
					t.Errorf("column %s compressed %s", r.Str("p"), r.Str("c"))
				}
				if p := r.Str("p"); (p == "path" || p == "comm" || p == "op") && !strings.Contains(r.Str("e"), "RLE_DICTIONARY") {
					t.Errorf("column %s encoded %s", p, r.Str("e"))
				}
				if p := r.Str("p"); slices.ContainsFunc(Columns(v), func(c Column) bool { return c.Name == p && (c.Type == Int || c.Type == Time) }) &&
					!strings.Contains(r.Str("e"), "DELTA_BINARY_PACKED") {
					t.Errorf("column %s encoded %s", p, r.Str("e"))
				}
			}
		})
	}

	// Names survive exactly: the bytes of each odd path, comm and host, from the Parquet
	// file, are the trace's.
	pq := duckdbtest.Literal(exportFile(t, tr, "parquet", ViewRequests))
	rows := duckdbtest.Rows(t, `SELECT DISTINCT hex(coalesce(path_raw, encode(path))) AS path, hex(coalesce(comm_raw, encode(comm))) AS comm,
		hex(coalesce(host_raw, encode(host))) AS host, labels['team'] AS team, job FROM `+pq+` WHERE path LIKE 'odd/%'`)
	seen := map[string]bool{}
	for _, r := range rows {
		p, err := hex.DecodeString(r.Str("path"))
		if err != nil {
			t.Fatal(err)
		}
		seen[string(p)] = true
		if c, _ := hex.DecodeString(r.Str("comm")); string(c) != "we\xffird" {
			t.Errorf("comm %q", c)
		}
		if h, _ := hex.DecodeString(r.Str("host")); string(h) != "node\xff7" {
			t.Errorf("host %q", h)
		}
		if r.Str("team") != "genomics" || r.Str("job") != "77" {
			t.Errorf("labels: team %q, job %q", r.Str("team"), r.Str("job"))
		}
	}
	for _, n := range oddNames {
		if !seen["odd/"+n] {
			t.Errorf("name %q did not come back; DuckDB read %d names", n, len(rows))
		}
	}
	if bytes.Contains([]byte(fmt.Sprint(rows)), []byte("\xff")) {
		t.Error("a STRING column holds invalid UTF-8")
	}

	// NULL where a value does not apply or is unknown; the counts agree with JSON lines.
	js := exportFile(t, tr, "jsonl", ViewRequests)
	res := duckdbtest.Query(t,
		`SELECT count(*) AS n, count(file_offset) AS offsets, count(errno_name) AS errnos, count(bytes) AS bytes,
			count(queued_ns) AS queued, count(*) FILTER (WHERE op = 'lookup' AND file_offset IS NOT NULL) AS lookup_offsets FROM `+pq,
		`SELECT count(*) AS n FROM read_json(`+duckdbtest.Literal(js)+`, format = 'newline_delimited', ignore_errors = true)`)
	r := res[0][0]
	if r.Int(t, "lookup_offsets") != 0 || r.Int(t, "queued") != 0 || r.Int(t, "offsets") == 0 || r.Int(t, "offsets") == r.Int(t, "n") ||
		r.Int(t, "errnos") == r.Int(t, "n") || r.Int(t, "bytes") == 0 {
		t.Errorf("NULLs: %v", r)
	}
	if n := res[1][0].Int(t, "n"); n != r.Int(t, "n") {
		t.Errorf("JSON lines: %d rows, Parquet %d", n, r.Int(t, "n"))
	}
}
