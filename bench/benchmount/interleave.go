package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// interleave compares mounts on the small-file loop with the pairs taken close together in
// time. Each phase runs a block of files (50 by default, 2-15 ms) on every directory in turn,
// the first directory of a block rotating, then the next block; so the drift of a noisy VM,
// which moves one whole run by 25 % against the next, hits every directory alike. For each
// phase and each directory, it prints the rate and the rate relative to the first directory:
// the ratio of the phase's total times (what a throughput row means).
//
//	phase PHASE dir I rate FILES_PER_S ratio R blocks B
//
// One run gives no interval: its blocks are not independent (a control of two untraced
// mounts came out further from 1 than an interval over blocks allowed). bench/pinned.sh
// repeats the run on fresh mounts and takes its intervals over those.
func interleave(args []string) error {
	fs := flag.NewFlagSet("interleave", flag.ExitOnError)
	dirList := fs.String("dirs", "", "comma-separated directories (each gets a subdirectory \"small\"); the first is the baseline")
	n := fs.Int("n", 5000, "files per directory and round")
	block := fs.Int("block", 50, "files per block")
	rounds := fs.Int("rounds", 1, "rounds (each creates, stats, reads and unlinks n files per directory)")
	size := fs.Int("size", 4096, "bytes per file")
	_ = fs.Parse(args) // ExitOnError
	dirs := strings.Split(*dirList, ",")
	if *dirList == "" || len(dirs) < 2 {
		return errors.New("interleave: -dirs needs at least two directories")
	}
	if *n <= 0 || *block <= 0 || *rounds <= 0 {
		return errors.New("interleave: -n, -block and -rounds must be positive")
	}
	names := make([][]string, len(dirs))
	for d, dir := range dirs {
		sub := filepath.Join(dir, "small")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		names[d] = make([]string, *n)
		for i := range names[d] {
			names[d][i] = filepath.Join(sub, fmt.Sprintf("f%06d", i))
		}
	}
	phases := smallPhases(make([]byte, *size))
	// times[phase][dir] lists the blocks' durations (ns), aligned across directories.
	times := make([][][]float64, len(phases))
	for p := range times {
		times[p] = make([][]float64, len(dirs))
	}
	blk := 0
	for range *rounds {
		for p, ph := range phases {
			for lo := 0; lo < *n; lo += *block {
				hi := min(lo+*block, *n)
				for k := range dirs {
					d := (blk + k) % len(dirs)
					t0 := time.Now()
					for _, name := range names[d][lo:hi] {
						if err := ph.fn(name); err != nil {
							return fmt.Errorf("%s %s: %w", ph.name, name, err)
						}
					}
					times[p][d] = append(times[p][d], float64(time.Since(t0).Nanoseconds()))
				}
				blk++
			}
		}
	}
	for _, dir := range dirs {
		_ = os.Remove(filepath.Join(dir, "small"))
	}
	files := float64(*n * *rounds)
	for p, ph := range phases {
		base := sum(times[p][0])
		for d := range dirs {
			t := sum(times[p][d])
			fmt.Printf("phase %s dir %d rate %.0f ratio %.4f blocks %d\n",
				ph.name, d, files/(t/1e9), base/t, len(times[p][d]))
		}
	}
	return nil
}

func sum(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s
}
