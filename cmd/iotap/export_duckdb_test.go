package main

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/iotap/iotap/internal/export/duckdbtest"
)

// refReportRows are the report's rows a DuckDB query recomputes.
type refReportRows struct {
	Total struct {
		Ops []struct {
			Op     string           `json:"op"`
			Count  int64            `json:"count"`
			Errors int64            `json:"errors"`
			Errnos map[string]int64 `json:"errnos"`
			Bytes  int64            `json:"bytes"`
			Total  int64            `json:"total_ns"`
			P50    int64            `json:"p50_ns"`
			P99    int64            `json:"p99_ns"`
			Max    int64            `json:"max_ns"`
		} `json:"ops"`
		Calls []struct {
			Call   string `json:"call"`
			Count  int64  `json:"count"`
			Errors int64  `json:"errors"`
			Bytes  int64  `json:"bytes"`
			Total  int64  `json:"total_ns"`
			P50    int64  `json:"p50_ns"`
			P99    int64  `json:"p99_ns"`
			Max    int64  `json:"max_ns"`
		} `json:"syscalls"`
		Files []struct {
			Path        string `json:"path"`
			ReadBytes   int64  `json:"read_bytes"`
			WriteBytes  int64  `json:"write_bytes"`
			FirstAccess int64  `json:"first_access_bytes"`
		} `json:"files_by_bytes"`
	} `json:"total"`
}

// duckPercentile checks a report's percentile against DuckDB's quantile_disc of the same
// values: never below it, less than 1/1024 of it above, never above the maximum.
func duckPercentile(t *testing.T, what string, report, exact, maxNs int64) {
	t.Helper()
	if report < exact || report > min(exact+exact/1024, maxNs) {
		t.Errorf("%s: report %d ns, DuckDB's quantile_disc %d ns (3 significant digits allow up to %d)", what, report, exact, min(exact+exact/1024, maxNs))
	}
}

// TestExportsInDuckDB: DuckDB reads the Parquet export of a recorded real job (the demo's
// genomics workload), and SQL over it gives the report's figures: calls, errors, bytes and
// time per request and per system call, errors per errno, p50 and p99 per kind
// (quantile_disc, within the report's stated resolution), per-file bytes and first access,
// and the summary's row.
func TestExportsInDuckDB(t *testing.T) {
	duckdbtest.Require(t)
	dir := t.TempDir()
	tr := recordExportJob(t, dir)
	files := map[string]string{}
	for _, v := range []string{"requests", "syscalls", "files", "processes"} {
		files[v] = filepath.Join(dir, v+".parquet")
		if code, _, stderr := runIotap(t, nil, "export", "--format", "parquet", "--view", v, "-o", files[v], tr); code != exitOK {
			t.Fatalf("export --view %s: exit %d\n%s", v, code, stderr)
		}
	}
	files["summary"] = filepath.Join(dir, "summary.parquet")
	if code, _, stderr := runIotap(t, nil, "summary", "--format", "parquet", "-o", files["summary"], tr); code != exitOK {
		t.Fatalf("summary: exit %d\n%s", code, stderr)
	}
	_, js, _ := runIotap(t, nil, "report", "--format", "json", tr)
	var rep refReportRows
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatal(err)
	}
	views := []string{}
	for _, v := range []string{"requests", "syscalls", "files", "processes", "summary"} {
		views = append(views, "CREATE VIEW "+v+" AS SELECT * FROM "+duckdbtest.Literal(files[v]))
	}
	res := duckdbtest.Query(t, append(views,
		// 5: per request
		`SELECT op, count(*) AS n, count(*) FILTER (WHERE errno <> 0) AS errors, coalesce(sum(bytes), 0) AS bytes, sum(dur_ns) AS total,
			quantile_disc(dur_ns, 0.5) AS p50, quantile_disc(dur_ns, 0.99) AS p99 FROM requests GROUP BY op`,
		// 6: per system call
		`SELECT syscall, count(*) AS n, count(*) FILTER (WHERE errno <> 0) AS errors, coalesce(sum(bytes), 0) AS bytes, sum(dur_ns) AS total,
			quantile_disc(dur_ns, 0.5) AS p50, quantile_disc(dur_ns, 0.99) AS p99 FROM syscalls GROUP BY syscall`,
		// 7: errors per errno
		`SELECT op, errno_name, count(*) AS n FROM requests WHERE errno <> 0 GROUP BY ALL`,
		// 8: per-file bytes from the requests (a copy reads its input, writes its output), and
		// the files view's first access
		`WITH moved AS (
			SELECT path, CASE WHEN op IN ('read', 'copy_file_range') THEN bytes ELSE 0 END AS r, CASE WHEN op = 'write' THEN bytes ELSE 0 END AS w
			FROM requests WHERE op IN ('read', 'write', 'copy_file_range')
			UNION ALL SELECT path2, 0, bytes FROM requests WHERE op = 'copy_file_range')
		SELECT m.path, sum(r) AS read_bytes, sum(w) AS write_bytes, any_value(f.first_read_bytes) AS first_read_bytes
		FROM moved m LEFT JOIN files f ON f.path = m.path AND NOT f.is_dir GROUP BY m.path`,
		// 9: the summary's row against the views
		`SELECT s.*,
			(SELECT max(start_ns + dur_ns) - min(start_ns) FROM requests) AS q_runtime,
			(SELECT count(*) FROM syscalls) AS q_calls,
			(SELECT count(*) FILTER (WHERE syscall = 'open') FROM syscalls) AS q_open,
			(SELECT count(*) FILTER (WHERE syscall = 'read') FROM syscalls) AS q_read,
			(SELECT quantile_disc(dur_ns, 0.99) FROM syscalls WHERE syscall = 'open') AS q_p99_open,
			(SELECT max(dur_ns) FROM syscalls WHERE syscall = 'open') AS q_max_open,
			(SELECT sum(bytes) FROM requests WHERE op IN ('read', 'copy_file_range')) AS q_read_bytes,
			(SELECT sum(first_read_bytes) FROM files) AS q_first,
			(SELECT path FROM files WHERE NOT is_dir ORDER BY dur_ns DESC, path LIMIT 1) AS q_top_file,
			(SELECT comm FROM processes GROUP BY comm ORDER BY sum(dur_ns) DESC, comm LIMIT 1) AS q_top_program,
			-- I/O-active time: the union of the requests' [start, end), gaps and islands
			(WITH s AS (SELECT start_ns AS a, start_ns + greatest(dur_ns, 0) AS b FROM requests),
				g AS (SELECT a, b, max(b) OVER (ORDER BY a, b ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS prev FROM s),
				i AS (SELECT a, b, sum(CASE WHEN prev IS NULL OR a > prev THEN 1 ELSE 0 END) OVER (ORDER BY a, b) AS island FROM g)
			SELECT sum(hi - lo) FROM (SELECT island, min(a) AS lo, max(b) AS hi FROM i GROUP BY island)) AS q_io
		FROM summary s`)...)

	// Per request and per call: counts, errors, bytes, time, p50, p99.
	ops := map[string]duckdbtest.Row{}
	for _, r := range res[5] {
		ops[r.Str("op")] = r
	}
	if len(ops) != len(rep.Total.Ops) {
		t.Errorf("%d operations in DuckDB, %d in the report", len(ops), len(rep.Total.Ops))
	}
	checked := 0
	for _, o := range rep.Total.Ops {
		q := ops[o.Op]
		if q == nil {
			t.Errorf("%s: not in DuckDB", o.Op)
			continue
		}
		if q.Int(t, "n") != o.Count || q.Int(t, "errors") != o.Errors || q.Int(t, "bytes") != o.Bytes || q.Int(t, "total") != o.Total {
			t.Errorf("%s: DuckDB %v; report count %d errors %d bytes %d total %d", o.Op, q, o.Count, o.Errors, o.Bytes, o.Total)
		}
		duckPercentile(t, o.Op+" p50", o.P50, q.Int(t, "p50"), o.Max)
		duckPercentile(t, o.Op+" p99", o.P99, q.Int(t, "p99"), o.Max)
		checked++
	}
	calls := map[string]duckdbtest.Row{}
	for _, r := range res[6] {
		calls[r.Str("syscall")] = r
	}
	if len(calls) != len(rep.Total.Calls) {
		t.Errorf("%d kinds of call in DuckDB, %d in the report", len(calls), len(rep.Total.Calls))
	}
	for _, c := range rep.Total.Calls {
		q := calls[c.Call]
		if q == nil {
			t.Errorf("call %s: not in DuckDB", c.Call)
			continue
		}
		if q.Int(t, "n") != c.Count || q.Int(t, "errors") != c.Errors || q.Int(t, "bytes") != c.Bytes || q.Int(t, "total") != c.Total {
			t.Errorf("call %s: DuckDB %v; report count %d errors %d bytes %d total %d", c.Call, q, c.Count, c.Errors, c.Bytes, c.Total)
		}
		duckPercentile(t, "call "+c.Call+" p50", c.P50, q.Int(t, "p50"), c.Max)
		duckPercentile(t, "call "+c.Call+" p99", c.P99, q.Int(t, "p99"), c.Max)
		checked++
	}

	// Errors per errno.
	errnos := map[string]int64{}
	for _, r := range res[7] {
		errnos[r.Str("op")+" "+r.Str("errno_name")] = r.Int(t, "n")
	}
	want := map[string]int64{}
	for _, o := range rep.Total.Ops {
		for e, n := range o.Errnos {
			want[o.Op+" "+e] = n
		}
	}
	if len(want) == 0 || len(errnos) != len(want) {
		t.Errorf("errors per errno: DuckDB %v, report %v", errnos, want)
	}
	for k, n := range want {
		if errnos[k] != n {
			t.Errorf("%s: DuckDB %d, report %d", k, errnos[k], n)
		}
	}

	// Per file: bytes read and written, first access.
	perFile := map[string]duckdbtest.Row{}
	for _, r := range res[8] {
		perFile[r.Str("path")] = r
	}
	for _, f := range rep.Total.Files {
		q := perFile[f.Path]
		if q == nil || q.Int(t, "read_bytes") != f.ReadBytes || q.Int(t, "write_bytes") != f.WriteBytes || q.Int(t, "first_read_bytes") != f.FirstAccess {
			t.Errorf("file %s: DuckDB %v; report read %d written %d first access %d", f.Path, q, f.ReadBytes, f.WriteBytes, f.FirstAccess)
		}
		checked++
	}

	// The summary's row.
	if len(res[9]) != 1 {
		t.Fatalf("summary: %d rows", len(res[9]))
	}
	s := res[9][0]
	for _, p := range [][2]string{{"runtime_ns", "q_runtime"}, {"calls", "q_calls"}, {"calls_open", "q_open"}, {"calls_read", "q_read"},
		{"read_bytes", "q_read_bytes"}, {"first_read_bytes", "q_first"}, {"io_ns", "q_io"}} {
		if s.Int(t, p[0]) != s.Int(t, p[1]) {
			t.Errorf("summary %s = %d, SQL over the views %d", p[0], s.Int(t, p[0]), s.Int(t, p[1]))
		}
		checked++
	}
	for _, p := range [][2]string{{"top_file", "q_top_file"}, {"top_program", "q_top_program"}} {
		if s.Str(p[0]) != s.Str(p[1]) {
			t.Errorf("summary %s = %q, SQL over the views %q", p[0], s.Str(p[0]), s.Str(p[1]))
		}
	}
	duckPercentile(t, "summary p99_open_ns", s.Int(t, "p99_open_ns"), s.Int(t, "q_p99_open"), s.Int(t, "q_max_open"))
	t.Logf("%d figures of the report and the summary recomputed by DuckDB over the Parquet export of %s", checked, filepath.Base(tr))
}
