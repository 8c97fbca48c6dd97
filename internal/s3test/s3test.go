// Package s3test runs a local S3 server (gofakes3) for tests, demos and replay, and mounts
// its buckets with s3fs so that real programs can run over an S3-backed directory.
package s3test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
)

// Credentials the server accepts (it checks none) and that clients are given.
const (
	AccessKey = "iotap"
	SecretKey = "iotap-secret"
)

// Options configure Start.
type Options struct {
	// Addr to listen on; default "127.0.0.1:0" (a free port).
	Addr string
	// Dir, if set, stores each bucket in a directory under Dir and each object in a file
	// (memory stays flat on big runs; see dirBackend), and keeps them when the server
	// stops; otherwise they are kept in memory, which the in-memory backend never frees.
	Dir string
	// Buckets to create at start.
	Buckets []string
}

// Server is a running fake S3 endpoint.
type Server struct {
	URL     string // http://127.0.0.1:PORT
	Addr    string // 127.0.0.1:PORT
	backend gofakes3.Backend
	srv     *http.Server
	done    chan error
}

// Start starts a server and creates the requested buckets.
func Start(o Options) (*Server, error) {
	if o.Addr == "" {
		o.Addr = "127.0.0.1:0"
	}
	var backend gofakes3.Backend
	if o.Dir != "" {
		db, err := newDirBackend(o.Dir)
		if err != nil {
			return nil, fmt.Errorf("s3test: storage dir: %w", err)
		}
		backend = db
	} else {
		backend = s3mem.New()
	}
	for _, b := range o.Buckets {
		if err := createBucket(backend, b); err != nil {
			return nil, err
		}
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return nil, fmt.Errorf("s3test: listen: %w", err)
	}
	faker := gofakes3.New(backend, gofakes3.WithLogger(gofakes3.DiscardLog()), gofakes3.WithTimeSkewLimit(0))
	s := &Server{
		Addr:    ln.Addr().String(),
		URL:     "http://" + ln.Addr().String(),
		backend: backend,
		srv:     &http.Server{Handler: faker.Server(), ReadHeaderTimeout: 30 * time.Second},
		done:    make(chan error, 1),
	}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// CreateBucket creates a bucket (no error if it exists).
func (s *Server) CreateBucket(name string) error {
	return createBucket(s.backend, name)
}

// createBucket creates bucket name in b unless it exists. A name S3 refuses (gofakes3's
// own listings of such a bucket answer NoSuchBucket) is an error.
func createBucket(b gofakes3.Backend, name string) error {
	if err := gofakes3.ValidateBucketName(name); err != nil {
		return fmt.Errorf("s3test: create bucket %q: %w", name, err)
	}
	if err := b.CreateBucket(name); err != nil && !gofakes3.IsAlreadyExists(err) {
		return fmt.Errorf("s3test: create bucket %q: %w", name, err)
	}
	return nil
}

// Close stops the server.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; err == nil && !errors.Is(serr, http.ErrServerClosed) {
		err = serr
	}
	return err
}

// ErrNoS3FS is returned by MountS3FS when s3fs is not installed.
var ErrNoS3FS = errors.New("s3test: s3fs not found in PATH (apt-get install s3fs)")

// S3FS is a bucket mounted with s3fs.
type S3FS struct {
	Dir     string // mount point
	workDir string
	fsType  string // as /proc/self/mountinfo names it
}

// MountS3FS mounts bucket of the server at url on dir with s3fs. workDir holds the
// password file and s3fs's temporary files. It returns when the mount is in place.
func MountS3FS(url, bucket, dir, workDir string) (*S3FS, error) {
	bin, err := exec.LookPath("s3fs")
	if err != nil {
		return nil, ErrNoS3FS
	}
	if err := os.MkdirAll(filepath.Join(workDir, "tmp"), 0o700); err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	passwd := filepath.Join(workDir, "passwd-s3fs")
	if err := os.WriteFile(passwd, []byte(AccessKey+":"+SecretKey+"\n"), 0o600); err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	opts := strings.Join([]string{
		"url=" + url,
		"use_path_request_style",
		"passwd_file=" + passwd,
		"tmpdir=" + filepath.Join(workDir, "tmp"),
		"nonempty",
	}, ",")
	cmd := exec.Command(bin, bucket, dir, "-o", opts)
	cmd.Env = withoutVar(os.Environ(), "AWS_CA_BUNDLE")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("s3test: s3fs %s %s: %v: %s", bucket, dir, err, strings.TrimSpace(string(out)))
	}
	// s3fs returns once it has mounted and gone to the background; make sure of it.
	return mounted(dir, workDir, "s3fs")
}

// Unmount unmounts the s3fs mount and waits for it to go away.
func (m *S3FS) Unmount() error {
	out, err := exec.Command("fusermount3", "-u", m.Dir).CombinedOutput()
	if err != nil {
		out2, err2 := exec.Command("umount", "-l", m.Dir).CombinedOutput()
		if err2 != nil {
			return fmt.Errorf("s3test: unmount %s: %v: %s %s", m.Dir, err, out, out2)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for isFuseMount(m.Dir, m.fsType) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func isFuseMount(dir, fsType string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	abs, _ := filepath.Abs(dir)
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == abs && strings.Contains(line, " - "+fsType+" ") {
			return true
		}
	}
	return false
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// ErrNoRclone is returned by MountRclone when rclone is not installed.
var ErrNoRclone = errors.New("s3test: rclone not found in PATH (apt-get install rclone)")

// MountRclone mounts bucket of the server at url on dir with `rclone mount
// --vfs-cache-mode writes` (files written in a local cache under workDir, uploaded when
// closed), configured through the environment. It returns when the mount is in place;
// the returned value's Unmount unmounts it.
func MountRclone(url, bucket, dir, workDir string) (*S3FS, error) {
	bin, err := exec.LookPath("rclone")
	if err != nil {
		return nil, ErrNoRclone
	}
	cache := filepath.Join(workDir, "rclone-cache")
	if err := os.MkdirAll(cache, 0o700); err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	cmd := exec.Command(bin, "mount", "s3test:"+bucket, dir, "--vfs-cache-mode", "writes", "--cache-dir", cache, "--daemon")
	cmd.Env = append(withoutVar(os.Environ(), "AWS_CA_BUNDLE"),
		"RCLONE_CONFIG="+filepath.Join(workDir, "rclone.conf"), // none: the variables below
		"RCLONE_CONFIG_S3TEST_TYPE=s3", "RCLONE_CONFIG_S3TEST_PROVIDER=Other",
		"RCLONE_CONFIG_S3TEST_ENDPOINT="+url, "RCLONE_CONFIG_S3TEST_FORCE_PATH_STYLE=true",
		"RCLONE_CONFIG_S3TEST_ACCESS_KEY_ID="+AccessKey, "RCLONE_CONFIG_S3TEST_SECRET_ACCESS_KEY="+SecretKey)
	// Its output goes to a file: the daemon it leaves running keeps whatever descriptors
	// it was given, so a pipe would not end when the command returns.
	logPath := filepath.Join(workDir, "rclone.log")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("s3test: %w", err)
	}
	defer func() { _ = log.Close() }()
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		out, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("s3test: rclone mount %s %s: %v: %s", bucket, dir, err, strings.TrimSpace(string(out)))
	}
	// With --daemon, rclone returns once the mount is in place; make sure of it.
	return mounted(dir, workDir, "rclone")
}

// mounted returns the mount of client (s3fs, rclone) on dir once mountinfo shows it, or an
// error after 10 s.
func mounted(dir, workDir, client string) (*S3FS, error) {
	fsType := "fuse." + client
	deadline := time.Now().Add(10 * time.Second)
	for !isFuseMount(dir, fsType) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("s3test: %s did not mount %s", client, dir)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &S3FS{Dir: dir, workDir: workDir, fsType: fsType}, nil
}
