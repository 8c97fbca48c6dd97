package s3test

import (
	"bytes"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"github.com/johannesboyne/gofakes3"
)

// dirBackend is a gofakes3.Backend that keeps each bucket in a directory of its own under
// root, and each object in a file, so that memory stays flat however much is stored.
//
// Keys are stored by a byte-wise encoding that keeps every key apart from every key
// prefix: "/" becomes ".d/", "%", "." and NUL become %XX, and the object's data file gets
// ".o" (its metadata ".m", JSON). So "dir/" (the directory marker s3fs writes for mkdir),
// "dir" and "dir/file" are three files: dir.d/.o, dir.o and dir.d/file.o, as S3 keeps
// three keys. The encoding maps a key prefix to a prefix of the encoded keys, so a
// listing reads only the directory its prefix leads to; with the delimiter "/" it does
// not descend below it (a directory exists only while it holds an object: deletes remove
// the directories they empty).
//
// mu orders changes to the tree (an object's files renamed into place, removed, buckets
// made and removed) against readers, which open files and read directories under RLock;
// object data is copied outside the lock (into a file under root/.tmp, then renamed).
type dirBackend struct {
	root string
	tmp  string
	mu   sync.RWMutex
}

var _ gofakes3.Backend = (*dirBackend)(nil)

// newDirBackend returns a backend storing under root (created if missing).
func newDirBackend(root string) (*dirBackend, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	tmp := filepath.Join(root, ".tmp") // not a bucket: bucket names start with a letter or digit
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	return &dirBackend{root: root, tmp: tmp}, nil
}

// maxComponent is the longest encoded name between two "/" of a key: a file name of 255
// bytes less the suffix.
const maxComponent = 255 - 2

// encodeKey returns key's path below its bucket's directory, without the suffix; an error
// when a part of it would be longer than a file name can be.
func encodeKey(key string) (string, error) {
	var b strings.Builder
	n := 0
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '/':
			b.WriteString(".d/")
			n = 0
			continue
		case '%', '.', 0:
			fmt.Fprintf(&b, "%%%02X", c)
			n += 3
		default:
			b.WriteByte(c)
			n++
		}
		if n > maxComponent {
			return "", gofakes3.ResourceError(gofakes3.ErrKeyTooLong, key)
		}
	}
	return b.String(), nil
}

// decodeName returns the key text of an encoded name (one component, without suffix).
func decodeName(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		v, err := hex.DecodeString(s[i+1 : i+3])
		if err != nil {
			return "", false
		}
		b.WriteByte(v[0])
		i += 2
	}
	return b.String(), true
}

// objectMeta is an object's .m file.
type objectMeta struct {
	Hash string            `json:"md5"`
	Meta map[string]string `json:"meta"`
}

func (d *dirBackend) bucketDir(bucket string) (string, error) {
	if err := gofakes3.ValidateBucketName(bucket); err != nil {
		return "", gofakes3.BucketNotFound(bucket)
	}
	return filepath.Join(d.root, bucket), nil
}

// objectPath returns the path of key's files in bucket, without the suffix, after checking
// that the bucket exists (under d.mu).
func (d *dirBackend) objectPath(bucket, key string) (string, error) {
	dir, err := d.bucketDir(bucket)
	if err != nil {
		return "", err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", gofakes3.BucketNotFound(bucket)
	}
	enc, err := encodeKey(key)
	if err != nil {
		return "", err
	}
	// Not filepath.Join, which would drop the last "/" of a key that ends in one.
	return dir + string(filepath.Separator) + filepath.FromSlash(enc), nil
}

func (d *dirBackend) ListBuckets() ([]gofakes3.BucketInfo, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	ents, err := os.ReadDir(d.root)
	if err != nil {
		return nil, err
	}
	var out []gofakes3.BucketInfo
	for _, e := range ents {
		if !e.IsDir() || gofakes3.ValidateBucketName(e.Name()) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, gofakes3.BucketInfo{Name: e.Name(), CreationDate: gofakes3.NewContentTime(fi.ModTime())})
	}
	return out, nil
}

func (d *dirBackend) BucketExists(name string) (bool, error) {
	dir, err := d.bucketDir(name)
	if err != nil {
		return false, nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	fi, err := os.Stat(dir)
	return err == nil && fi.IsDir(), nil
}

func (d *dirBackend) CreateBucket(name string) error {
	if err := gofakes3.ValidateBucketName(name); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	err := os.Mkdir(filepath.Join(d.root, name), 0o700)
	if errors.Is(err, fs.ErrExist) {
		return gofakes3.ResourceError(gofakes3.ErrBucketAlreadyExists, name)
	}
	return err
}

func (d *dirBackend) DeleteBucket(name string) error {
	dir, err := d.bucketDir(name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	err = os.Remove(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return gofakes3.BucketNotFound(name)
	case errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST):
		return gofakes3.ResourceError(gofakes3.ErrBucketNotEmpty, name)
	}
	return err
}

func (d *dirBackend) ForceDeleteBucket(name string) error {
	dir, err := d.bucketDir(name)
	if err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, err := os.Stat(dir); err != nil {
		return gofakes3.BucketNotFound(name)
	}
	return os.RemoveAll(dir)
}

// readMeta reads an object's metadata file (p: its path without suffix).
func readMeta(p string) (objectMeta, []byte, error) {
	var m objectMeta
	b, err := os.ReadFile(p + ".m")
	if err == nil {
		err = json.Unmarshal(b, &m)
	}
	if err != nil {
		return m, nil, err
	}
	h, err := hex.DecodeString(m.Hash)
	return m, h, err
}

// open opens key's data and reads its metadata.
func (d *dirBackend) open(bucket, key string) (*os.File, fs.FileInfo, objectMeta, []byte, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	p, err := d.objectPath(bucket, key)
	if err != nil {
		return nil, nil, objectMeta{}, nil, err
	}
	f, err := os.Open(p + ".o")
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil, objectMeta{}, nil, gofakes3.KeyNotFound(key)
	}
	if err != nil {
		return nil, nil, objectMeta{}, nil, err
	}
	fi, err := f.Stat()
	var m objectMeta
	var hash []byte
	if err == nil {
		m, hash, err = readMeta(p)
	}
	if err != nil {
		_ = f.Close() // read-only
		return nil, nil, objectMeta{}, nil, fmt.Errorf("s3test: object %q: %w", key, err)
	}
	return f, fi, m, hash, nil
}

func (d *dirBackend) HeadObject(bucket, key string) (*gofakes3.Object, error) {
	f, fi, m, hash, err := d.open(bucket, key)
	if err != nil {
		return nil, err
	}
	_ = f.Close() // read-only
	return &gofakes3.Object{Name: key, Metadata: m.Meta, Size: fi.Size(), Hash: hash,
		Contents: io.NopCloser(bytes.NewReader(nil))}, nil
}

func (d *dirBackend) GetObject(bucket, key string, rangeRequest *gofakes3.ObjectRangeRequest) (*gofakes3.Object, error) {
	f, fi, m, hash, err := d.open(bucket, key)
	if err != nil {
		return nil, err
	}
	rng, err := rangeRequest.Range(fi.Size())
	if err != nil {
		_ = f.Close() // read-only
		return nil, err
	}
	var body io.ReadCloser = f
	if rng != nil {
		body = struct {
			io.Reader
			io.Closer
		}{io.NewSectionReader(f, rng.Start, rng.Length), f}
	}
	return &gofakes3.Object{Name: key, Metadata: m.Meta, Size: fi.Size(), Hash: hash, Range: rng, Contents: body}, nil
}

func (d *dirBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, conditions *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	var res gofakes3.PutObjectResult
	if _, err := encodeKey(key); err != nil {
		return res, err
	}
	data, err := os.CreateTemp(d.tmp, "put-*")
	if err != nil {
		return res, err
	}
	defer func() { _ = os.Remove(data.Name()) }() // gone once renamed into place
	h := md5.New()
	n, err := io.Copy(io.MultiWriter(data, h), input)
	if cerr := data.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != size {
		err = fmt.Errorf("s3test: put %q: %d bytes of %d", key, n, size)
	}
	if err != nil {
		return res, err
	}
	mb, err := json.Marshal(objectMeta{Hash: hex.EncodeToString(h.Sum(nil)), Meta: meta})
	if err != nil {
		return res, err
	}
	metaTmp := data.Name() + ".m"
	if err := os.WriteFile(metaTmp, mb, 0o600); err != nil {
		return res, err
	}
	defer func() { _ = os.Remove(metaTmp) }()

	d.mu.Lock()
	defer d.mu.Unlock()
	p, err := d.objectPath(bucket, key)
	if err != nil {
		return res, err
	}
	if conditions != nil {
		info := &gofakes3.ConditionalObjectInfo{}
		if _, hash, err := readMeta(p); err == nil {
			info.Exists, info.Hash = true, hash
		}
		if err := gofakes3.CheckPutConditions(conditions, info); err != nil {
			return res, err
		}
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return res, err
	}
	err = os.Rename(metaTmp, p+".m")
	if err == nil {
		err = os.Rename(data.Name(), p+".o")
	}
	if err != nil {
		_ = os.Remove(p + ".m")
		d.prune(bucket, filepath.Dir(p))
	}
	return res, err
}

// prune removes dir and its parents up to bucket's directory while they are empty (under
// d.mu), so that a directory stands for a prefix only while an object has it.
func (d *dirBackend) prune(bucket, dir string) {
	top := filepath.Join(d.root, bucket)
	for dir != top && strings.HasPrefix(dir, top+string(filepath.Separator)) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

func (d *dirBackend) CopyObject(srcBucket, srcKey, dstBucket, dstKey string, meta map[string]string) (gofakes3.CopyObjectResult, error) {
	return gofakes3.CopyObject(d, srcBucket, srcKey, dstBucket, dstKey, meta)
}

func (d *dirBackend) DeleteObject(bucket, key string) (gofakes3.ObjectDeleteResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return gofakes3.ObjectDeleteResult{}, d.deleteLocked(bucket, key)
}

// deleteLocked deletes key; deleting a missing key is no error, as in S3.
func (d *dirBackend) deleteLocked(bucket, key string) error {
	p, err := d.objectPath(bucket, key)
	if gofakes3.HasErrorCode(err, gofakes3.ErrKeyTooLong) {
		return nil // no such key can exist
	}
	if err != nil {
		return err
	}
	for _, s := range []string{".o", ".m"} {
		if err := os.Remove(p + s); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return err
		}
	}
	d.prune(bucket, filepath.Dir(p))
	return nil
}

func (d *dirBackend) DeleteMulti(bucket string, keys ...string) (gofakes3.MultiDeleteResult, error) {
	var res gofakes3.MultiDeleteResult
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		if err := d.deleteLocked(bucket, k); err != nil {
			if gofakes3.HasErrorCode(err, gofakes3.ErrNoSuchBucket) {
				return res, err
			}
			res.Error = append(res.Error, gofakes3.ErrorResult{Key: k, Code: gofakes3.ErrInternal, Message: err.Error()})
			continue
		}
		res.Deleted = append(res.Deleted, gofakes3.ObjectID{Key: k})
	}
	return res, nil
}

// listed is one entry of a listing: a key, or a common prefix.
type listed struct {
	name   string
	prefix bool
	path   string // an object's files, without suffix
	info   fs.FileInfo
}

func (d *dirBackend) ListBucket(bucket string, prefix *gofakes3.Prefix, page gofakes3.ListBucketPage) (*gofakes3.ObjectList, error) {
	var pfx, delim string
	if prefix != nil {
		if prefix.HasPrefix {
			pfx = prefix.Prefix
		}
		if prefix.HasDelimiter {
			delim = prefix.Delimiter
		}
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	dir, err := d.bucketDir(bucket)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, gofakes3.BucketNotFound(bucket)
	}
	out := gofakes3.NewObjectList()
	// The listing starts in the directory the prefix's last "/" leads to.
	start := ""
	if i := strings.LastIndexByte(pfx, '/'); i >= 0 {
		start = pfx[:i+1]
	}
	enc, err := encodeKey(start)
	if err != nil {
		return out, nil // no key has this prefix
	}
	var found []listed
	seen := map[string]bool{}
	add := func(key, p string, info fs.FileInfo) {
		if !strings.HasPrefix(key, pfx) {
			return
		}
		if delim != "" {
			if i := strings.Index(key[len(pfx):], delim); i >= 0 {
				cp := key[:len(pfx)+i+len(delim)]
				if !seen[cp] {
					seen[cp] = true
					found = append(found, listed{name: cp, prefix: true})
				}
				return
			}
		}
		found = append(found, listed{name: key, path: p, info: info})
	}
	var walk func(fsDir, keyDir string, top bool) error
	walk = func(fsDir, keyDir string, top bool) error {
		ents, err := os.ReadDir(fsDir)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil // no key has this prefix
		}
		if err != nil {
			return err
		}
		for _, e := range ents {
			n := e.Name()
			stem, suffix := n[:max(len(n)-2, 0)], n[max(len(n)-2, 0):]
			name, ok := decodeName(stem)
			if !ok {
				continue
			}
			switch {
			case suffix == ".d" && e.IsDir():
				sub := keyDir + name + "/"
				if !strings.HasPrefix(sub, pfx) && !strings.HasPrefix(pfx, sub) {
					continue
				}
				if top && delim == "/" && strings.HasPrefix(sub, pfx) {
					add(sub, "", nil) // a directory holds an object: the prefix is listed
					continue
				}
				if err := walk(filepath.Join(fsDir, n), sub, false); err != nil {
					return err
				}
			case suffix == ".o" && !e.IsDir():
				info, err := e.Info()
				if err != nil {
					continue // removed meanwhile
				}
				add(keyDir+name, fsDir+string(filepath.Separator)+stem, info) // stem "": a key ending in "/"
			}
		}
		return nil
	}
	if err := walk(filepath.Join(dir, filepath.FromSlash(enc)), start, true); err != nil {
		return nil, err
	}
	sort.Slice(found, func(i, j int) bool { return found[i].name < found[j].name })
	if page.HasMarker {
		i := sort.Search(len(found), func(i int) bool { return found[i].name > page.Marker })
		found = found[i:]
	}
	if page.MaxKeys > 0 && int64(len(found)) > page.MaxKeys {
		found = found[:page.MaxKeys]
		out.IsTruncated = true
		out.NextMarker = found[len(found)-1].name
	}
	for _, f := range found {
		if f.prefix {
			out.AddPrefix(f.name)
			continue
		}
		_, hash, err := readMeta(f.path)
		if err != nil {
			return nil, fmt.Errorf("s3test: object %q: %w", f.name, err)
		}
		out.Add(&gofakes3.Content{Key: f.name, LastModified: gofakes3.NewContentTime(f.info.ModTime()),
			ETag: gofakes3.FormatETag(hash), Size: f.info.Size()})
	}
	return out, nil
}
