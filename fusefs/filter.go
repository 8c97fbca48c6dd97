package fusefs

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

func checkGlob(g string) error {
	if _, err := path.Match(g, ""); err != nil {
		return fmt.Errorf("fusefs: bad path pattern %q: %w", g, err)
	}
	return nil
}

// pathFilter decides, once per path id, whether events on that path are recorded.
type pathFilter struct {
	include, exclude []string
	names            *shardedMap[uint32, string] // path id → path relative to the root
	decided          *shardedMap[uint32, bool]   // path id → record?
	forgotten        []uint32                    // ids the path index forgot last (forget)
}

func newPathFilter(include, exclude []string) *pathFilter {
	if len(include) == 0 && len(exclude) == 0 {
		return nil
	}
	f := &pathFilter{
		include: include, exclude: exclude,
		names:   newShardedMap[uint32, string](),
		decided: newShardedMap[uint32, bool](),
	}
	f.names.set(1, "")
	return f
}

// forget is told the ids the recorder's path index has just forgotten (Writer.KeepPaths;
// called with the index locked, so one call at a time). It drops the names and decisions
// of the ids forgotten the time before, which no request can still hold, unless they name
// a node again (live): the filter's memory follows the index's.
func (f *pathFilter) forget(ids []uint32, live func(uint32) bool) {
	prev := f.forgotten
	f.forgotten = ids
	prev = slices.DeleteFunc(prev, live)
	if len(prev) > 0 {
		f.names.delAll(prev)
		f.decided.delAll(prev)
	}
}

// learn remembers the full name of path id id = parent/name.
func (f *pathFilter) learn(id, parent uint32, name string) {
	if _, ok := f.names.get(id); ok {
		return
	}
	p, _ := f.names.get(parent)
	if p != "" {
		name = p + "/" + name
	}
	f.names.set(id, name)
}

// ok reports whether events on path id id are recorded.
func (f *pathFilter) ok(id uint32) bool {
	if d, ok := f.decided.get(id); ok {
		return d
	}
	name, known := f.names.get(id)
	d := known && f.match(name)
	if !known && len(f.include) == 0 {
		d = true
	}
	f.decided.set(id, d)
	return d
}

func (f *pathFilter) match(p string) bool {
	if len(f.include) > 0 && !anyMatch(f.include, p) {
		return false
	}
	return !anyMatch(f.exclude, p)
}

// anyMatch reports whether a pattern matches p, a leading directory of p, or an element of p.
func anyMatch(patterns []string, p string) bool {
	for _, g := range patterns {
		if ok, _ := path.Match(g, p); ok {
			return true
		}
		for i := 0; i < len(p); i++ {
			if p[i] != '/' {
				continue
			}
			if ok, _ := path.Match(g, p[:i]); ok {
				return true
			}
		}
		for _, el := range strings.Split(p, "/") {
			if ok, _ := path.Match(g, el); ok {
				return true
			}
		}
	}
	return false
}
