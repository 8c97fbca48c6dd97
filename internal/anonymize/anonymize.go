// Package anonymize replaces the names a trace holds by keyed tokens, so that a trace can
// be shared (with a storage vendor, in a bug report) without the job's paths, programs,
// command line or hosts, while it still reports and replays as the original does.
//
// # Tokens
//
// A name becomes the first 16 hex digits of HMAC-SHA256(key, name): the same name always
// gets the same token under one key (a file and the program of the same name, one name
// in every directory, one host in several traces), different names different tokens, and
// without the key a token cannot be turned back into its name, short of guessing names
// and trying them with the key. Names of files and programs keep their extension (".bam",
// ".sqlite": up to 8 letters, digits, "-" or "_" after the last dot), unless
// Options.NoExtensions; the token covers the whole name, so "a.bam" and "a.bai" share
// nothing but their extensions. A name longer than 255 bytes (NAME_MAX) gets a token as
// long as it, so that a replay still fails on it with ENAMETOOLONG.
//
// Paths are anonymised a component at a time, so the tree keeps its shape: "a/b/c.txt"
// becomes "t1/t2/t3.txt" and "a/d" becomes "t1/t4". A symlink's target text is not a path
// the trace names (replay never follows it), and readlink returns its length: each of its
// components becomes keyed hex digits of the component's own length ("/", "." and ".."
// kept), so the target keeps its length and shape but matches no other token.
//
// What is kept: sizes, offsets, byte counts, times (the trace's start and every event's),
// errnos, flags and modes, process and thread ids, the shape of the tree, the file system
// type and the kernel version. User and group ids become small numbers (0 stays 0, the
// others 1, 2, ... in order of first appearance). The command line, host name, label
// values, the traced directory, its mount and source, process names, executables and
// command lines become tokens. The key never goes into the output; its id (the first hex digits of its
// SHA-256) does, as the label "anonymized", so that whoever holds keys can tell which one
// was used.
package anonymize

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"github.com/iotap/iotap/trace"
)

// MinKeyBytes is the shortest key New accepts.
const MinKeyBytes = 16

// TokenDigits is the number of hex digits of a token (64 bits): two names of one trace
// share a token with a probability of about n²/2^65 for n names.
const TokenDigits = 16

// nameMax is the longest name a Linux file system takes (NAME_MAX).
const nameMax = 255

// maxExt is the longest extension kept, without its dot.
const maxExt = 8

// Label is the label an anonymised trace carries: its value names the key's id.
const Label = "anonymized"

// ErrCollision is returned when two different names get the same token: a chance of
// about one in 2^64 per pair of names, reported instead of merging two files.
var ErrCollision = errors.New("anonymize: two names got the same token")

// Options configure an Anonymizer.
type Options struct {
	Key          []byte // the HMAC-SHA256 key, at least MinKeyBytes
	NoExtensions bool   // do not keep file name extensions
}

// Anonymizer maps names to tokens and ids to small numbers. It is not safe for
// concurrent use.
type Anonymizer struct {
	opts   Options
	mac    hash.Hash
	sum    []byte
	tokens map[string]string // name → token (a NUL before a name whose extension it keeps)
	names  map[string]string // token → name, to find collisions
	uids   map[uint32]uint32
	gids   map[uint32]uint32
	err    error // the first collision
}

// New returns an Anonymizer with o's key.
func New(o Options) (*Anonymizer, error) {
	if len(o.Key) < MinKeyBytes {
		return nil, fmt.Errorf("anonymize: key of %d bytes: want at least %d", len(o.Key), MinKeyBytes)
	}
	o.Key = append([]byte(nil), o.Key...)
	return &Anonymizer{
		opts:   o,
		mac:    hmac.New(sha256.New, o.Key),
		tokens: make(map[string]string),
		names:  make(map[string]string),
		uids:   map[uint32]uint32{0: 0},
		gids:   map[uint32]uint32{0: 0},
	}, nil
}

// KeyID returns the id of a key: the first 12 hex digits of its SHA-256. It names the key
// without revealing it.
func KeyID(key []byte) string {
	s := sha256.Sum256(key)
	return hex.EncodeToString(s[:6])
}

// Err returns ErrCollision (wrapped, naming the token) once two names got one token.
func (a *Anonymizer) Err() error { return a.err }

// Domains of the keyed hash: a name's token, the rest of a long name's, a link target
// component's digits.
const (
	domName = "name\x00"
	domPad  = "pad\x00"
	domLink = "link\x00"
)

// digits returns n hex digits of the keyed hash of s in domain dom.
func (a *Anonymizer) digits(dom, s string, n int) string {
	var b strings.Builder
	b.Grow(n)
	for block := 0; b.Len() < n; block++ {
		a.mac.Reset()
		a.mac.Write([]byte(dom)) // a hash.Hash never fails to write
		if block > 0 {
			a.mac.Write(append(strconv.AppendInt(nil, int64(block), 10), 0))
		}
		a.mac.Write([]byte(s))
		a.sum = a.mac.Sum(a.sum[:0])
		h := hex.EncodeToString(a.sum)
		b.WriteString(h[:min(len(h), n-b.Len())])
	}
	return b.String()
}

// token returns the token of s, keeping ext (which s ends with, or ""), and remembers it.
func (a *Anonymizer) token(s, ext string) string {
	key := s
	if ext != "" {
		key = "\x00" + s // a name keeping its extension, apart from the same word without
	}
	if t, ok := a.tokens[key]; ok {
		return t
	}
	t := a.digits(domName, s, TokenDigits) + ext
	if len(s) > nameMax && len(t) < len(s) {
		// Too long for a file system: the token stays too long, at the name's length.
		t = t[:TokenDigits] + a.digits(domPad, s, len(s)-len(t)) + ext
	}
	if prev, ok := a.names[t]; ok && prev != s && a.err == nil {
		a.err = fmt.Errorf("%w: %s", ErrCollision, t)
	}
	a.tokens[key] = t
	a.names[t] = s
	return t
}

// Name returns the token of one file name or program name (a path component, a comm),
// with its extension unless NoExtensions. "", "." and ".." are kept.
func (a *Anonymizer) Name(s string) string {
	if s == "" || s == "." || s == ".." {
		return s
	}
	ext := ""
	if !a.opts.NoExtensions {
		ext = Extension(s)
	}
	return a.token(s, ext)
}

// Word returns the token of a word that is no file name (a host name, a label value):
// no extension is kept. "" is kept.
func (a *Anonymizer) Word(s string) string {
	if s == "" {
		return s
	}
	return a.token(s, "")
}

// Path returns s with each slash-separated component replaced by its Name: the slashes,
// and so absolute and relative paths, are kept.
func (a *Anonymizer) Path(s string) string {
	if !strings.Contains(s, "/") {
		return a.Name(s)
	}
	parts := strings.Split(s, "/")
	for i, p := range parts {
		parts[i] = a.Name(p)
	}
	return strings.Join(parts, "/")
}

// LinkTarget returns the anonymised text of a symlink target: each component replaced by
// keyed hex digits of its length, so the text keeps its length ("/", "." and ".." kept).
func (a *Anonymizer) LinkTarget(s string) string {
	parts := strings.Split(s, "/")
	for i, p := range parts {
		if p == "" || p == "." || p == ".." {
			continue
		}
		parts[i] = a.digits(domLink, p, len(p))
	}
	return strings.Join(parts, "/")
}

// Extension returns the extension of name that tokens keep: its last dot and what follows,
// when that is 1 to 8 letters, digits, "-" or "_" and the dot is not the first byte
// (".bashrc" has none); else "".
func Extension(name string) string {
	i := strings.LastIndexByte(name, '.')
	if i <= 0 || i == len(name)-1 || len(name)-1-i > maxExt {
		return ""
	}
	for _, c := range []byte(name[i+1:]) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return ""
		}
	}
	return name[i:]
}

// UID returns the small number user id u maps to: 0 for 0, else 1, 2, ... in order of
// first appearance.
func (a *Anonymizer) UID(u uint32) uint32 { return small(a.uids, u) }

// GID returns the small number group id g maps to, as UID does for users.
func (a *Anonymizer) GID(g uint32) uint32 { return small(a.gids, g) }

func small(m map[uint32]uint32, id uint32) uint32 {
	if v, ok := m[id]; ok {
		return v
	}
	v := uint32(len(m)) // 0 is taken by root
	m[id] = v
	return v
}

// Header returns h with its names anonymised and the Label naming keyID added.
func (a *Anonymizer) Header(h trace.Header, keyID string) trace.Header {
	h.Hostname = a.Word(h.Hostname)
	h.Target.Path = a.Path(h.Target.Path)
	h.Target.Source = a.Path(h.Target.Source)
	h.Target.Mount = a.Path(h.Target.Mount)
	if len(h.Command) > 0 {
		cmd := make([]string, len(h.Command))
		for i, c := range h.Command {
			cmd[i] = a.Path(c)
		}
		h.Command = cmd
	}
	labels := make([]trace.Label, 0, len(h.Labels)+1)
	for _, l := range h.Labels {
		labels = append(labels, trace.Label{Key: l.Key, Value: a.Word(l.Value)})
	}
	h.Labels = append(labels, trace.Label{Key: Label, Value: "hmac-sha256 key " + keyID})
	return h
}

// Process returns p with its name, executable and command line anonymised (each argument
// as the header's command's).
func (a *Anonymizer) Process(p trace.Process) trace.Process {
	p.Comm = a.Name(p.Comm)
	p.Exe = a.Path(p.Exe)
	if p.Cmdline != nil {
		cmd := make([]string, len(p.Cmdline))
		for i, c := range p.Cmdline {
			cmd[i] = a.Path(c)
		}
		p.Cmdline = cmd
	}
	return p
}

// WriteError returns the anonymised text of a footer's write error: the error's last
// part only (the system's message, "no space left on device"), which names no file.
func WriteError(s string) string {
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}
