package termsafe

import "testing"

func TestEscape(t *testing.T) {
	for _, tc := range []struct{ in, name, text string }{
		{"plain/file.txt", "plain/file.txt", "plain/file.txt"},
		{"été/日本 語", "été/日本 語", "été/日本 語"},
		{"title\x1b]0;pwned\a", `title\033]0;pwned\a`, `title\033]0;pwned\a`},
		{"row\rbreak\nnext\ttab", `row\rbreak\nnext\ttab`, "row\\rbreak\nnext\\ttab"},
		{"a\\b", `a\\b`, `a\b`},
		{"bad\xff\xfe", `bad\377\376`, `bad\377\376`},
		{"rtl\u202eexe.txt", `rtl\342\200\256exe.txt`, `rtl\342\200\256exe.txt`},
		{"del\x7f", `del\177`, `del\177`},
		{"nul\x00", `nul\000`, `nul\000`},
	} {
		if got := Name(tc.in); got != tc.name {
			t.Errorf("Name(%q) = %q, want %q", tc.in, got, tc.name)
		}
		if got := Text(tc.in); got != tc.text {
			t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}
