package export

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// jsonl writes one JSON object per row, its keys the columns' names in order, strings as
// JSON strings (see appendJSONString for names that are not UTF-8), numbers as numbers.
type jsonl struct {
	w    io.Writer
	cols []Column
	keys [][]byte // `"name":` of each column, with the separator before it
	line []byte
}

func newJSONL(w io.Writer, cols []Column) (RowWriter, error) {
	j := &jsonl{w: w, cols: cols, keys: make([][]byte, len(cols))}
	for i, c := range cols {
		sep := ","
		if i == 0 {
			sep = "{"
		}
		j.keys[i] = []byte(sep + strconv.Quote(c.Name) + ":")
	}
	return j, nil
}

func (j *jsonl) Write(row []Value) error {
	b := j.line[:0]
	for i, c := range j.cols {
		b = append(b, j.keys[i]...)
		switch c.Type {
		case Int:
			b = strconv.AppendInt(b, row[i].Int, 10)
		case Uint:
			b = strconv.AppendUint(b, uint64(row[i].Int), 10)
		default:
			b = appendJSONString(b, row[i].Str)
		}
	}
	j.line = append(b, "}\n"...)
	_, err := j.w.Write(j.line)
	return err
}

func (j *jsonl) Close() error { return nil }

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
