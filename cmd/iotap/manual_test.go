package main

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestManualNamesEveryFlag: docs/manual.md names every flag of every command, and every
// --flag it names exists in some command.
func TestManualNamesEveryFlag(t *testing.T) {
	b, err := os.ReadFile("../../docs/manual.md")
	if err != nil {
		t.Fatal(err)
	}
	manual := string(b)
	all := map[string]bool{"help": true, "version": true}
	for _, c := range commandList() {
		if c.hidden {
			continue
		}
		fs := newFlagSet(c)
		c.setup(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			all[f.Name] = true
			if !strings.Contains(manual, "--"+f.Name) && (f.Shorthand == "" || !strings.Contains(manual, "-"+f.Shorthand+" ")) {
				t.Errorf("iotap %s --%s is not in docs/manual.md", c.name, f.Name)
			}
		})
	}
	var unknown []string
	for _, m := range regexp.MustCompile("(?:^|[\\s`(\\[|])--([a-z][a-z0-9-]*)").FindAllStringSubmatch(manual, -1) {
		if !all[m[1]] {
			unknown = append(unknown, m[1])
		}
	}
	sort.Strings(unknown)
	if len(unknown) > 0 {
		t.Errorf("docs/manual.md names flags no command has: %v", unknown)
	}
}
