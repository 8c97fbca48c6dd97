package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// dirOps measures name lookups and directory listings in one directory, by one thread and
// by many at once: a file system that serialises the operations of one directory shows no
// gain from the threads. It prints "stat_1 OPS", "stat_T OPS", "list_1 OPS" and "list_T
// OPS" (T the thread count), then the files are removed.
//
//	benchmount dirops -dir DIR [-n 2000] [-threads 8] [-lists 200]
func dirOps(args []string) error {
	fs := flag.NewFlagSet("dirops", flag.ExitOnError)
	dir := fs.String("dir", "", "directory (created)")
	n := fs.Int("n", 2000, "files in the directory; each stat phase stats every one once")
	threads := fs.Int("threads", 8, "threads of the parallel phases")
	lists := fs.Int("lists", 200, "listings of the whole directory per list phase")
	_ = fs.Parse(args) // ExitOnError
	if *n < 1 || *threads < 1 || *lists < 1 {
		return fmt.Errorf("dirops: -n, -threads and -lists must be positive")
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		return err
	}
	names := make([]string, *n)
	for i := range names {
		names[i] = filepath.Join(*dir, fmt.Sprintf("f%06d", i))
		if err := os.WriteFile(names[i], nil, 0o644); err != nil {
			return err
		}
	}
	stat := func(part []string) error {
		var st syscall.Stat_t
		for _, p := range part {
			if err := syscall.Stat(p, &st); err != nil {
				return fmt.Errorf("stat %s: %w", p, err)
			}
		}
		return nil
	}
	list := func(count int) error {
		for range count {
			f, err := os.Open(*dir)
			if err != nil {
				return err
			}
			got, err := f.Readdirnames(-1)
			_ = f.Close()
			if err != nil {
				return fmt.Errorf("list %s: %w", *dir, err)
			}
			if len(got) != len(names) {
				return fmt.Errorf("list %s: %d names, want %d", *dir, len(got), len(names))
			}
		}
		return nil
	}
	for _, t := range []int{1, *threads} {
		ops, err := parallel(t, len(names), func(i, from, to int) error { return stat(names[from:to]) })
		if err != nil {
			return err
		}
		fmt.Printf("stat_%d %.0f\n", t, ops)
	}
	for _, t := range []int{1, *threads} {
		ops, err := parallel(t, *lists, func(i, from, to int) error { return list(to - from) })
		if err != nil {
			return err
		}
		fmt.Printf("list_%d %.0f\n", t, ops)
	}
	return os.RemoveAll(*dir)
}

// parallel splits n operations over t threads (fn does [from, to)) and returns the
// operations per second of the whole.
func parallel(t, n int, fn func(i, from, to int) error) (float64, error) {
	errs := make([]error, t)
	var wg sync.WaitGroup
	t0 := time.Now()
	for i := range t {
		from, to := i*n/t, (i+1)*n/t
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = fn(i, from, to)
		}()
	}
	wg.Wait()
	el := time.Since(t0)
	for _, err := range errs {
		if err != nil {
			return 0, err
		}
	}
	return float64(n) / el.Seconds(), nil
}
