// Command fakes3 serves a local S3 endpoint (gofakes3) for iotap's demo and tests:
//
//	fakes3 [-addr 127.0.0.1:0] [-dir DIR] [-bucket NAME]... [-url-file FILE]
//
// It prints the endpoint URL on stdout (and writes it to -url-file), then serves until
// SIGINT or SIGTERM. Any access key and secret are accepted.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/iotap/iotap/internal/s3test"
)

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	var (
		o       s3test.Options
		buckets listFlag
		urlFile string
	)
	flag.StringVar(&o.Addr, "addr", "127.0.0.1:0", "listen address")
	flag.StringVar(&o.Dir, "dir", "", "store each bucket in a directory under this one, each object in a file, kept when fakes3 stops (default: in memory)")
	flag.Var(&buckets, "bucket", "bucket to create (repeatable)")
	flag.StringVar(&urlFile, "url-file", "", "also write the endpoint URL to this file")
	flag.Parse()
	o.Buckets = buckets
	srv, err := s3test.Start(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakes3:", err)
		os.Exit(1)
	}
	if urlFile != "" {
		err := os.WriteFile(urlFile+".tmp", []byte(srv.URL+"\n"), 0o644)
		if err == nil {
			err = os.Rename(urlFile+".tmp", urlFile)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "fakes3:", err)
			os.Exit(1)
		}
	}
	fmt.Println(srv.URL)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "fakes3:", err)
		os.Exit(1)
	}
}
