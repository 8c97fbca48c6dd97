package stats

import (
	"path"
	"sort"
)

// Dirs aggregates Files by directory: a directory's figures are those of the files
// directly in it plus the ops addressed to the directory itself.
func (s *Stats) Dirs() map[string]*FileStats {
	out := map[string]*FileStats{}
	// A directory's heat row holds its files' cells, which start on grids of different
	// widths: merged all at once, not one file's into the others' at a time.
	heats := map[string][]*Heat{}
	for _, f := range s.Files {
		d := dirOf(f.Path)
		if f.IsDir {
			d = f.Path // the directory's own ops (readdir, its lookups) count for it
		}
		agg := out[d]
		if agg == nil {
			agg = &FileStats{Path: d}
			out[d] = agg
		}
		agg.mergeFigures(f)
		heats[d] = append(heats[d], &f.Heat)
	}
	for d, agg := range out {
		agg.FirstByte, agg.FirstByteNs = false, 0 // a file's figure: none for a directory
		agg.Heat = mergeHeats(heats[d])
	}
	return out
}

// NonDirs returns the entries of Files that are not directories.
func (s *Stats) NonDirs() map[string]*FileStats {
	out := make(map[string]*FileStats, len(s.Files))
	for _, f := range s.Files {
		if !f.IsDir {
			out[f.Path] = f
		}
	}
	return out
}

func dirOf(p string) string {
	if p == "" || p[0] == '?' {
		return p
	}
	d := path.Dir(p)
	if d == "." {
		return ""
	}
	return d
}

// TopFiles returns up to n entries of m ordered by less (descending "busiest first"),
// ties broken by path.
func TopFiles(m map[string]*FileStats, n int, key func(*FileStats) float64) []*FileStats {
	out := make([]*FileStats, 0, len(m))
	for _, f := range m {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		ki, kj := key(out[i]), key(out[j])
		if ki != kj {
			return ki > kj
		}
		return out[i].Path < out[j].Path
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// UnusedFiles returns the paths that were opened successfully but never read or written,
// sorted.
func (s *Stats) UnusedFiles() []string {
	var out []string
	for _, f := range s.Files {
		if !f.IsDir && f.Opens > 0 && f.ReadOps == 0 && f.WriteOps == 0 {
			out = append(out, f.Path)
		}
	}
	sort.Strings(out)
	return out
}
