//go:build !linux

// Command fuseuring measures FUSE over io_uring against /dev/fuse; it runs on Linux only.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "fuseuring: Linux only")
	os.Exit(2)
}
