package replay

import (
	"fmt"

	"github.com/iotap/iotap/trace/fold"
)

// CheckName reports whether name is an acceptable trace path: relative, slash-separated,
// with no empty, "." or ".." component. "" (the root) is accepted. The error wraps
// ErrEscape. The rule is fold.CheckName's: the planner skips the events it refuses.
func CheckName(name string) error {
	if err := fold.CheckName(name); err != nil {
		return fmt.Errorf("replay: %w: %w", err, ErrEscape)
	}
	return nil
}

// SplitName splits a checked name into its parent directory ("" at the top) and last
// component.
func SplitName(name string) (dir, base string) { return fold.SplitName(name) }

// parentOf returns the parent directory of name ("" for a top-level name and the root).
func parentOf(name string) string { return fold.Parent(name) }

// IsUnder reports whether the checked name is dir or below dir (everything is below the
// root, "").
func IsUnder(name, dir string) bool { return fold.IsUnder(name, dir) }
