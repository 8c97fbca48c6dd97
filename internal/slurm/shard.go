package slurm

import (
	"slices"
)

// Shard returns the traces task procID of nTasks replays: with the traces in natural order
// (see [NaturalLess]), trace k belongs to task k mod nTasks (the rule in the package doc).
// The input slice is not modified. It returns nil when procID is not in [0, nTasks) or
// when the task gets no trace (fewer traces than tasks).
func Shard(traces []string, procID, nTasks int) []string {
	if nTasks < 1 || procID < 0 || procID >= nTasks {
		return nil
	}
	sorted := slices.Clone(traces)
	slices.SortStableFunc(sorted, func(a, b string) int {
		switch {
		case NaturalLess(a, b):
			return -1
		case NaturalLess(b, a):
			return 1
		}
		return 0
	})
	var out []string
	for k := procID; k < len(sorted); k += nTasks {
		out = append(out, sorted[k])
	}
	return out
}

// NaturalLess orders strings with runs of ASCII digits compared as numbers ("n2" < "n10",
// "n1-9" < "n1-10"). Equal numbers with different leading zeros fall back to byte order.
func NaturalLess(a, b string) bool {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		ca, cb := a[i], b[j]
		if isDigit(ca) && isDigit(cb) {
			si, sj := i, j
			for i < len(a) && isDigit(a[i]) {
				i++
			}
			for j < len(b) && isDigit(b[j]) {
				j++
			}
			na, nb := trimZeros(a[si:i]), trimZeros(b[sj:j])
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			continue
		}
		if ca != cb {
			return ca < cb
		}
		i++
		j++
	}
	if len(a)-i != len(b)-j {
		return len(a)-i < len(b)-j
	}
	return a < b
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}
