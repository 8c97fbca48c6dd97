// Package duckdbtest runs SQL in DuckDB for the tests that check what iotap's exports say
// to an analyst's engine: DuckDB for Node.js (npm @duckdb/node-api, pinned by
// node/package-lock.json and installed into node/node_modules by scripts/install-deps.sh),
// driven by node/query.mjs. Without Node.js or that install, a test skips, naming what is
// missing, and fails instead under IOTAP_REQUIRE_DUCKDB=1 or IOTAP_REQUIRE_FUSE=1 (package
// testenv): a run that must exercise the mount tests must exercise these too.
package duckdbtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
)

// Row is one row of a result: column name to value (JSON: a number, a string, or nil for
// NULL; 64-bit integers come as strings).
type Row map[string]any

// dir is the directory of query.mjs and node_modules.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "node")
}

// Require skips t (or fails it under IOTAP_REQUIRE_DUCKDB=1 or IOTAP_REQUIRE_FUSE=1) when
// DuckDB cannot run.
func Require(t testing.TB) {
	t.Helper()
	req := testenv.DuckDB
	if !req.Required() && testenv.FUSE.Required() {
		req = testenv.FUSE
	}
	if _, err := exec.LookPath("node"); err != nil {
		testenv.Skip(t, req, "node (Node.js) not installed: DuckDB for Node.js reads the exports")
	}
	if _, err := os.Stat(filepath.Join(dir(), "node_modules", "@duckdb", "node-api")); err != nil {
		testenv.Skip(t, req, "DuckDB for Node.js not installed in %s (scripts/install-deps.sh installs it)", dir())
	}
}

// Query runs the statements in order on one in-memory DuckDB and returns each one's rows.
// An error of DuckDB fails t, naming the statement.
func Query(t testing.TB, statements ...string) [][]Row {
	t.Helper()
	Require(t)
	in, err := json.Marshal(statements)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("node", filepath.Join(dir(), "query.mjs"))
	cmd.Stdin = bytes.NewReader(in)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	runErr := cmd.Run()
	var failed struct {
		Error     string `json:"error"`
		Statement int    `json:"statement"`
	}
	if runErr != nil {
		if json.Unmarshal(out.Bytes(), &failed) == nil && failed.Error != "" {
			t.Fatalf("duckdb: %s\nin: %s", failed.Error, statements[failed.Statement])
		}
		t.Fatalf("duckdb: %v\n%s%s", runErr, out.Bytes(), stderr.Bytes())
	}
	var res [][]Row
	d := json.NewDecoder(&out)
	d.UseNumber()
	if err := d.Decode(&res); err != nil {
		t.Fatalf("duckdb: %v: %s", err, out.Bytes())
	}
	return res
}

// Rows runs one statement and returns its rows.
func Rows(t testing.TB, statement string) []Row {
	t.Helper()
	return Query(t, statement)[0]
}

// Int returns the integer in column c of r (0 for NULL); a value that is no integer fails t.
func (r Row) Int(t testing.TB, c string) int64 {
	t.Helper()
	var v int64
	switch x := r[c].(type) {
	case nil:
		return 0
	case json.Number:
		n, err := x.Int64()
		if err != nil {
			t.Fatalf("column %s: %v", c, err)
		}
		v = n
	case string:
		if _, err := fmt.Sscan(x, &v); err != nil {
			t.Fatalf("column %s: %q is not an integer", c, x)
		}
	default:
		t.Fatalf("column %s: %v (%T) is not an integer", c, x, x)
	}
	return v
}

// Str returns the text in column c of r ("" for NULL).
func (r Row) Str(c string) string {
	switch x := r[c].(type) {
	case nil:
		return ""
	case string:
		return x
	default:
		return fmt.Sprint(x)
	}
}

// Literal quotes s as an SQL string literal.
func Literal(s string) string {
	b := []byte{'\''}
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			b = append(b, '\'')
		}
		b = append(b, s[i])
	}
	return string(append(b, '\''))
}
