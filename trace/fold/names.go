package fold

import (
	"fmt"
	"strings"
)

// CheckName reports whether name is an acceptable trace path: relative, slash-separated,
// with no empty, "." or ".." component and no NUL byte. "" (the root) is accepted.
func CheckName(name string) error {
	if name == "" {
		return nil
	}
	if name[len(name)-1] == '/' {
		return fmt.Errorf("path %q: trailing slash", name)
	}
	if name[0] == '/' {
		return fmt.Errorf("path %q: absolute", name)
	}
	rest := name
	for rest != "" {
		var c string
		c, rest, _ = strings.Cut(rest, "/")
		switch c {
		case "", ".", "..":
			return fmt.Errorf("path %q: component %q", name, c)
		}
		if strings.IndexByte(c, 0) >= 0 {
			return fmt.Errorf("path %q: NUL byte", name)
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

// Parent returns the parent directory of name ("" for a top-level name and the root).
func Parent(name string) string {
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
