package export

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestAppendJSONString: every name reads back to its bytes, invalid UTF-8 included (as
// \udcXY escapes, decoded the way Python's surrogateescape does), and is valid JSON.
func TestAppendJSONString(t *testing.T) {
	for _, s := range []string{"", "plain/path.txt", `quo"te\back`, "new\nline\ttab\r", "\x00\x01\x1f", "naïve 日本", "bad\xffutf8", "bad\xfeutf8", "\u2028", `\udcff`, "\xed\xb3\xbf"} {
		b := appendJSONString(nil, s)
		var valid string
		if err := json.Unmarshal(b, &valid); err != nil {
			t.Errorf("%q: %v: %s", s, err, b)
			continue
		}
		if valid != strings.ToValidUTF8(s, "\ufffd") && utf8.ValidString(s) {
			t.Errorf("%q: read as %q", s, valid)
		}
		if got := decodeSurrogateEscape(t, b); got != s {
			t.Errorf("%q: exported as %s, reads back as %q", s, b, got)
		}
	}
	if a, b := appendJSONString(nil, "\xff"), appendJSONString(nil, "\xfe"); bytes.Equal(a, b) {
		t.Errorf("\\xff and \\xfe both export as %s", a)
	}
}

// decodeSurrogateEscape decodes a JSON string as Python's json.loads followed by
// encode("utf-8", "surrogateescape") would: \udcXY is the byte 0xXY.
func decodeSurrogateEscape(t *testing.T, b []byte) string {
	t.Helper()
	var out []byte
	for i := 1; i < len(b)-1; i++ {
		if b[i] != '\\' {
			out = append(out, b[i])
			continue
		}
		i++
		switch b[i] {
		case 'u':
			v, err := strconv.ParseUint(string(b[i+1:i+5]), 16, 16)
			if err != nil {
				t.Fatalf("%s: %v", b, err)
			}
			if v>>8 == 0xdc && v&0xff >= 0x80 {
				out = append(out, byte(v))
			} else {
				out = utf8.AppendRune(out, rune(v))
			}
			i += 4
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			out = append(out, b[i])
		}
	}
	return string(out)
}

// TestTimeCache: the cached formatting of times gives appendTime's text, across seconds and
// before the epoch.
func TestTimeCache(t *testing.T) {
	var c timeCache
	for _, ns := range []int64{0, 1, 999_999_999, 1_000_000_000, 1_764_547_200_123_456_789, 1_764_547_200_123_456_790, 1_764_547_201_000_000_000, -1, -1_000_000_001} {
		if got, want := string(c.append(nil, ns)), string(appendTime(nil, ns)); got != want {
			t.Errorf("%d: %s, want %s", ns, got, want)
		}
	}
}
