package memlimit

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/testenv"
)

// childEnv makes the re-executed test binary join the cgroup it names, call Set and print
// what it got.
const childEnv = "IOTAP_MEMLIMIT_CHILD"

func TestMain(m *testing.M) {
	if dir := os.Getenv(childEnv); dir != "" {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0); err != nil {
			fmt.Fprintln(os.Stderr, "join cgroup:", err)
			os.Exit(1)
		}
		l, err := Set()
		if err != nil {
			fmt.Fprintln(os.Stderr, "set:", err)
			os.Exit(1)
		}
		fmt.Printf("%d %d %s\n", debug.SetMemoryLimit(-1), l.Bytes, Applied().File)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fakeTree writes files (paths relative to a temporary root, which every "@" in the
// contents and in mountinfo stands for) and returns the root.
func fakeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestFind(t *testing.T) {
	const v2Mount = "30 23 0:26 / @/cg rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
	const v1Mounts = "31 23 0:28 / @/cg/unified rw,relatime - cgroup2 cgroup2 rw\n" +
		"35 31 0:32 / @/cg/memory rw,relatime - cgroup cgroup rw,memory\n" +
		"36 31 0:33 / @/cg/pids rw,relatime - cgroup cgroup rw,pids\n"
	tests := []struct {
		name      string
		cgroup    string
		mountinfo string
		files     map[string]string
		want      int64
		wantFile  string // relative to the root
		wantErr   string
	}{
		{
			name:      "v2 parent's memory.max",
			cgroup:    "0::/job_7/step_0/task_0\n",
			mountinfo: v2Mount,
			files: map[string]string{
				"cg/job_7/step_0/task_0/memory.max": "max\n", "cg/job_7/step_0/memory.max": "max\n",
				"cg/job_7/memory.max": "1073741824\n", "cg/job_7/memory.high": "max\n",
			},
			want: 1 << 30, wantFile: "cg/job_7/memory.max",
		},
		{
			name:      "v2 memory.high below memory.max",
			cgroup:    "0::/app\n",
			mountinfo: v2Mount,
			files:     map[string]string{"cg/app/memory.max": "268435456\n", "cg/app/memory.high": "134217728\n"},
			want:      128 << 20, wantFile: "cg/app/memory.high",
		},
		{
			name:      "v2 no limit",
			cgroup:    "0::/user.slice/session-1.scope\n",
			mountinfo: v2Mount,
			files:     map[string]string{"cg/user.slice/session-1.scope/memory.max": "max\n", "cg/user.slice/memory.max": "max\n"},
		},
		{
			name:      "v2 root cgroup has no limit files",
			cgroup:    "0::/\n",
			mountinfo: v2Mount,
			files:     map[string]string{"cg/cgroup.procs": ""},
		},
		{
			name:      "v2 container: its cgroup namespace's root is the mount's",
			cgroup:    "0::/\n",
			mountinfo: "600 500 0:26 / @/cg ro,nosuid - cgroup2 cgroup rw\n",
			files:     map[string]string{"cg/memory.max": "67108864\n"},
			want:      64 << 20, wantFile: "cg/memory.max",
		},
		{
			name:      "v2 mount of a subtree",
			cgroup:    "0::/docker/abc\n",
			mountinfo: "600 500 0:26 /docker/abc @/cg ro - cgroup2 cgroup rw\n",
			files:     map[string]string{"cg/memory.max": "67108864\n"},
			want:      64 << 20, wantFile: "cg/memory.max",
		},
		{
			name:      "v2 cgroup outside what the mount shows",
			cgroup:    "0::/other\n",
			mountinfo: "600 500 0:26 /docker/abc @/cg ro - cgroup2 cgroup rw\n",
			files:     map[string]string{"cg/memory.max": "67108864\n"},
		},
		{
			name:   "v1 memory controller, limit on the parent, unlimited leaf",
			cgroup: "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/4b98\n0::/\n",
			files: map[string]string{
				"cg/memory/process_api/4b98/memory.limit_in_bytes": "9223372036854771712\n",
				"cg/memory/process_api/memory.limit_in_bytes":      "536870912\n",
				"cg/memory/memory.limit_in_bytes":                  "9223372036854771712\n",
			},
			mountinfo: v1Mounts,
			want:      512 << 20, wantFile: "cg/memory/process_api/memory.limit_in_bytes",
		},
		{
			name:      "v1 memory shares a hierarchy with cpu",
			cgroup:    "3:cpu,memory:/batch\n",
			mountinfo: "35 31 0:32 / @/cg/cpu,memory rw - cgroup cgroup rw,cpu,memory\n",
			files:     map[string]string{"cg/cpu,memory/batch/memory.limit_in_bytes": "1048576000\n"},
			want:      1048576000, wantFile: "cg/cpu,memory/batch/memory.limit_in_bytes",
		},
		{
			name:      "mount point with a space",
			cgroup:    "0::/a\n",
			mountinfo: `30 23 0:26 / @/c\040g rw - cgroup2 cgroup2 rw` + "\n",
			files:     map[string]string{"c g/a/memory.max": "1000000\n"},
			want:      1000000, wantFile: "c g/a/memory.max",
		},
		{
			name:      "unreadable value",
			cgroup:    "0::/a\n",
			mountinfo: v2Mount,
			files:     map[string]string{"cg/a/memory.max": "lots\n"},
			wantErr:   `not a limit: "lots"`,
		},
		{
			name:      "no cgroup file",
			mountinfo: v2Mount,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeTree(t, tt.files)
			mi := strings.ReplaceAll(tt.mountinfo, "@", root)
			got, err := Find([]byte(tt.cgroup), []byte(mi), os.ReadFile)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := Limit{Bytes: tt.want}
			if tt.wantFile != "" {
				want.File = filepath.Join(root, tt.wantFile)
			}
			if got != want {
				t.Errorf("got %+v, want %+v", got, want)
			}
		})
	}
}

// TestSetUnderCgroupLimit makes a cgroup with a 64 MiB memory limit (cgroup v2, or the v1
// memory controller) and runs a process in it: Set gives Go 90 % of the limit, and leaves
// an explicit GOMEMLIMIT alone.
func TestSetUnderCgroupLimit(t *testing.T) {
	testenv.Root(t, testenv.Cgroups, "creates a cgroup")
	limit := int64(64 << 20)
	dir, file := makeLimitedCgroup(t, limit)
	goLimit := int64(float64(limit) * Ratio)
	for _, tc := range []struct {
		name, env string
		want      string
	}{
		{"from the cgroup", "", fmt.Sprintf("%d %d %s", goLimit, goLimit, file)},
		{"GOMEMLIMIT set", "GOMEMLIMIT=100MiB", fmt.Sprintf("%d 0 ", 100<<20)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+dir)
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimSuffix(string(out), "\n"); got != tc.want {
				t.Errorf("Go memory limit, limit set, from: %q, want %q", got, tc.want)
			}
		})
	}
}

// makeLimitedCgroup makes a cgroup with a memory limit at the root of the hierarchy that
// has the memory controller, removed when the test ends. It returns the cgroup's directory
// and its limit file.
func makeLimitedCgroup(t *testing.T, limit int64) (dir, file string) {
	t.Helper()
	var h *hierarchy
	for _, x := range hierarchies(readSelf("/proc/self/cgroup"), readSelf("/proc/self/mountinfo")) {
		if !x.v2 {
			h = &x
			break
		}
		if c, err := os.ReadFile(filepath.Join(x.mount, "cgroup.subtree_control")); err == nil && hasController(strings.Join(strings.Fields(string(c)), ","), "memory") {
			h = &x
			break
		}
	}
	if h == nil {
		testenv.Skip(t, testenv.Cgroups, "no cgroup hierarchy with the memory controller enabled for new cgroups (cgroup v2 with memory in the root's cgroup.subtree_control, or a v1 memory mount)")
	}
	dir = filepath.Join(h.mount, fmt.Sprintf("iotap-memlimit-test-%d", os.Getpid()))
	if err := os.Mkdir(dir, 0o755); err != nil {
		testenv.Skip(t, testenv.Cgroups, "cannot create a cgroup: %v", err)
	}
	t.Cleanup(func() {
		if err := os.Remove(dir); err != nil {
			t.Errorf("remove the test's cgroup: %v", err)
		}
	})
	file = filepath.Join(dir, "memory.limit_in_bytes")
	if h.v2 {
		file = filepath.Join(dir, "memory.max")
	}
	if err := os.WriteFile(file, []byte(strconv.FormatInt(limit, 10)), 0); err != nil {
		t.Fatalf("set the test cgroup's limit: %v", err)
	}
	return dir, file
}
