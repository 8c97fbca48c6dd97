package replay

import (
	"fmt"
	"strings"
)

// CheckName reports whether name is an acceptable trace path: relative, slash-separated,
// with no empty, "." or ".." component. "" (the root) is accepted. The error wraps
// ErrEscape.
func CheckName(name string) error {
	if name == "" {
		return nil
	}
	if name[len(name)-1] == '/' {
		return fmt.Errorf("replay: path %q: trailing slash: %w", name, ErrEscape)
	}
	if name[0] == '/' {
		return fmt.Errorf("replay: path %q: absolute: %w", name, ErrEscape)
	}
	rest := name
	for rest != "" {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		switch c {
		case "", ".", "..":
			return fmt.Errorf("replay: path %q: component %q: %w", name, c, ErrEscape)
		}
		if strings.IndexByte(c, 0) >= 0 {
			return fmt.Errorf("replay: path %q: NUL byte: %w", name, ErrEscape)
		}
	}
	return nil
}

// SplitName splits a checked name into its parent directory ("" at the top) and last
// component.
func SplitName(name string) (dir, base string) {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

// parentOf returns the parent directory of name ("" for a top-level name and the root).
func parentOf(name string) string {
	d, _ := SplitName(name)
	return d
}

// IsUnder reports whether the checked name is dir or below dir (everything is below the
// root, "").
func IsUnder(name, dir string) bool {
	if dir == "" {
		return true
	}
	return name == dir || (len(name) > len(dir) && name[len(dir)] == '/' && name[:len(dir)] == dir)
}
