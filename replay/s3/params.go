package s3

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Params are the settings of a profile, key=value: Options.Params (iotap replay
// --s3-opt) and the query of a target URL (s3://bucket/prefix?prefetch_max=64MiB), the
// URL's winning. Each profile documents its keys (paramDocs); an unknown key or a bad
// value is an error naming the known ones. Sizes take a unit: 512KiB, 8MiB, 1GiB (K, M
// and G are the same powers of two), or a number of bytes.
type params struct {
	m    map[string]string
	used map[string]bool
}

// splitSpec splits an s3:// target into its URL and the settings of its query, laid over
// base (a copy; base is not changed).
func splitSpec(spec string, base map[string]string) (string, map[string]string, error) {
	m := make(map[string]string, len(base))
	for k, v := range base {
		m[k] = v
	}
	u, q, ok := strings.Cut(spec, "?")
	if !ok {
		return spec, m, nil
	}
	vals, err := url.ParseQuery(q)
	if err != nil {
		return "", nil, settingError{fmt.Errorf("replay: target %s: settings after '?': %w", spec, err)}
	}
	for k, vs := range vals {
		if len(vs) != 1 || vs[0] == "" {
			return "", nil, settingError{fmt.Errorf("replay: target %s: setting %q wants one value", spec, k)}
		}
		m[k] = vs[0]
	}
	return u, m, nil
}

// ErrSetting marks an unknown profile, an unknown setting or a bad value, given in
// Options.Profile, Options.Params or a target's query: the caller's mistake, not S3's.
var ErrSetting = errors.New("s3: bad setting")

// settingError is a settings error, marked ErrSetting.
type settingError struct{ error }

func (e settingError) Unwrap() []error { return []error{e.error, ErrSetting} }

// CheckSettings returns the error Open would return for the profile and settings of spec
// and o, without reaching S3, so that a caller can check them before anything else.
func CheckSettings(spec string, o Options) error {
	_, settings, err := splitSpec(spec, o.Params)
	if err != nil {
		return err
	}
	name := o.Profile
	if v, ok := settings["profile"]; ok {
		name = v
	}
	if _, err := newProfile(name, &Backend{}, newParams(settings)); err != nil {
		return settingError{fmt.Errorf("%w (target %s)", err, spec)}
	}
	return nil
}

func newParams(m map[string]string) *params { return &params{m: m, used: map[string]bool{}} }

// size reads a byte size (at least min), or returns def when key is not set.
func (p *params) size(key string, def, minimum int64) (int64, error) {
	v, ok := p.m[key]
	if !ok {
		return def, nil
	}
	p.used[key] = true
	n, err := ParseSize(v)
	if err == nil && n < minimum {
		err = fmt.Errorf("at least %d bytes", minimum)
	}
	if err != nil {
		return 0, fmt.Errorf("replay: s3 setting %s=%s: %w", key, v, err)
	}
	return n, nil
}

// count reads a positive integer, or returns def when key is not set.
func (p *params) count(key string, def int) (int, error) {
	v, ok := p.m[key]
	if !ok {
		return def, nil
	}
	p.used[key] = true
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1024 {
		return 0, fmt.Errorf("replay: s3 setting %s=%s: want a count from 1 to 1024", key, v)
	}
	return n, nil
}

// unknown returns an error for a key no profile method read.
func (p *params) unknown(profile string, known []string) error {
	for k := range p.m {
		if k == "profile" || p.used[k] {
			continue
		}
		return fmt.Errorf("replay: s3 setting %q is not one of the %s profile's (%s)", k, profile, strings.Join(known, ", "))
	}
	return nil
}

// String returns the settings in a canonical form, sorted by key: "k1=v1 k2=v2".
func (p *params) String() string {
	keys := make([]string, 0, len(p.m))
	for k := range p.m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(k + "=" + p.m[k])
	}
	return b.String()
}

// ParseSize parses a byte size: a number of bytes, or a number with a unit K, KB, KiB, M,
// MB, MiB, G, GB, GiB (all powers of two: S3 clients' part sizes are).
func ParseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	num := strings.TrimRight(t, "KMGiBkmgb")
	unit := strings.ToUpper(strings.TrimSuffix(strings.TrimSuffix(t[len(num):], "B"), "b"))
	unit = strings.TrimSuffix(unit, "I")
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want bytes, or a number with K, M or G (KiB, MiB, GiB)", s)
	}
	mult := map[string]float64{"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit", s)
	}
	v := f * mult
	if v > 1<<50 {
		return 0, fmt.Errorf("size %q: too large", s)
	}
	return int64(v), nil
}
