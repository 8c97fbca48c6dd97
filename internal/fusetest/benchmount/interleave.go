package main

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// interleave compares mounts on the small-file loop with the pairs taken close together in
// time. Each phase runs a block of files (50 by default, 2-15 ms) on every directory in turn,
// the first directory of a block rotating, then the next block; so the drift of a noisy VM,
// which moves one whole run by 25 % against the next, hits every directory alike. For each
// phase and each directory after the first, it prints the rate relative to the first: the
// ratio of the phase's total times (what a throughput row means), with a 95 % bootstrap
// interval over blocks, and the median of the blocks' own ratios (which a rare stall, such as
// a garbage collection or a trace chunk being compressed, does not move).
//
//	phase PHASE dir I rate FILES_PER_S ratio R lo LO hi HI median M blocks B
//
// Directory 0's line has ratio 1 and no interval.
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
	rng := rand.New(rand.NewPCG(1, 2))
	for p, ph := range phases {
		base := times[p][0]
		files := float64(*n * *rounds)
		for d := range dirs {
			t := times[p][d]
			rate := files / (sum(t) / 1e9)
			if d == 0 {
				fmt.Printf("phase %s dir 0 rate %.0f ratio 1 blocks %d\n", ph.name, rate, len(t))
				continue
			}
			r := sum(base) / sum(t)
			lo, hi := bootRatio(rng, base, t, 2000)
			per := make([]float64, len(t))
			for i := range t {
				per[i] = base[i] / t[i]
			}
			fmt.Printf("phase %s dir %d rate %.0f ratio %.4f lo %.4f hi %.4f median %.4f blocks %d\n",
				ph.name, d, rate, r, lo, hi, median(per), len(t))
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

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// bootRatio is the 95 % percentile bootstrap interval of sum(a)/sum(b), resampling the
// (a[i], b[i]) pairs.
func bootRatio(rng *rand.Rand, a, b []float64, iters int) (lo, hi float64) {
	rs := make([]float64, iters)
	for k := range rs {
		var sa, sb float64
		for range a {
			i := rng.IntN(len(a))
			sa += a[i]
			sb += b[i]
		}
		rs[k] = sa / sb
	}
	slices.Sort(rs)
	return rs[iters*25/1000], rs[iters*975/1000]
}
