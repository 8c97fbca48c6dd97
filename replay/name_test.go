package replay

import (
	"errors"
	"testing"
)

// TestCheckName: a name fold.CheckName refuses (its own tests list them) is refused as an
// escape from the target; one it accepts is accepted.
func TestCheckName(t *testing.T) {
	for name, ok := range map[string]bool{"": true, "a/b.txt": true, "/etc/passwd": false, "a/../../x": false} {
		err := CheckName(name)
		if (err == nil) != ok || (err != nil && !errors.Is(err, ErrEscape)) {
			t.Errorf("CheckName(%q) = %v, want ok=%v or an error wrapping ErrEscape", name, err, ok)
		}
	}
}
