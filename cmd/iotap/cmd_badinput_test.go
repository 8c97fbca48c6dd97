package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/fusefs/fusetest"
	"github.com/iotap/iotap/internal/testenv"
	"github.com/iotap/iotap/report"
	"github.com/iotap/iotap/trace"
)

// TestReplayBadInput: bad flag values and places are refused with one line and exit 2,
// before the trace is read (nothing on stdout) and before a target or store is touched.
// A --prepare-via store that holds the trace or the results is refused like a target
// that does: replay empties its stores.
func TestReplayBadInput(t *testing.T) {
	dir := t.TempDir()
	store := filepath.Join(dir, "store")
	store2 := filepath.Join(dir, "store2")
	target := filepath.Join(dir, "target")
	for _, d := range []string{store, store2, target} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "keep.txt"), []byte("data"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	mustDo(t, os.Mkdir(filepath.Join(target, "sub"), 0o755))
	tr := filepath.Join(store, "job.iotap") // a trace in the store
	writeCreates(t, tr, 3, time.Millisecond)
	res := filepath.Join(dir, "res")
	base := []string{"replay", tr, "--target", target, "--scratch", "-o", res}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"store-holds-trace", []string{"--prepare-via", store}, "--prepare-via " + store + " holds the trace"},
		{"store-holds-results", []string{"--prepare-via", store2, "-o", filepath.Join(store2, "res")}, "would hold the results"},
		{"missing-store", []string{"--prepare-via", filepath.Join(dir, "nope")}, "--prepare-via " + filepath.Join(dir, "nope")},
		{"stores-per-target", []string{"--prepare-via", target, "--prepare-via", target}, "--prepare-via given 2 times for 1 targets"},
		{"missing-target", []string{"--target", filepath.Join(dir, "nope")}, "--target " + filepath.Join(dir, "nope")},
		{"target-in-target", []string{"--target", filepath.Join(target, "sub")}, "one holds the other, and preparing it deletes the other"},
		{"copies-0", []string{"--copies", "0"}, "--copies 0: want 1 to"},
		{"copies-minus", []string{"--copies", "-1"}, "--copies -1"},
		{"copies-huge", []string{"--copies", "1000000000"}, "--copies 1000000000"},
		{"repeat-0", []string{"--repeat", "0"}, "--repeat 0"},
		{"round-trip-negative", []string{"--round-trip", "-5us"}, `--round-trip "-5us"`},
		{"round-trip-word", []string{"--round-trip", "abc"}, `--round-trip "abc"`},
		{"s3-opt-no-value", []string{"--s3-opt", "nokey"}, `--s3-opt "nokey": want key=value`},
		{"s3-opt-dir-target", []string{"--s3-opt", "prefetch_max=1MiB"}, "--s3-opt applies to s3:// targets"},
		{"keep-dir-target", []string{"--keep"}, "--keep applies to s3:// targets"},
		{"s3-profile", []string{"--s3-profile", "nope"}, `--s3-profile "nope": want mountpoint`},
		{"progress", []string{"--progress", "sometimes"}, `--progress "sometimes"`},
		{"s3-unknown-setting", []string{"--target", "s3://b/p", "--s3-opt", "bogus=1"}, `s3 setting "bogus" is not one of the mountpoint profile's`},
		{"s3-setting-of-query", []string{"--target", "s3://b/p?profile=sdk&prefetch_max=1MiB"}, `"prefetch_max" is not one of the sdk profile's`},
		{"s3-no-prefix", []string{"--target", "s3://b"}, "--target s3://b: give a key prefix"},
		{"s3-bad-url", []string{"--target", "s3://b/x/../y"}, `key component ".." is not allowed`},
		{"s3-store-bad-setting", []string{"--prepare-via", "s3://b/q?concurrency=0"}, "concurrency=0: want a count"},
		{"sample-interval", []string{"--sample-interval", "-1s"}, "--sample-interval must not be negative"},
		{"client-pid-gone", []string{"--client-pid", strconv.Itoa(exitedPid(t))}, "--client-pid"},
		{"copies-with-between-runs", []string{"--copies", "2", "--between-runs", "true"}, "does not go with"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runIotap(t, nil, append(append([]string{}, base...), tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
				t.Errorf("exit %d, stderr %q; want exit %d and one line with %q", code, stderr, exitUsage, tc.want)
			}
			if stdout != "" {
				t.Errorf("stdout %q: the trace was read before the flags were checked", stdout)
			}
			for _, f := range []string{tr, filepath.Join(store, "keep.txt"), filepath.Join(store2, "keep.txt"), filepath.Join(target, "keep.txt")} {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("%s gone: %v", f, err)
				}
			}
		})
	}
}

// exitedPid returns the pid of a process that has exited and been reaped.
func exitedPid(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

// TestBetweenRunsInterrupted: a replay interrupted while its --between-runs command runs
// ends that command's whole process group (a child it started in the background too),
// says it was interrupted, and exits 1.
func TestBetweenRunsInterrupted(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "job.iotap")
	writeCreates(t, tr, 3, time.Millisecond)
	target := filepath.Join(dir, "target")
	if err := os.Mkdir(target, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pidfd := make(chan int, 1)
	go func() {
		defer cancel()
		f, err := os.Open(fifo) // waits for the command to open it
		if err != nil {
			pidfd <- -1
			return
		}
		line, _ := bufio.NewReader(f).ReadString('\n')
		_ = f.Close()
		pid, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			pidfd <- -1
			return
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			fd = -1
		}
		pidfd <- fd
	}()
	var o, e bytes.Buffer
	code := run(ctx, []string{"replay", tr, "--target", target, "-o", filepath.Join(dir, "res"),
		"--between-runs", "sleep 300 & echo $! > " + fifo + "; wait"}, strings.NewReader(""), &o, &e)
	if code != exitError || !strings.Contains(e.String(), "interrupted while --between-runs ran") {
		t.Errorf("exit %d, stderr %q; want %d and the interruption named", code, e.String(), exitError)
	}
	fd := <-pidfd
	if fd < 0 {
		t.Fatal("the background child's pid was not read")
	}
	defer func() { _ = unix.Close(fd) }()
	// The pidfd becomes readable when the process exits.
	n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, int((10 * time.Second).Milliseconds()))
	if err != nil || n != 1 {
		t.Errorf("the --between-runs command's child outlived the replay (poll %d, %v)", n, err)
	}
}

// TestRecordShortJobRoundTrip: a job too short for the round trip to be sampled while it
// ran gets the one measured before it, and the summary says none was sampled, not "0s".
func TestRecordShortJobRoundTrip(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "true")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	mustDo(t, os.MkdirAll(work, 0o755))
	cmd := exec.Command(iotapBin, "record", "--target", work, "-o", filepath.Join(dir, "t.iotap"), "--", "true")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("record: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "per request before the job (the job ended before one was sampled while it ran)") ||
		strings.Contains(string(out), "median of 0 samples") {
		t.Errorf("summary:\n%s", out)
	}
}

// TestCompareBadInput: compare refuses one side, a file that is not a trace and bad flag
// values with their exit codes; a side cut short that no longer does the same work is
// named as damaged (exit 3), not as a usage error.
func TestCompareBadInput(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.iotap")
	writeCreates(t, a, 20, time.Millisecond)
	b, err := os.ReadFile(a)
	mustDo(t, err)
	cut := filepath.Join(dir, "cut.iotap")
	mustDo(t, os.WriteFile(cut, b[:chunkStarts(b)[5]+25], 0o600))
	text := filepath.Join(dir, "notes.txt")
	mustDo(t, os.WriteFile(text, []byte("not a trace\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"one-side", []string{a}, exitUsage, "at least two traces"},
		{"not-a-trace", []string{a, text}, exitError, "is not an iotap trace"},
		{"missing", []string{a, filepath.Join(dir, "nope.iotap")}, exitError, "does not exist"},
		{"format", []string{"--format", "csv", a, a}, exitUsage, `--format "csv"`},
		{"tolerance", []string{"--tolerance", "-1", a, a}, exitUsage, "--tolerance -1"},
		{"view", []string{"--view", "nope", a, a}, exitUsage, `--view "nope"`},
		{"cut-short", []string{a, cut}, exitDamaged, "trace damaged: " + cut + ", and the traces are not the same work"},
		{"cut-short-forced", []string{"--force", a, cut}, exitDamaged, "trace damaged: " + cut},
		{"same", []string{a, a}, exitOK, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runIotap(t, nil, append([]string{"compare"}, tc.args...)...)
			if code != tc.code || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tc.code, tc.want)
			}
		})
	}
}

// TestOutputIsNotInput: report and compare refuse an -o that is one of their traces (exit
// 2) or lies in a missing directory (exit 1, before reading), and replay a prefix whose
// results would overwrite its trace; the trace stays as it was.
func TestOutputIsNotInput(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.iotap")
	writeCreates(t, a, 3, time.Millisecond)
	prev := filepath.Join(dir, "run.t1.r1.iotap") // named as a replay's result
	writeCreates(t, prev, 3, time.Millisecond)
	target := filepath.Join(dir, "target")
	mustDo(t, os.Mkdir(target, 0o755))
	for _, tc := range []struct {
		name  string
		args  []string
		trace string
		want  string
	}{
		{"report", []string{"report", "--format", "json", a, "-o", a}, a, "is the trace"},
		{"report-dir", []string{"report", dir, "-o", a}, a, "is the trace"},
		{"compare", []string{"compare", prev, a, "-o", a}, a, "is the trace"},
		{"replay", []string{"replay", prev, "--target", target, "-o", filepath.Join(dir, "run")}, prev, "the results would overwrite the trace"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, err := os.ReadFile(tc.trace)
			mustDo(t, err)
			code, _, stderr := runIotap(t, nil, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, exitUsage, tc.want)
			}
			if after, err := os.ReadFile(tc.trace); err != nil || !bytes.Equal(before, after) {
				t.Errorf("the trace changed (%v)", err)
			}
		})
	}
	// An -o in a missing directory is a usage error before the traces are read, as
	// export's is.
	for _, cmd := range [][]string{{"report", a}, {"compare", a, a}} {
		code, stdout, stderr := runIotap(t, nil, append(cmd, "-o", filepath.Join(dir, "nope", "r.txt"))...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, "does not exist") {
			t.Errorf("%s -o in a missing directory: exit %d, stderr %q", cmd[0], code, stderr)
		}
	}
}

// TestInfoShowsRoundTrip: info prints the recording layer's round trip the footer holds,
// and says when none was sampled while the job ran.
func TestInfoShowsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		rt   trace.RoundTrip
		want string
	}{
		{"sampled", trace.RoundTrip{Start: 21 * time.Microsecond, Run: 34 * time.Microsecond, Samples: 7}, "recording layer 21µs per request before the job, 34µs while it ran (median of 7 samples)"},
		{"not-sampled", trace.RoundTrip{Start: 21 * time.Microsecond}, "recording layer 21µs per request before the job, none sampled while the job ran"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name+".iotap")
			w, err := trace.Create(p, trace.Header{Kind: "record"}, trace.WriterOptions{})
			mustDo(t, err)
			w.Append(&trace.Event{Op: trace.OpGetattr, Dur: 1000, Path: trace.RootPath, Tid: 1, Pid: 1})
			w.SetRoundTrip(tc.rt)
			mustDo(t, w.Close())
			code, stdout, stderr := runIotap(t, nil, "info", p)
			if code != exitOK || !strings.Contains(stdout, tc.want) || strings.Count(stdout, "round trip:") != 1 {
				t.Errorf("exit %d, stderr %q; stdout:\n%s\nwant one round trip line with %q", code, stderr, stdout, tc.want)
			}
		})
	}
}

// TestS3PricesHelpExample: the example --s3-prices in report's help prices a request as
// S3 bills it (a GET at $0.0004 per 1000), read the way the report reads it.
func TestS3PricesHelpExample(t *testing.T) {
	_, stdout, _ := runIotap(t, nil, "report", "--help")
	ex := regexp.MustCompile(`e\.g\. (\S+)`).FindStringSubmatch(stdout[strings.Index(stdout, "--s3-prices"):])
	if ex == nil {
		t.Fatalf("no example in:\n%s", stdout)
	}
	p, err := report.ParsePrices(ex[1])
	if err != nil {
		t.Fatal(err)
	}
	if got := p["GET"]; got < 3.9e-7 || got > 4.1e-7 {
		t.Errorf("example %s prices a GET at %g, want 4e-7 (0.0004 per 1000)", ex[1], got)
	}
}

// TestReplaySameTargetTwice: one directory given twice as --target is replayed twice, each
// run preparing it again, as an s3:// prefix swept with two settings is.
func TestReplaySameTargetTwice(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "job.iotap")
	writeCreates(t, tr, 3, time.Millisecond)
	target := filepath.Join(dir, "target")
	mustDo(t, os.Mkdir(target, 0o755))
	code, stdout, stderr := runIotap(t, nil, "replay", tr, "--target", target, "--target", target+"/", "-o", filepath.Join(dir, "res"), "--sample-interval", "0")
	if code != exitOK || strings.Count(stdout, "divergences 0") != 2 {
		t.Errorf("exit %d\n%s\n%s", code, stdout, stderr)
	}
}

// TestExitCodesAgree: a missing target and an -o that cannot be written are bad arguments
// in every command: exit 2 with one line naming them, before any work.
func TestExitCodesAgree(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "job.iotap")
	writeCreates(t, tr, 3, time.Millisecond)
	notDir := filepath.Join(dir, "file")
	mustDo(t, os.WriteFile(notDir, []byte("x"), 0o600))
	unwritable := filepath.Join(notDir, "out") // a file's name as a directory: ENOTDIR
	target := filepath.Join(dir, "target")
	mustDo(t, os.Mkdir(target, 0o755))
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		args []string
		want string
		// mounts: record checks its -o once it knows it can mount the target in place
		// (as root, with FUSE); elsewhere it stops before, saying what is missing.
		mounts bool
	}{
		{"record missing target", []string{"record", "--target", missing, "--", "true"}, missing, false},
		{"record unwritable -o", []string{"record", "--target", target, "-o", unwritable + ".iotap", "--", "true"}, notDir + " is not a directory", true},
		{"replay missing target", []string{"replay", tr, "--target", missing}, missing, false},
		{"replay unwritable -o", []string{"replay", tr, "--target", target, "-o", unwritable}, unwritable, false},
		{"report unwritable -o", []string{"report", tr, "-o", unwritable}, unwritable, false},
		{"compare unwritable -o", []string{"compare", tr, tr, "-o", unwritable}, unwritable, false},
		{"export unwritable -o", []string{"export", tr, "-o", unwritable}, "create output", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.mounts {
				fusetest.Require(t)
				testenv.Root(t, testenv.FUSE, "in-place record makes a private mount namespace (CAP_SYS_ADMIN)")
			}
			code, _, stderr := runIotap(t, nil, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, want %d; stderr %q should name %q", code, exitUsage, stderr, tc.want)
			}
		})
	}
}

// untouchedReader fails the test if a command reads it: the command was to stop before.
type untouchedReader struct{ t *testing.T }

func (r untouchedReader) Read([]byte) (int, error) {
	r.t.Error("the trace on standard input was read")
	return 0, io.EOF
}

// TestOutputOpenedFirst: an -o that exists but cannot be opened for writing (a directory,
// even for root) is a usage error in every command with an -o, before the traces are read
// in report and compare, which build their whole output first; and a command that fails
// after opening its -o leaves an existing file as it was and removes one it made.
func TestOutputOpenedFirst(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "job.iotap")
	writeCreates(t, tr, 3, time.Millisecond)
	outDir := filepath.Join(dir, "out")
	mustDo(t, os.Mkdir(outDir, 0o755))
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"report", []string{"report", "-", "-o", outDir}},
		{"report json", []string{"report", "--format", "json", "-", "-o", outDir}},
		{"compare", []string{"compare", "-", tr, "-o", outDir}},
		{"export", []string{"export", tr, "-o", outDir}},
		{"anonymize", []string{"anonymize", tr, "-o", outDir}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runIotap(t, untouchedReader{t}, tc.args...)
			if code != exitUsage || !strings.Contains(stderr, outDir) {
				t.Errorf("exit %d, want %d; stderr %q should name %s", code, exitUsage, stderr, outDir)
			}
		})
	}
	notTrace := filepath.Join(dir, "not-a-trace.iotap")
	mustDo(t, os.WriteFile(notTrace, []byte("not a trace at all"), 0o600))
	for _, cmd := range [][]string{{"report", notTrace}, {"compare", tr, notTrace}} {
		t.Run(cmd[0]+" fails", func(t *testing.T) {
			kept := filepath.Join(dir, cmd[0]+".kept")
			mustDo(t, os.WriteFile(kept, []byte("earlier output"), 0o644))
			made := filepath.Join(dir, cmd[0]+".made")
			for _, out := range []string{kept, made} {
				if code, _, stderr := runIotap(t, nil, append(cmd, "-o", out)...); code == exitOK {
					t.Fatalf("exit 0 on a file that is no trace: %s", stderr)
				}
			}
			if b, err := os.ReadFile(kept); err != nil || string(b) != "earlier output" {
				t.Errorf("an existing -o after a failure: %q, %v", b, err)
			}
			if _, err := os.Stat(made); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the -o a failed command made is left behind: %v", err)
			}
		})
	}
	// A device is written, not cut: -o /dev/null is how a benchmark throws a report away.
	for _, cmd := range [][]string{{"report", tr}, {"report", "--format", "json", tr}, {"compare", tr, tr}} {
		t.Run(cmd[0]+" to /dev/null", func(t *testing.T) {
			if code, _, stderr := runIotap(t, nil, append(cmd, "-o", os.DevNull)...); code != exitOK {
				t.Errorf("exit %d: %s", code, stderr)
			}
		})
	}
}
