// Package termsafe escapes text for a terminal. File names, commands and labels come from
// the traced job: printed raw, a name holding ESC, BEL or CR could set the terminal's
// title and colours, move the cursor, or break a table's rows.
//
// Escaping follows ls -b: a byte that is not part of a printable UTF-8 character is
// written as a backslash escape (\a \b \t \n \v \f \r, else three octal digits, \033 for
// ESC), and a backslash in a name as \\, so an escaped name reads back unambiguously.
// Printable characters of any script pass unchanged; characters Unicode does not call
// printable (controls, and format characters such as bidirectional overrides, which
// reorder what a terminal shows) are escaped byte by byte.
package termsafe

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Name returns s with every byte that is not part of a printable character escaped, and
// backslashes doubled: for a file name, a command argument or a label in text output.
func Name(s string) string {
	if clean(s, false) {
		return s
	}
	return escape(s, false)
}

// Text returns s with every byte that is not part of a printable character escaped,
// except newlines: for whole lines of text output that may hold names not escaped with
// Name. Backslashes are left alone (they may be Name's escapes).
func Text(s string) string {
	if clean(s, true) {
		return s
	}
	return escape(s, true)
}

// clean reports whether s needs no escaping.
func clean(s string, text bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80:
			return cleanRunes(s[i:], text)
		case c == '\\':
			if !text {
				return false
			}
		case c == '\n':
			if !text {
				return false
			}
		case c < 0x20 || c == 0x7f:
			return false
		}
	}
	return true
}

func cleanRunes(s string, text bool) bool {
	for _, r := range s {
		switch {
		case r == utf8.RuneError: // invalid UTF-8 (U+FFFD itself is escaped too: rare)
			return false
		case r == '\\' || r == '\n':
			if !text {
				return false
			}
		case r != ' ' && !unicode.IsPrint(r):
			return false
		}
	}
	return true
}

func escape(s string, text bool) string {
	var b strings.Builder
	b.Grow(len(s) + 16)
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == '\n' && text:
			b.WriteByte('\n')
		case r == '\\':
			if text {
				b.WriteByte('\\')
			} else {
				b.WriteString(`\\`)
			}
		case r == ' ' || (r != utf8.RuneError && unicode.IsPrint(r)):
			b.WriteString(s[i : i+n])
		default:
			for _, c := range []byte(s[i : i+n]) {
				escByte(&b, c)
			}
		}
		i += n
	}
	return b.String()
}

func escByte(b *strings.Builder, c byte) {
	switch c {
	case '\a':
		b.WriteString(`\a`)
	case '\b':
		b.WriteString(`\b`)
	case '\t':
		b.WriteString(`\t`)
	case '\n':
		b.WriteString(`\n`)
	case '\v':
		b.WriteString(`\v`)
	case '\f':
		b.WriteString(`\f`)
	case '\r':
		b.WriteString(`\r`)
	default:
		b.WriteByte('\\')
		b.WriteByte('0' + c>>6)
		b.WriteByte('0' + c>>3&7)
		b.WriteByte('0' + c&7)
	}
}
