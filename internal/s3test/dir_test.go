package s3test

import (
	"encoding/xml"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// listResult is what a test reads of a ListObjects answer.
type listResult struct {
	Keys     []string `xml:"Contents>Key"`
	Prefixes []string `xml:"CommonPrefixes>Prefix"`
	Trunc    bool     `xml:"IsTruncated"`
	Next     string   `xml:"NextContinuationToken"`
}

// do sends one unsigned request (the server checks no signature) and returns the status
// and body.
func do(t *testing.T, method, u string, body string, header map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, string(b), resp.Header
}

// list lists bucket data with the query q, following continuation tokens.
func list(t *testing.T, base, q string) listResult {
	t.Helper()
	var all listResult
	tok := ""
	for range 100 {
		u := base + "/data/?list-type=2&" + q
		if tok != "" {
			u += "&continuation-token=" + url.QueryEscape(tok)
		}
		code, body, _ := do(t, "GET", u, "", nil)
		if code != 200 {
			t.Fatalf("GET %s: %d %s", u, code, body)
		}
		var r listResult
		if err := xml.Unmarshal([]byte(body), &r); err != nil {
			t.Fatalf("GET %s: %v\n%s", u, err, body)
		}
		all.Keys = append(all.Keys, r.Keys...)
		all.Prefixes = append(all.Prefixes, r.Prefixes...)
		if !r.Trunc {
			return all
		}
		tok = r.Next
	}
	t.Fatalf("list %s: no end", q)
	return all
}

// TestDirBackendAsS3: the directory-backed server answers as S3 does to what s3fs and the
// SDK send: a bucket listing whose URL ends in "/", listings of a prefix nothing has,
// directory markers ("dir/") beside keys under them, names with the characters the store
// escapes, pages, ranges, metadata, deletes that empty a prefix; and it keeps the objects
// when it stops. (gofakes3's in-memory backend lists a key "dir/" beside the common
// prefix "dir/" it belongs to; S3 rolls it up.)
func TestDirBackendAsS3(t *testing.T) {
	for _, tc := range []struct {
		name string
		dir  bool
	}{{name: "dir", dir: true}} {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{Buckets: []string{"data"}, Dir: t.TempDir()}
			s, err := Start(o)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					_ = s.Close()
				}
			}()
			if got := list(t, s.URL, ""); len(got.Keys)+len(got.Prefixes) != 0 {
				t.Errorf("empty bucket lists %+v", got)
			}
			objects := map[string]string{
				"dir/": "", "dir/f": "f-data", "dir/sub/g": "g", "top": "0123456789",
				"a.b%c.d": "escaped", "dir.o": "suffix-like", "x/.d/y": "dots",
			}
			for k, v := range objects {
				code, body, _ := do(t, "PUT", s.URL+"/data/"+strings.ReplaceAll(k, "%", "%25"), v, map[string]string{"x-amz-meta-mode": "33188"})
				if code != 200 {
					t.Fatalf("PUT %s: %d %s", k, code, body)
				}
			}
			for _, c := range []struct {
				q              string
				keys, prefixes []string
			}{
				{"delimiter=/&prefix=", []string{"a.b%c.d", "dir.o", "top"}, []string{"dir/", "x/"}},
				{"delimiter=/&prefix=dir/", []string{"dir/", "dir/f"}, []string{"dir/sub/"}},
				{"delimiter=/&prefix=missing/", nil, nil},
				{"delimiter=/&prefix=dir/sub/nothing/", nil, nil},
				{"delimiter=/&prefix=di", []string{"dir.o"}, []string{"dir/"}},
				{"delimiter=/&prefix=x/", nil, []string{"x/.d/"}},
				{"prefix=dir/", []string{"dir/", "dir/f", "dir/sub/g"}, nil},
				{"prefix=", []string{"a.b%c.d", "dir.o", "dir/", "dir/f", "dir/sub/g", "top", "x/.d/y"}, nil},
				{"max-keys=2", []string{"a.b%c.d", "dir.o", "dir/", "dir/f", "dir/sub/g", "top", "x/.d/y"}, nil},
				{"max-keys=1&delimiter=/", []string{"a.b%c.d", "dir.o", "top"}, []string{"dir/", "x/"}},
			} {
				got := list(t, s.URL, c.q)
				if !slices.Equal(got.Keys, c.keys) || !slices.Equal(got.Prefixes, c.prefixes) {
					t.Errorf("list %s: keys %q prefixes %q, want %q %q", c.q, got.Keys, got.Prefixes, c.keys, c.prefixes)
				}
			}
			code, body, _ := do(t, "GET", s.URL+"/data/top", "", map[string]string{"Range": "bytes=2-4"})
			if code != 206 || body != "234" {
				t.Errorf("range GET: %d %q", code, body)
			}
			code, _, h := do(t, "HEAD", s.URL+"/data/dir/", "", nil)
			if code != 200 || h.Get("x-amz-meta-mode") != "33188" {
				t.Errorf("HEAD dir/: %d, mode %q", code, h.Get("x-amz-meta-mode"))
			}
			if code, _, _ = do(t, "HEAD", s.URL+"/data/dir", "", nil); code != 404 {
				t.Errorf("HEAD of a prefix that is no key: %d", code)
			}
			if code, body, _ = do(t, "DELETE", s.URL+"/data/dir/sub/g", "", nil); code != 204 {
				t.Errorf("DELETE: %d %s", code, body)
			}
			if got := list(t, s.URL, "delimiter=/&prefix=dir/"); len(got.Prefixes) != 0 {
				t.Errorf("the prefix of a deleted key is still listed: %q", got.Prefixes)
			}
			if code, _, _ = do(t, "DELETE", s.URL+"/data/never", "", nil); code != 204 {
				t.Errorf("DELETE of a missing key: %d, want 204 as S3", code)
			}
			stopped = true
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s2, err := Start(o)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = s2.Close() }()
			if got := list(t, s2.URL, "prefix="); len(got.Keys) != len(objects)-1 {
				t.Errorf("after a restart on the same directory: %q", got.Keys)
			}
			if code, body, _ = do(t, "GET", s2.URL+"/data/a.b%25c.d", "", nil); code != 200 || body != "escaped" {
				t.Errorf("GET after a restart: %d %q", code, body)
			}
		})
	}
}

// TestDirBackendEncoding: every key maps to its own file, and names decode back.
func TestDirBackendEncoding(t *testing.T) {
	seen := map[string]string{}
	for _, k := range []string{"a", "a/", "a/b", "a.d/b", "a%2E", "a.", ".o", "%", "a//b", "ä/ö"} {
		e, err := encodeKey(k)
		if err != nil {
			t.Fatal(err)
		}
		if o, ok := seen[e]; ok {
			t.Errorf("%q and %q share %q", k, o, e)
		}
		seen[e] = k
		var parts []string
		for _, c := range strings.Split(e, "/") {
			d, ok := decodeName(strings.TrimSuffix(c, ".d"))
			if !ok {
				t.Fatalf("%q: cannot decode %q", k, c)
			}
			parts = append(parts, d)
		}
		if got := strings.Join(parts, "/"); got != k {
			t.Errorf("%q encodes to %q, which decodes to %q", k, e, got)
		}
	}
	if _, err := encodeKey(strings.Repeat("x", 254)); err == nil {
		t.Error("a component longer than a file name is accepted")
	}
	if _, err := encodeKey(strings.Repeat("x/", 300)); err != nil {
		t.Errorf("a deep key: %v", err)
	}
}

// TestDirBackendBucketNames: a name S3 refuses is an error at start, not a bucket that
// answers NoSuchBucket.
func TestDirBackendBucketNames(t *testing.T) {
	if s, err := Start(Options{Dir: t.TempDir(), Buckets: []string{"b"}}); err == nil {
		_ = s.Close()
		t.Error("bucket name b accepted")
	}
	dir := t.TempDir()
	s, err := Start(Options{Dir: dir, Buckets: []string{"data", "data"}})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	if err := s.CreateBucket("data"); err != nil {
		t.Errorf("a bucket created twice: %v", err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "data")); err != nil || !fi.IsDir() {
		t.Errorf("bucket directory: %v", err)
	}
}
