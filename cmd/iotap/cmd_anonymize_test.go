package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/anonymize"
)

// compareReports checks that two traces report the same counts, errors, bytes and times.
func compareReports(t *testing.T, a, b string) {
	t.Helper()
	var js [2]string
	for i, tr := range []string{a, b} {
		code, out, errs := runIotap(t, nil, "report", "--format", "json", tr)
		if code != exitOK {
			t.Fatalf("report %s: exit %d\n%s", tr, code, errs)
		}
		js[i] = out
	}
	ra, ja := reportTotals(t, js[0])
	rb, jb := reportTotals(t, js[1])
	if len(ra) < 5 {
		t.Fatalf("report of %s has %d rows", a, len(ra))
	}
	for k, v := range ra {
		if rb[k] != v {
			t.Errorf("%s: original %v, anonymised %v", k, v, rb[k])
		}
	}
	for k := range rb {
		if _, ok := ra[k]; !ok {
			t.Errorf("%s: only in the anonymised trace's report", k)
		}
	}
	if ja != jb {
		t.Errorf("job line differs:\n%s\n%s", ja, jb)
	}
}

func TestAnonymize(t *testing.T) {
	dir := t.TempDir()
	tr := writeWorkloadTrace(t, dir)
	out := filepath.Join(dir, "anon.iotap")
	code, stdout, stderr := runIotap(t, nil, "anonymize", tr, "-o", out)
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if stdout != "" || !strings.Contains(stderr, "anonymised") || !strings.Contains(stderr, out+".key") {
		t.Errorf("stdout %q stderr %q", stdout, stderr)
	}
	key, err := os.ReadFile(out + ".key")
	if err != nil || len(bytes.TrimSpace(key)) != 64 {
		t.Fatalf("key beside the output: %q %v", key, err)
	}
	for _, f := range []string{out, out + ".key"} {
		if st, err := os.Stat(f); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v %v: want mode 0600", f, st.Mode(), err)
		}
	}
	compareReports(t, tr, out)

	// No name of the original is left in what the anonymised trace exports or reports.
	_, js, _ := runIotap(t, nil, "export", out)
	_, info, _ := runIotap(t, nil, "info", out)
	_, rep, _ := runIotap(t, nil, "report", out)
	// The Slurm job id, 4242, is looked for whole: a token is hex digits, which may hold it.
	for _, name := range []string{"ann", "node17", "pipeline", "secret", "archive", "app.db", "journal", "sqlite3", "s3fs", "=4242", `"4242"`} {
		for what, s := range map[string]string{"export": js, "info": info, "report": rep} {
			if strings.Contains(s, name) {
				t.Errorf("%s of the anonymised trace names %q", what, name)
			}
		}
	}
	if !strings.Contains(info, anonymize.Label+"=hmac-sha256 key ") || !strings.Contains(js, `.db"`) {
		t.Errorf("info lacks the key's label, or export the kept extension:\n%s", info)
	}

	// The same key gives the same tokens: anonymize again, and export --anonymize.
	again := filepath.Join(dir, "again.iotap")
	if code, _, stderr := runIotap(t, nil, "anonymize", tr, "-o", again, "--key-file", out+".key"); code != exitOK {
		t.Fatalf("again: exit %d\n%s", code, stderr)
	}
	_, js2, _ := runIotap(t, nil, "export", again)
	_, js3, stderr3 := runIotap(t, nil, "export", "--anonymize", "--key-file", out+".key", tr)
	if js2 != js || js3 != js {
		t.Errorf("the same key gave other tokens (export --anonymize: %s)", stderr3)
	}
	_, noExt, _ := runIotap(t, nil, "export", "--anonymize", "--no-extensions", tr)
	if strings.Contains(noExt, `.db"`) || strings.Count(noExt, "\n") != strings.Count(js, "\n") {
		t.Error("--no-extensions kept an extension, or changed the events")
	}
	for _, format := range []string{"csv", "perfetto", "fio"} {
		code, a, errs := runIotap(t, nil, "export", "--anonymize", "--format", format, tr)
		if code != exitOK || strings.Contains(a, "archive") || strings.Contains(a, "sqlite3") {
			t.Errorf("export --anonymize --format %s: exit %d, names left?\n%s", format, code, errs)
		}
	}
}

// TestAnonymizeBadInput: bad arguments, unreadable or damaged traces and unwritable
// outputs give clear errors and the documented exit codes.
func TestAnonymizeBadInput(t *testing.T) {
	fx := traceFixtures(t)
	dir := t.TempDir()
	shortKey := filepath.Join(dir, "short.key")
	if err := os.WriteFile(shortKey, []byte("too short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	taken := filepath.Join(dir, "taken.iotap")
	if err := os.WriteFile(taken+".key", []byte("an old key, which is kept 0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dropped := filepath.Join(dir, "dropped.iotap")
	writeDroppedTrace(t, dropped)
	keyDir := filepath.Join(dir, "keys")
	emptyKey := filepath.Join(dir, "empty.key")
	openKey := filepath.Join(dir, "open.key")
	groupKey := filepath.Join(dir, "group.key")
	if err := os.Mkdir(keyDir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, k := range []struct {
		path, text string
		mode       os.FileMode
	}{{emptyKey, "", 0o600}, {openKey, "a key that anyone can read 0123\n", 0o644}, {groupKey, "a key its group can read 0123\n", 0o640}} {
		if err := os.WriteFile(k.path, []byte(k.text), k.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(k.path, k.mode); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name    string
		args    []string
		code    int
		stderr  string
		written string // an output that must exist afterwards ("" none checked)
		absent  string // one that must not
	}{
		{name: "no-output", args: []string{fx["good"]}, code: exitUsage, stderr: "-o OUT is required"},
		{name: "two-traces", args: []string{fx["good"], fx["good"], "-o", filepath.Join(dir, "x")}, code: exitUsage, stderr: "want exactly one trace"},
		{name: "itself", args: []string{fx["good"], "-o", fx["good"]}, code: exitUsage, stderr: "is the trace itself"},
		{name: "s3-flag-without-s3", args: []string{fx["good"], "-o", filepath.Join(dir, "e.iotap"), "--s3-region", "eu-west-1"}, code: exitUsage, stderr: "applies to s3:// traces"},
		{name: "stdout-without-key", args: []string{fx["good"], "-o", "-"}, code: exitUsage, stderr: "needs --key-file"},
		{name: "key-beside-exists", args: []string{fx["good"], "-o", taken}, code: exitUsage, stderr: "exists: give it with --key-file", absent: taken},
		{name: "short-key", args: []string{fx["good"], "-o", filepath.Join(dir, "s.iotap"), "--key-file", shortKey}, code: exitUsage, stderr: "want at least 16"},
		{name: "key-is-a-directory", args: []string{fx["good"], "-o", filepath.Join(dir, "kd.iotap"), "--key-file", keyDir}, code: exitUsage,
			stderr: "--key-file " + keyDir + " is a directory: want a file holding the key", absent: filepath.Join(dir, "kd.iotap")},
		{name: "empty-key", args: []string{fx["good"], "-o", filepath.Join(dir, "ke.iotap"), "--key-file", emptyKey}, code: exitUsage,
			stderr: "holds a key of 0 bytes: want at least 16", absent: filepath.Join(dir, "ke.iotap")},
		{name: "world-readable-key", args: []string{fx["good"], "-o", filepath.Join(dir, "kw.iotap"), "--key-file", openKey}, code: exitOK,
			stderr: "iotap: warning: --key-file " + openKey + " is readable by other users (mode 0644)", written: filepath.Join(dir, "kw.iotap")},
		{name: "group-readable-key", args: []string{fx["good"], "-o", filepath.Join(dir, "kg.iotap"), "--key-file", groupKey}, code: exitOK,
			stderr: "iotap: warning: --key-file " + groupKey + " is readable by its group (mode 0640)", written: filepath.Join(dir, "kg.iotap")},
		{name: "missing", args: []string{fx["missing"], "-o", filepath.Join(dir, "m.iotap")}, code: exitError, stderr: "does not exist", absent: filepath.Join(dir, "m.iotap.key")},
		{name: "not-a-trace", args: []string{fx["text"], "-o", filepath.Join(dir, "t.iotap")}, code: exitError, stderr: "is not an iotap trace"},
		{name: "unwritable", args: []string{fx["good"], "-o", filepath.Join(fx["missing"], "x.iotap")}, code: exitUsage, stderr: "create output:"},
		{name: "truncated", args: []string{fx["truncated"], "-o", filepath.Join(dir, "tr.iotap")}, code: exitDamaged, stderr: "no footer", written: filepath.Join(dir, "tr.iotap")},
		{name: "corrupt", args: []string{fx["corrupt"], "-o", filepath.Join(dir, "c.iotap")}, code: exitDamaged, stderr: "payload checksum mismatch", written: filepath.Join(dir, "c.iotap")},
		{name: "dropped", args: []string{dropped, "-o", filepath.Join(dir, "d.iotap")}, code: exitDropped, stderr: "lacks", written: filepath.Join(dir, "d.iotap")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runIotap(t, nil, append([]string{"anonymize"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, want %d; stderr lacks %q?\n%s", code, tc.code, tc.stderr, stderr)
			}
			if tc.written != "" {
				if _, err := os.Stat(tc.written); err != nil {
					t.Error(err)
				}
			}
			if tc.absent != "" {
				if _, err := os.Stat(tc.absent); err == nil {
					t.Errorf("%s was written", tc.absent)
				}
			}
		})
	}
	// A copy keeps what the original lacks: a trace cut short stays cut short, and one
	// whose recorder dropped events says so.
	if code, stdout, _ := runIotap(t, nil, "info", filepath.Join(dir, "tr.iotap")); code != exitDamaged || !strings.Contains(stdout, "no footer") {
		t.Errorf("the copy of a trace cut short: info exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runIotap(t, nil, "info", filepath.Join(dir, "d.iotap")); code != exitDropped {
		t.Errorf("the copy of a trace with drops: info exit %d\n%s", code, stderr)
	}
	// Standard output, with a key file that does not exist yet: it is made.
	newKey := filepath.Join(dir, "new.key")
	code, stdout, stderr := runIotap(t, nil, "anonymize", fx["good"], "-o", "-", "--key-file", newKey)
	if code != exitOK || !strings.HasPrefix(stdout, "\x89iotap") || !strings.Contains(stderr, "a new key is in") {
		t.Errorf("-o -: exit %d, stdout %.8q\n%s", code, stdout, stderr)
	}
	if _, err := os.Stat(newKey); err != nil {
		t.Error(err)
	}
}
