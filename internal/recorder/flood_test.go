package recorder

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/testenv"
)

// Environment variables of the re-executed test binary: floodEnv makes it a flooder
// (ADDR COUNT), floodChildEnv runs TestMetricsFlood under a low descriptor limit.
const (
	floodEnv      = "IOTAP_TEST_FLOOD"
	floodChildEnv = "IOTAP_TEST_FLOOD_CHILD"
)

func init() {
	v := os.Getenv(floodEnv)
	if v == "" {
		return
	}
	addr, n, _ := strings.Cut(v, " ")
	count, err := strconv.Atoi(n)
	if err != nil {
		fmt.Fprintln(os.Stderr, "flood:", err)
		os.Exit(2)
	}
	flood(addr, count)
	os.Exit(0)
}

// flood opens count idle TCP connections to addr (256 dials at a time, each given a
// moment: past the server's accept queue a dial waits), says how many it holds, and holds
// them until its stdin closes.
func flood(addr string, count int) {
	var mu sync.Mutex
	var conns []net.Conn
	sem := make(chan struct{}, 256)
	var wg sync.WaitGroup
	for range count {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}()
	}
	wg.Wait()
	fmt.Printf("held %d\n", len(conns))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// floodLimit is the descriptor limit TestMetricsFlood's recorder runs under: a flood of a
// few thousand connections is then what 24,000 are to a recorder with 20,000.
// IOTAP_TEST_FLOOD_LIMIT sets another (20000 floods as in the field, and takes longer).
func floodLimit() uint64 {
	if n, err := strconv.ParseUint(os.Getenv("IOTAP_TEST_FLOOD_LIMIT"), 10, 64); err == nil && n >= 256 {
		return n
	}
	return 2048
}

// TestMetricsFlood: two processes open as many idle connections to the metrics port as
// the recorder has descriptors, while the job creates files through the layer. The job
// sees no error, the recorder's descriptors stay well below its limit, and its memory
// stays bounded. It runs in a child of the test under a descriptor limit of floodLimit,
// which the recorder inherits.
func TestMetricsFlood(t *testing.T) {
	requireRecord(t)
	testenv.Programs(t, testenv.FUSE, "sh")
	limit := floodLimit()
	if os.Getenv(floodChildEnv) == "" {
		cmd := exec.Command(os.Args[0], "-test.run", "^TestMetricsFlood$", "-test.count", "1", "-test.v")
		cmd.Env = append(os.Environ(), floodChildEnv+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), "--- PASS: TestMetricsFlood") {
			t.Fatalf("the test under a descriptor limit of %d: %v\n%s", limit, err, out)
		}
		t.Logf("under a descriptor limit of %d:\n%s", limit, out)
		return
	}
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &unix.Rlimit{Cur: limit, Max: limit}); err != nil {
		t.Fatal(err)
	}
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "t.iotap")
	port := freePort(t)
	jobIn, toJob := io.Pipe()
	fromJob, jobOut := io.Pipe()
	var stderr syncBuffer
	const files = 300
	script := fmt.Sprintf(`echo $PPID; read x; i=0
while [ $i -lt %d ]; do echo x > f$i || exit 9; i=$((i+1)); done
echo created`, files)
	done := make(chan error, 1)
	go func() {
		wd, _ := os.Getwd()
		if err := os.Chdir(dir); err != nil {
			done <- err
			return
		}
		err := Record(context.Background(), Spec{Output: out, Metrics: port, Argv: []string{"sh", "-c", script}},
			Env{Stdin: jobIn, Stdout: jobOut, Stderr: &stderr})
		_ = os.Chdir(wd)
		_ = jobOut.Close()
		done <- err
	}()
	lines := bufio.NewScanner(fromJob)
	if !lines.Scan() {
		t.Fatalf("the job said nothing; stderr:\n%s", stderr.String())
	}
	recorder := strings.TrimSpace(lines.Text())
	before := procFigures(t, recorder)

	// Two floods, each of as many connections as the recorder has descriptors.
	var floods []*exec.Cmd
	for range 2 {
		f := exec.Command(os.Args[0])
		f.Env = append(os.Environ(), floodEnv+"=127.0.0.1:"+port+" "+strconv.FormatUint(limit, 10))
		in, _ := f.StdinPipe()
		fout, _ := f.StdoutPipe()
		f.Stderr = os.Stderr
		if err := f.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = in.Close(); _ = f.Wait() })
		l, err := bufio.NewReader(fout).ReadString('\n')
		if err != nil {
			t.Fatalf("flood: %v", err)
		}
		t.Logf("flood %d: %s", len(floods), strings.TrimSpace(l))
		floods = append(floods, f)
	}
	during := procFigures(t, recorder)
	t.Logf("recorder %s: before the flood %d descriptors, %d KiB resident; during it %d, %d KiB",
		recorder, before.fds, before.rssKiB, during.fds, during.rssKiB)

	// The job creates its files while the floods hold their connections.
	if _, err := io.WriteString(toJob, "go\n"); err != nil {
		t.Fatal(err)
	}
	_ = toJob.Close()
	var rest []string
	for lines.Scan() {
		rest = append(rest, lines.Text())
	}
	if err := <-done; err != nil || len(rest) != 1 || rest[0] != "created" {
		t.Fatalf("the job under the flood: %v, output %q; stderr:\n%s", err, rest, stderr.String())
	}
	if uint64(during.fds) > limit/2 {
		t.Errorf("the recorder had %d descriptors open during the flood, of %d", during.fds, limit)
	}
	if grow := during.rssKiB - before.rssKiB; grow > 32<<10 {
		t.Errorf("the recorder's resident memory grew by %d KiB during the flood", grow)
	}
	evs, _ := readTrace(t, out)
	created := 0
	for _, e := range evs {
		if e.Op.String() == "create" {
			if e.Errno != 0 {
				t.Errorf("a create failed with errno %d: %+v", e.Errno, e.Event)
			}
			created++
		}
	}
	if created != files {
		t.Errorf("the trace holds %d creates, want %d", created, files)
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// figures are a process's open descriptors and resident memory.
type figures struct{ fds, rssKiB int }

func procFigures(t *testing.T, pid string) figures {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	f := figures{fds: len(ents)}
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f.rssKiB, _ = strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
		}
	}
	return f
}
