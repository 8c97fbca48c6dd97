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
