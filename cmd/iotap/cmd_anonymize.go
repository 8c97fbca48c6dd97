package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"sync"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/anonymize"
	"github.com/iotap/iotap/internal/private"
	"github.com/iotap/iotap/internal/termsafe"
	"github.com/iotap/iotap/trace"
)

// anonymizeCommands returns the anonymize subcommand.
func anonymizeCommands() []*command {
	return []*command{
		{
			name:    "anonymize",
			summary: "copy a trace with every name replaced by a keyed token, to share it (it reports and replays as the original)",
			usage:   "[flags] TRACE -o OUT",
			setup:   withOptions(runAnonymize),
		},
	}
}

type anonymizeOptions struct {
	Output string
	Key    anonymizeKeyOptions
	traceStore
}

func (o *anonymizeOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVarP(&o.Output, "output", "o", "", "write the anonymised trace to `file` (required; - for standard output, with --key-file)")
	o.Key.AddFlags(fs)
	o.addStoreFlags(fs)
}

// anonymizeKeyOptions choose the key of the tokens (anonymize, export --anonymize).
type anonymizeKeyOptions struct {
	File         string
	NoExtensions bool
}

func (o *anonymizeKeyOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.File, "key-file", "", "take the HMAC-SHA256 key from `file` (its text, at least 16 bytes), so that names get the same tokens in every trace; a new random key is written there if it does not exist")
	fs.BoolVar(&o.NoExtensions, "no-extensions", false, "do not keep file name extensions (.bam, .sqlite) in the tokens")
}

// keyFileSuffix names the key anonymize writes beside its output without --key-file.
const keyFileSuffix = ".key"

// load returns the key: read from --key-file, or new and random, written to --key-file
// when it does not exist yet, else to beside (when not "": the file must not exist), else
// kept nowhere. created names the file it wrote, "" when none.
func (o *anonymizeKeyOptions) load(e *env, beside string) (key []byte, created string, err error) {
	if o.File != "" {
		if st, err := os.Stat(o.File); err == nil && st.IsDir() {
			return nil, "", usageErrorf("--key-file %s is a directory: want a file holding the key (or a new file's name)", o.File)
		}
		b, err := os.ReadFile(o.File)
		if err == nil {
			key = bytes.TrimSpace(b)
			if len(key) < anonymize.MinKeyBytes {
				return nil, "", usageErrorf("--key-file %s holds a key of %d bytes: want at least %d", o.File, len(key), anonymize.MinKeyBytes)
			}
			warnReadableKey(e, o.File)
			return key, "", nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("read key: %w", err)
		}
		beside = o.File
	}
	key = newKey()
	if beside == "" {
		return key, "", nil
	}
	f, err := private.OpenFile(beside, os.O_WRONLY|os.O_EXCL)
	if errors.Is(err, fs.ErrExist) {
		return nil, "", usageErrorf("%s exists: give it with --key-file to use that key, or remove it", beside)
	}
	if err != nil {
		return nil, "", fmt.Errorf("write key: %w", err)
	}
	_, err = f.Write(append(key, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(beside)
		return nil, "", fmt.Errorf("write key: %w", err)
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap: a new key is in %s: keep it to anonymise other traces with the same tokens\n", termsafe.Name(beside))
	return key, beside, nil
}

// warnReadableKey warns when users other than the key file's owner may read it: with the
// key, anyone can compute the token of a name they guess, and so undo the anonymisation.
func warnReadableKey(e *env, path string) {
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm()&0o044 == 0 {
		return
	}
	who := "other users"
	if st.Mode().Perm()&0o004 == 0 {
		who = "its group"
	}
	_, _ = fmt.Fprintf(e.stderr, "iotap: warning: --key-file %s is readable by %s (mode %04o): whoever reads the key can find which names the tokens stand for (chmod 600 %s)\n",
		termsafe.Name(path), who, st.Mode().Perm(), termsafe.Name(path))
}

// newKey returns a random key: 32 random bytes as 64 hex digits (the key is the text).
func newKey() []byte {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return []byte(hex.EncodeToString(b[:]))
}

func runAnonymize(ctx context.Context, e *env, o *anonymizeOptions, args []string) (err error) {
	if len(args) != 1 {
		return usageErrorf("want exactly one trace, got %d arguments", len(args))
	}
	if o.Output == "" {
		return usageErrorf("-o OUT is required")
	}
	if err := o.usedBy(args[0]); err != nil {
		return err
	}
	toStdout := o.Output == "-"
	if toStdout && o.Key.File == "" {
		return usageErrorf("-o - needs --key-file: the key is written beside the output otherwise")
	}
	if !toStdout && args[0] != "-" {
		in, ierr := os.Stat(args[0])
		out, oerr := os.Stat(o.Output)
		if ierr == nil && oerr == nil && os.SameFile(in, out) {
			return usageErrorf("-o %s is the trace itself", o.Output)
		}
	}
	r, closeTrace, err := openTraceArg(ctx, e, args[0])
	if err != nil {
		return err
	}
	defer func() { _ = closeTrace() }() // read-only

	beside := ""
	if !toStdout && o.Key.File == "" {
		beside = o.Output + keyFileSuffix
		if _, err := os.Lstat(beside); err == nil {
			return usageErrorf("%s exists: give it with --key-file to use that key, or remove it", beside)
		}
	}
	out := e.stdout
	var file *os.File
	if !toStdout {
		if file, err = private.OpenFile(o.Output, os.O_WRONLY|os.O_TRUNC); err != nil {
			return usageErrorf("create output: %v", err)
		}
		out = file
	}
	key, created, err := o.Key.load(e, beside)
	if err != nil {
		if file != nil {
			_ = file.Close()
			_ = os.Remove(o.Output)
		}
		return err
	}
	a, err := anonymize.New(anonymize.Options{Key: key, NoExtensions: o.Key.NoExtensions})
	if err == nil {
		var res anonymize.Result
		res, err = anonymize.Copy(ctx, r, out, a, anonymize.KeyID(key))
		if err == nil {
			_, _ = fmt.Fprintf(e.stderr, "iotap: anonymised %d events, %d paths, %d process records, %d files; %d user and %d group ids; key %s\n",
				res.Events, res.Paths, res.Processes, res.Files, res.UIDs, res.GIDs, anonymize.KeyID(key))
			if res.Unknown > 0 {
				_, _ = fmt.Fprintf(e.stderr, "iotap: %d events named paths the trace has no record of: their paths are unknown in the copy\n", res.Unknown)
			}
		}
	}
	if file != nil {
		if cerr := file.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("write output: %w", cerr)
		}
		if err != nil {
			_ = os.Remove(o.Output) // an incomplete copy must not pass for one
			if created != "" {
				_ = os.Remove(created)
			}
		}
	}
	if err != nil {
		if errors.Is(err, trace.ErrCorrupt) || errors.Is(err, trace.ErrTruncated) {
			return fmt.Errorf("read trace %s: %w", args[0], err)
		}
		return err
	}
	var dropped error
	if f, ok := r.Footer(); ok {
		dropped = droppedError(nonEmpty(droppedNote(args[0], f)))
	}
	if d := r.Damage(); len(d) > 0 {
		var msg strings.Builder
		for _, x := range d {
			fmt.Fprintf(&msg, "iotap anonymize: %s: damaged: %s\n", termsafe.Name(args[0]), termsafe.Text(x.Error()))
		}
		_, _ = io.WriteString(e.stderr, msg.String()) // diagnostics: the exit code says it too
		return errors.Join(fmt.Errorf("%w: %s (the copy holds every readable event)", errDamaged, args[0]), dropped)
	}
	return dropped
}

// errCopyStopped ends the stream of a copy that failed.
var errCopyStopped = errors.New("anonymize: the copy stopped")

// anonymizedStream returns a reader of r's anonymised copy, made as it is read, and the
// function that waits for the copy to end and returns its error (call it once the reader
// is read to its end, or to stop the copy early).
func anonymizedStream(ctx context.Context, r *trace.Reader, key []byte, noExt bool) (*trace.Reader, func() error, error) {
	a, err := anonymize.New(anonymize.Options{Key: key, NoExtensions: noExt})
	if err != nil {
		return nil, nil, err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		_, err := anonymize.Copy(ctx, r, pw, a, anonymize.KeyID(key))
		if err != nil {
			// The stream ends there; wait returns why. The reader of the stream must not
			// take the copy's error (a damaged chunk of r) for damage of its own.
			_ = pw.CloseWithError(errCopyStopped)
		} else {
			_ = pw.Close()
		}
		done <- err
	}()
	var once sync.Once
	var copyErr error
	wait := func() error {
		once.Do(func() {
			// A reader that stopped early: the copy stops too.
			cancel()
			_ = pr.Close()
			copyErr = <-done
		})
		return copyErr
	}
	src, err := trace.NewReader(pr)
	if err != nil {
		_ = wait()
		return nil, nil, fmt.Errorf("anonymize: %w", err)
	}
	return src, wait, nil
}
