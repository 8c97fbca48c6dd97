package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// iotapBin is an iotap binary built from this package for tests that must run iotap as a
// separate process (record re-executes /proc/self/exe). Empty if the build failed.
var iotapBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "iotap-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "testmain:", err)
		os.Exit(1)
	}
	bin := filepath.Join(dir, "iotap")
	// -buildvcs=auto: the version comes from the checkout where there is one, as a user's
	// go build or go install gets it, whatever GOFLAGS this machine sets.
	cmd := exec.Command("go", "build", "-buildvcs=auto", "-o", bin, ".")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "testmain: go build of iotap failed:", err)
	} else {
		iotapBin = bin
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
