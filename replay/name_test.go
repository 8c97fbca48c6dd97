package replay

import (
	"errors"
	"testing"
)

func TestCheckName(t *testing.T) {
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"root", "", true},
		{"plain", "a/b.txt", true},
		{"dots inside names", "a/..b/c..", true},
		{"absolute", "/etc/passwd", false},
		{"dotdot", "../x", false},
		{"dotdot inside", "a/../../x", false},
		{"dot", "a/./b", false},
		{"empty component", "a//b", false},
		{"trailing slash", "a/", false},
		{"nul", "a\x00b", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckName(tt.in)
			if (err == nil) != tt.ok {
				t.Fatalf("CheckName(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrEscape) {
				t.Fatalf("error %v does not wrap ErrEscape", err)
			}
		})
	}
}
