package sysinfo

import (
	"os"
	"strings"
	"testing"
)

const sample = `22 27 0:21 / /proc rw,relatime - proc proc rw
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard
40 27 0:50 / /mnt/my\040bucket rw,nosuid,nodev,relatime shared:1 - fuse.s3fs s3fs rw,user_id=0,group_id=0
41 40 0:51 / /mnt/my\040bucket rw,nosuid,nodev,relatime - fuse.iotap iotap rw,user_id=0
bogus line
`

func TestParseMountinfo(t *testing.T) {
	ms, err := ParseMountinfo(strings.NewReader(sample))
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 4 {
		t.Fatalf("got %d mounts, want 4", len(ms))
	}
	m := ms[2]
	if m.MountPoint != "/mnt/my bucket" || m.FSType != "fuse.s3fs" || m.Source != "s3fs" || m.ID != 40 || m.Parent != 27 || m.Major != 0 || m.Minor != 50 {
		t.Errorf("bad parse: %+v", m)
	}
	if m := ms[1]; m.Major != 254 || m.Minor != 0 {
		t.Errorf("device of %s: %d:%d, want 254:0", m.MountPoint, m.Major, m.Minor)
	}
	tests := []struct {
		name, path, wantMP, wantType string
	}{
		{name: "root", path: "/usr/bin", wantMP: "/", wantType: "ext4"},
		{name: "proc", path: "/proc/self", wantMP: "/proc", wantType: "proc"},
		{name: "overmount on top wins", path: "/mnt/my bucket/x", wantMP: "/mnt/my bucket", wantType: "fuse.iotap"},
		{name: "prefix is not a parent", path: "/mnt/my bucketx", wantMP: "/", wantType: "ext4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := longestPrefix(ms, tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if m.MountPoint != tt.wantMP || m.FSType != tt.wantType {
				t.Errorf("got %s %s, want %s %s", m.MountPoint, m.FSType, tt.wantMP, tt.wantType)
			}
		})
	}
}

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{`a\040b`: "a b", `a\\b`: `a\\b`, `tail\04`: `tail\04`, `x\011`: "x\t"} {
		if got := unescape(in); got != want {
			t.Errorf("unescape(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMountOfSelf(t *testing.T) {
	dir := t.TempDir()
	m, err := MountOf(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.FSType == "" || m.MountPoint == "" || !Within(dir, m.MountPoint) {
		t.Errorf("MountOf(%s) = %+v", dir, m)
	}
	if _, err := os.Stat("/proc/self/mountinfo"); err != nil {
		t.Skip("no /proc")
	}
	if KernelRelease() == "" {
		t.Error("empty kernel release")
	}
	if Hostname() == "" {
		t.Error("empty host name")
	}
}
