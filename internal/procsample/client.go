package procsample

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/iotap/iotap/internal/sysinfo"
)

// Client is the process that serves the mount holding a path.
type Client struct {
	Pid    int
	Name   string // command name, e.g. "s3fs", "mfsmount"
	FSType string // of the mount, e.g. "fuse.s3fs"
	Mount  string // the mount point
	// Others are further processes holding the same FUSE connection (a daemon's forked
	// helpers); Pid is the first of them that is not fusermount.
	Others []int
}

// Errors of FindClient.
var (
	// ErrNoClient: the path is on a local file system, served by no process.
	ErrNoClient = errors.New("no storage client process: a local file system")
	// ErrKernelClient: a network file system whose client is the kernel's (nfs, cifs,
	// ceph, lustre, ...): no process to sample.
	ErrKernelClient = errors.New("the kernel serves this network file system: no client process to sample")
	// ErrNotFound: a FUSE mount whose daemon this process cannot see (another PID
	// namespace, or /proc not readable).
	ErrNotFound = errors.New("no process holding the mount's FUSE connection is visible")
)

// kernelClients are network file systems served by the kernel.
var kernelClients = []string{"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "lustre", "9p", "afs", "gfs2", "ocfs2", "glusterfs", "beegfs", "gpfs", "orangefs", "virtiofs"}

// FindClient returns the process serving the file system that holds path.
func FindClient(path string) (Client, error) {
	m, err := sysinfo.MountOf(path)
	if err != nil {
		return Client{}, fmt.Errorf("procsample: find client of %s: %w", path, err)
	}
	c := Client{FSType: m.FSType, Mount: m.MountPoint}
	base, _, _ := strings.Cut(m.FSType, ".")
	switch {
	case base == "fuse" || base == "fuseblk":
	case slices.Contains(kernelClients, base):
		return c, fmt.Errorf("procsample: %s (%s): %w", m.MountPoint, m.FSType, ErrKernelClient)
	default:
		return c, fmt.Errorf("procsample: %s (%s): %w", m.MountPoint, m.FSType, ErrNoClient)
	}
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return c, fmt.Errorf("procsample: find client of %s: %w", path, err)
	}
	conn := connectionID(st.Dev)
	pids, withInfo, err := fuseHolders(conn, m.MountPoint)
	if err != nil {
		return c, err
	}
	if len(pids) == 0 {
		how := "none names connection " + strconv.FormatUint(conn, 10)
		if !withInfo {
			how = "none names the mount point on its command line"
		}
		return c, fmt.Errorf("procsample: %s (%s): %w (%s)", m.MountPoint, m.FSType, ErrNotFound, how)
	}
	slices.Sort(pids)
	c.Pid = pids[0]
	for _, p := range pids {
		if !strings.HasPrefix(Comm(p), "fusermount") {
			c.Pid = p
			break
		}
	}
	for _, p := range pids {
		if p != c.Pid {
			c.Others = append(c.Others, p)
		}
	}
	c.Name = Comm(c.Pid)
	return c, nil
}

// connectionID is the FUSE connection id of a file system on device dev: the device
// number in the kernel's encoding (new_encode_dev), as /sys/fs/fuse/connections and the
// fdinfo of /dev/fuse show it.
func connectionID(dev uint64) uint64 {
	major, minor := uint64(unix.Major(dev)), uint64(unix.Minor(dev))
	return minor&0xff | major<<8 | (minor&^0xff)<<12
}

// fuseHolders returns the processes with an open /dev/fuse whose fdinfo names connection
// conn. withInfo reports whether any /dev/fuse descriptor had a fuse_connection line;
// when none had, the holders whose command line names mountPoint are returned instead.
func fuseHolders(conn uint64, mountPoint string) (pids []int, withInfo bool, err error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, false, fmt.Errorf("procsample: list processes: %w", err)
	}
	var holders []int
	want := strconv.FormatUint(conn, 10)
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd/"
		fds, err := os.ReadDir(dir)
		if err != nil {
			continue // gone, or not ours to read
		}
		held, match := false, false
		for _, fd := range fds {
			if l, err := os.Readlink(dir + fd.Name()); err != nil || l != "/dev/fuse" {
				continue
			}
			held = true
			if c, ok := fdinfoConnection("/proc/" + e.Name() + "/fdinfo/" + fd.Name()); ok {
				withInfo = true
				if c == want {
					match = true
					break
				}
			}
		}
		if match {
			pids = append(pids, pid)
		} else if held {
			holders = append(holders, pid)
		}
	}
	if withInfo {
		return pids, true, nil
	}
	for _, pid := range holders {
		if cmdlineNames(pid, mountPoint) {
			pids = append(pids, pid)
		}
	}
	return pids, false, nil
}

// fdinfoConnection returns the fuse_connection line's value of an fdinfo file.
func fdinfoConnection(path string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "fuse_connection:"); ok {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// cmdlineNames reports whether an argument of process pid is mountPoint.
func cmdlineNames(pid int, mountPoint string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	for _, a := range bytes.Split(b, []byte{0}) {
		if string(bytes.TrimRight(a, "/")) == strings.TrimRight(mountPoint, "/") {
			return true
		}
	}
	return false
}
