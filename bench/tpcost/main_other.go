//go:build !linux

// Command tpcost measures what attaching BPF programs to system call tracepoints costs;
// it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "tpcost: Linux only")
	os.Exit(2)
}
