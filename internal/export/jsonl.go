package export

import (
	"io"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/iotap/iotap/trace"
)

// jsonl writes one JSON object per row, its keys the columns' names in order: numbers as
// numbers, strings as JSON strings (see appendJSONString for names that are not UTF-8),
// times as RFC 3339 strings with nanoseconds (UTC), labels as an object, NULL as null.
type jsonl struct {
	w    io.Writer
	cols []Column
	keys [][]byte // `"name":` of each column, with the separator before it
	line []byte
	// The values of the PerTrace columns on the last row, and their JSON (with the keys), which
	// the next rows of the trace repeat.
	last  []Value
	enc   []byte
	times []timeCache // per column
}

func newJSONL(w io.Writer, t Table) (RowWriter, error) {
	cols := t.Columns
	j := &jsonl{w: w, cols: cols, keys: make([][]byte, len(cols)), last: make([]Value, len(cols)), times: make([]timeCache, len(cols))}
	for i, c := range cols {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		j.keys[i] = []byte(sep + strconv.Quote(c.Name) + ":")
	}
	// The PerTrace columns' JSON is kept in one piece: when they are not contiguous, each row
	// writes them all.
	first, last := -1, -1
	for i, c := range cols {
		if c.PerTrace {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	for i := first; first >= 0 && i <= last; i++ {
		if !cols[i].PerTrace {
			j.cols = slices.Clone(cols)
			for k := range j.cols {
				j.cols[k].PerTrace = false
			}
			break
		}
	}
	return j, nil
}

func (j *jsonl) Write(row []Value) error {
	b := j.line[:0]
	if j.enc == nil || j.changed(row) {
		j.enc = j.enc[:0]
		for i, c := range j.cols {
			if c.PerTrace {
				j.last[i] = row[i]
				j.enc = j.value(j.enc, i, &row[i])
			}
		}
	}
	cached := false
	for i, c := range j.cols {
		if c.PerTrace {
			if !cached { // the PerTrace columns, in one piece (they are contiguous)
				b = append(b, j.enc...)
				cached = true
			}
			continue
		}
		b = j.value(b, i, &row[i])
	}
	j.line = append(b, "}\n"...)
	_, err := j.w.Write(j.line)
	return err
}

// changed reports whether a PerTrace column's value differs from the last row's.
func (j *jsonl) changed(row []Value) bool {
	for i, c := range j.cols {
		if !c.PerTrace {
			continue
		}
		a, v := &j.last[i], &row[i]
		if a.Int != v.Int || a.Null != v.Null || a.Str != v.Str || !sameLabels(a.Labels, v.Labels) {
			return true
		}
	}
	return false
}

// value appends column i's key and its value v.
func (j *jsonl) value(b []byte, i int, v *Value) []byte {
	return j.appendValue(append(b, j.keys[i]...), i, v)
}

// appendValue appends v, a value of column i.
func (j *jsonl) appendValue(b []byte, i int, v *Value) []byte {
	switch c := j.cols[i]; {
	case v.Null:
		b = append(b, "null"...)
	case c.Type == Int:
		b = strconv.AppendInt(b, v.Int, 10)
	case c.Type == Bool:
		b = strconv.AppendBool(b, v.Int != 0)
	case c.Type == Time:
		b = append(b, '"')
		b = j.times[i].append(b, v.Int)
		b = append(b, '"')
	case c.Type == Labels:
		b = appendLabels(b, v.Labels)
	default:
		b = appendJSONString(b, v.Str)
	}
	return b
}

func (j *jsonl) Close() error { return nil }

// writeRecordJSONL writes record r of table as Write writes its row, without the row: each
// column's value goes from its function to the line. With same, r is of the trace of the
// record before, and the PerTrace columns repeat their JSON; v is one Value to use.
func writeRecordJSONL[R any](j *jsonl, table []column[R], r *R, same bool, v []Value) error {
	if !same || j.enc == nil {
		j.enc = j.enc[:0]
		for i := range table {
			if j.cols[i].PerTrace {
				fill(table[i:i+1], r, v, false)
				j.enc = j.value(j.enc, i, &v[0])
			}
		}
	}
	b := j.line[:0]
	cached := false
	for i := range table {
		if j.cols[i].PerTrace {
			if !cached { // the PerTrace columns, in one piece (they are contiguous)
				b = append(b, j.enc...)
				cached = true
			}
			continue
		}
		b = append(b, j.keys[i]...)
		c := &table[i]
		switch {
		case c.num != nil:
			n := c.num(r)
			switch {
			case c.zeroNull && n == 0:
				b = append(b, "null"...)
			case c.Type == Int:
				b = strconv.AppendInt(b, n, 10)
			default:
				v[0] = Value{Int: n}
				b = j.appendValue(b, i, &v[0])
			}
		case c.opt != nil:
			if n, ok := c.opt(r); !ok {
				b = append(b, "null"...)
			} else if c.Type == Int {
				b = strconv.AppendInt(b, n, 10)
			} else {
				v[0] = Value{Int: n}
				b = j.appendValue(b, i, &v[0])
			}
		case c.str != nil:
			if s := c.str(r); s == "" && c.Nullable {
				b = append(b, "null"...)
			} else {
				b = appendJSONString(b, s)
			}
		default:
			fill(table[i:i+1], r, v, false)
			b = j.appendValue(b, i, &v[0])
		}
	}
	j.line = append(b, "}\n"...)
	_, err := j.w.Write(j.line)
	return err
}

// appendJSONString appends s as a JSON string. Names are bytes, not necessarily UTF-8, and
// JSON strings are UTF-8: a byte that is not part of a valid UTF-8 sequence, 0xXY, becomes
// the escape \udcXY (a lone low surrogate, as Python's surrogateescape does). No UTF-8 name
// holds one, so every name reads back to its bytes, and \xff and \xfe stay apart. In
// Python: json.loads(line)["path"].encode("utf-8", "surrogateescape").
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b = append(b, '\\', 'u', 'd', 'c', hex[c>>4], hex[c&0xf])
		} else {
			b = append(b, s[i:i+n]...)
		}
		i += n
	}
	return append(b, '"')
}

// timeLayout is RFC 3339 with all nine digits of the nanoseconds, in UTC.
const timeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// appendTime appends ns since the Unix epoch as an RFC 3339 time in UTC.
func appendTime(b []byte, ns int64) []byte {
	return time.Unix(0, ns).UTC().AppendFormat(b, timeLayout)
}

// timeCache formats times of the same second fast: its date and time of day are kept.
type timeCache struct {
	sec    int64
	prefix []byte // "2006-01-02T15:04:05."
}

// append appends ns since the Unix epoch as appendTime does.
func (c *timeCache) append(b []byte, ns int64) []byte {
	sec, frac := ns/1e9, ns%1e9
	if frac < 0 {
		sec, frac = sec-1, frac+1e9
	}
	if c.prefix == nil || sec != c.sec {
		c.sec = sec
		c.prefix = time.Unix(sec, 0).UTC().AppendFormat(c.prefix[:0], "2006-01-02T15:04:05.")
	}
	b = append(b, c.prefix...)
	var d [9]byte
	for i := 8; i >= 0; i-- {
		d[i] = byte('0' + frac%10)
		frac /= 10
	}
	b = append(b, d[:]...)
	return append(b, 'Z')
}

// sameLabels reports whether a and b are the same slice.
func sameLabels(a, b []trace.Label) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// appendLabels appends labels as a JSON object (a key given twice keeps its first value).
func appendLabels(b []byte, labels []trace.Label) []byte {
	b = append(b, '{')
	for i, l := range labels {
		if firstKey(labels, i) {
			if len(b) > 0 && b[len(b)-1] != '{' {
				b = append(b, ',')
			}
			b = appendJSONString(b, l.Key)
			b = append(b, ':')
			b = appendJSONString(b, l.Value)
		}
	}
	return append(b, '}')
}

// firstKey reports whether labels[i] is the first label of its key.
func firstKey(labels []trace.Label, i int) bool {
	for _, l := range labels[:i] {
		if l.Key == labels[i].Key {
			return false
		}
	}
	return true
}
