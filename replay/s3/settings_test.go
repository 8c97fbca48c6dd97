package s3

import (
	"context"
	"strings"
	"testing"
)

// TestSettings checks how a profile's settings are given: --s3-opt (Options.Params), the
// target URL's query winning over it, the profile named in the query, and the errors for
// an unknown key, a bad size and a window smaller than the first.
func TestSettings(t *testing.T) {
	srv := s3Server(t)
	ctx := context.Background()
	o := s3Opts(srv.URL, "")
	o.Params = map[string]string{"prefetch_max": "16MiB", "concurrency": "4"}
	b, err := Open(ctx, "s3://data/set?prefetch_max=64MiB&memory_limit=1GiB", o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	mp := b.prof.(*mountpoint)
	if mp.readMax != 64<<20 || mp.concurrency != 4 || mp.mem.limit != 1<<30 || mp.readInit != mib+128*kib {
		t.Errorf("mountpoint %+v", mp)
	}
	if got, want := b.Given(), "concurrency=4 memory_limit=1GiB prefetch_max=64MiB"; got != want {
		t.Errorf("settings %q, want %q", got, want)
	}
	if got := b.Target(); got.Path != "s3://data/set/" || got.Mount != "profile=mountpoint concurrency=4 memory_limit=1GiB prefetch_max=64MiB" {
		t.Errorf("target %+v", got)
	}
	b2, err := Open(ctx, "s3://data/set?profile=s3fs&multipart_size=16MiB&parallel_count=2", s3Opts(srv.URL, "mountpoint"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b2.Close() }()
	if p, ok := b2.prof.(*s3fs); !ok || p.partSize != 16<<20 || p.parallel != 2 {
		t.Errorf("s3fs profile %+v", b2.prof)
	}
	for _, tc := range []struct{ spec, want string }{
		{"s3://data/x?prefetch=1M", `"prefetch" is not one of the mountpoint profile's (prefetch_initial, prefetch_max`},
		{"s3://data/x?prefetch_max=lots", "prefetch_max=lots"},
		{"s3://data/x?prefetch_max=64KiB&prefetch_initial=1MiB", "prefetch_max 65536 is below prefetch_initial"},
		{"s3://data/x?profile=sdk&parallel_count=3", `"parallel_count" is not one of the sdk profile's`},
		{"s3://data/x?concurrency=0", "want a count from 1 to 1024"},
		{"s3://data/x?part_size=1MiB", "at least 5242880 bytes"},
	} {
		if _, err := Open(ctx, tc.spec, s3Opts(srv.URL, "")); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", tc.spec, err, tc.want)
		}
	}
	for in, want := range map[string]int64{"8MiB": 8 << 20, "512K": 512 << 10, "1G": 1 << 30, "4096": 4096, "1.5MiB": 3 << 19, "2mb": 2 << 20} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
}

// TestMountpointWindowMemory reads a 48 MiB object sequentially with the mountpoint
// profile: the prefetched bytes held at once follow the window size, and memory_limit
// bounds them (a window shrinks to what is free), with the same requests' bytes read.
func TestMountpointWindowMemory(t *testing.T) {
	srv := s3Server(t)
	w := openS3(t, srv.URL, "sdk", "mem")
	s3WriteObj(t, w, "big", 48<<20, 1<<20)
	// Windows from 1152 KiB double: 1.1, 2.2, 4.5, 9, 18 MiB, then up to prefetch_max;
	// the window read and the one fetched ahead are held together.
	for _, tc := range []struct {
		opts             string
		minPeak, maxPeak int64
	}{
		{"prefetch_max=8MiB", 8 << 20, 16 << 20},
		{"prefetch_max=32MiB", 24 << 20, 64 << 20},
		{"prefetch_max=32MiB&memory_limit=12MiB", 8 << 20, 12 << 20},
	} {
		t.Run(tc.opts, func(t *testing.T) {
			b, err := Open(context.Background(), "s3://data/mem?"+tc.opts, s3Opts(srv.URL, ""))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = b.Close() }()
			if n := s3ReadAll(t, b, "big", 1<<20); n != 48<<20 {
				t.Fatalf("read %d bytes", n)
			}
			mem := b.prof.(*mountpoint).mem
			if mem.peak < tc.minPeak || mem.peak > tc.maxPeak {
				t.Errorf("held at most %d bytes at once, want %d to %d", mem.peak, tc.minPeak, tc.maxPeak)
			}
			if mem.used != 0 {
				t.Errorf("%d bytes still held after close", mem.used)
			}
		})
	}
}
