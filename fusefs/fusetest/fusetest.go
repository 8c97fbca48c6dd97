// Package fusetest is the one mount helper of iotap's mount tests, plus an in-memory
// fusefs.Recorder.
//
// Mount tests call Mount, which skips the test (naming the reason) when FUSE is not usable
// here, or fails it instead when IOTAP_REQUIRE_FUSE=1 (package testenv).
package fusetest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/iotap/iotap/fusefs"
	"github.com/iotap/iotap/internal/testenv"
)

// Require skips t (or fails it when IOTAP_REQUIRE_FUSE=1) if this process cannot mount FUSE.
func Require(t testing.TB) {
	t.Helper()
	if err := fusefs.Available(); err != nil {
		testenv.Skip(t, testenv.FUSE, "FUSE not usable: %v", err)
	}
}

// Case is one mounted test file system: Orig is the backend directory, Mnt the mount.
type Case struct {
	Orig, Mnt string
	Server    *fusefs.Server
}

// Mount creates orig/ and mnt/ in t.TempDir() and mounts orig on mnt through fusefs (rec nil:
// untraced). Debug output is on under -v unless IOTAP_FUSE_DEBUG=0. It unmounts in
// t.Cleanup.
func Mount(t testing.TB, rec fusefs.Recorder, o fusefs.Options) *Case {
	t.Helper()
	Require(t)
	dir := t.TempDir()
	c := &Case{Orig: filepath.Join(dir, "orig"), Mnt: filepath.Join(dir, "mnt")}
	for _, d := range []string{c.Orig, c.Mnt} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	MountCase(t, c, rec, o)
	return c
}

// MountCase mounts c.Orig on c.Mnt (which may be the same directory) and registers the
// unmount with t.Cleanup.
func MountCase(t testing.TB, c *Case, rec fusefs.Recorder, o fusefs.Options) {
	t.Helper()
	Require(t)
	if testing.Verbose() && os.Getenv("IOTAP_FUSE_DEBUG") != "0" {
		o.Debug = true
	}
	srv, err := fusefs.Mount(c.Mnt, c.Orig, rec, o) // returns after WaitMount
	if err != nil {
		t.Fatalf("mount: %v", err)
	}
	c.Server = srv
	t.Cleanup(func() {
		if err := srv.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
		srv.Wait()
	})
}
