package testenv

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// notMachine are the reasons a test may skip by itself, without this package: none of them
// is a part of the machine that a CI run must have. Each is the start of the skip's message.
// (A skip under `if testing.Short()` is allowed too: the caller asked for a short run.)
var notMachine = []string{
	"backend cannot rename",              // the conformance suite's capability flags
	"backend has no locks",               //
	"set IOTAP_S3_TEST_URL",              // real S3 needs credentials the tests never have
	"set IOTAP_BENCH_TRACE",              // a benchmark's input trace, which its caller gives
	"no cycle clock here",                // the CPU or the kernel's clock source
	"padding is sized for 64-bit",        // the platform
	"MADV_FREE is Linux's",               //
	"no LazyFree in",                     // the kernel's version
	"no /proc",                           //
	"no IPv6 on this host",               // the host's network
	"no per-thread scheduler statistics", // the kernel's config (schedstat)
	"go list unavailable",                // the deps test runs where the go command is
	"file size limit",                    // a hard RLIMIT_FSIZE below what the test needs
	"IOTAP_CALLCOST_ONCE is not set",     // a benchmark's own run, which bench/replaycost.sh starts
}

// TestSkipsGoThroughTestenv finds every call of a Skip method in the repository's Go files
// and fails on one whose message is not a reason in notMachine: a test that skips for a
// missing part of the machine must call Skip, Root or Programs, which fail under the
// IOTAP_REQUIRE_* variables.
func TestSkipsGoThroughTestenv(t *testing.T) {
	root := repoRoot(t)
	fset := token.NewFileSet()
	calls := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || filepath.Dir(path) == filepath.Join(root, "internal", "testenv") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		short := shortBodies(f)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || (sel.Sel.Name != "Skip" && sel.Sel.Name != "Skipf" && sel.Sel.Name != "SkipNow") {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testenv" {
				return true
			}
			calls++
			for _, b := range short {
				if b.Pos() <= call.Pos() && call.End() <= b.End() {
					return true
				}
			}
			msg := ""
			if len(call.Args) > 0 {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					msg, _ = strconv.Unquote(lit.Value)
				}
			}
			for _, ok := range notMachine {
				if msg != "" && strings.HasPrefix(msg, ok) {
					return true
				}
			}
			rel, _ := filepath.Rel(root, fset.Position(call.Pos()).String())
			t.Errorf("%s: %s(%q) skips by itself: use testenv.Skip, Root or Programs, or add the reason to notMachine if it is not a part of the machine CI must have", rel, sel.Sel.Name, msg)
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls == 0 {
		t.Fatalf("found no Skip call under %s: the walk is broken", root)
	}
}

// shortBodies returns the bodies of the if statements in f whose condition calls
// testing.Short.
func shortBodies(f *ast.File) []*ast.BlockStmt {
	var out []*ast.BlockStmt
	ast.Inspect(f, func(n ast.Node) bool {
		ifs, ok := n.(*ast.IfStmt)
		if !ok {
			return true
		}
		ast.Inspect(ifs.Cond, func(c ast.Node) bool {
			if sel, ok := c.(*ast.SelectorExpr); ok && sel.Sel.Name == "Short" {
				if id, ok := sel.X.(*ast.Ident); ok && id.Name == "testing" {
					out = append(out, ifs.Body)
				}
			}
			return true
		})
		return true
	})
	return out
}

// repoRoot is the repository's root directory (tests run in their package's directory).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

func TestSkipOrFail(t *testing.T) {
	const r Requirement = "IOTAP_TESTENV_SELFTEST"
	for _, tc := range []struct {
		name, env string
		skipped   bool
		failed    bool
	}{
		{"not required: skips", "", true, false},
		{"required: fails", "1", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(string(r), tc.env)
			ft := &fakeT{}
			func() {
				defer func() { _ = recover() }() // fakeT stops the test by panicking
				Skip(ft, r, "no %s here", "widget")
			}()
			if ft.skipped != tc.skipped || ft.failed != tc.failed {
				t.Errorf("skipped %v failed %v, want %v %v", ft.skipped, ft.failed, tc.skipped, tc.failed)
			}
			if !strings.Contains(ft.msg, "no widget here") || !strings.Contains(ft.msg, string(r)) {
				t.Errorf("message %q lacks the reason or the variable", ft.msg)
			}
		})
	}
}

// fakeT records how Skip ended a test.
type fakeT struct {
	testing.TB
	skipped, failed bool
	msg             string
}

type stop struct{}

func (f *fakeT) Helper() {}
func (f *fakeT) Skipf(format string, args ...any) {
	f.skipped, f.msg = true, sprintf(format, args...)
	panic(stop{})
}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed, f.msg = true, sprintf(format, args...)
	panic(stop{})
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// TestCIRequiresEverything: CI (.ci/run) sets the variable of every Requirement to 1, and
// no other IOTAP_REQUIRE_* variable, so that no kind of skip can pass there and the
// package documentation's list is the script's.
func TestCIRequiresEverything(t *testing.T) {
	root := repoRoot(t)
	f, err := parser.ParseFile(token.NewFileSet(), filepath.Join(root, "internal", "testenv", "testenv.go"), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "Requirement" {
			return true
		}
		for _, v := range vs.Values {
			if lit, ok := v.(*ast.BasicLit); ok {
				s, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, s)
			}
		}
		return true
	})
	if len(want) == 0 {
		t.Fatal("no Requirement constants found in testenv.go")
	}
	run, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var set []string
	for _, line := range strings.Split(string(run), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "export IOTAP_REQUIRE_"); ok {
			set = append(set, "IOTAP_REQUIRE_"+v)
		}
	}
	slices.Sort(set)
	for i := range want {
		want[i] += "=1"
	}
	slices.Sort(want)
	if !slices.Equal(set, want) {
		t.Errorf(".ci/run sets %q; want %q", set, want)
	}
	doc, err := os.ReadFile(filepath.Join(root, "internal", "testenv", "testenv.go"))
	if err != nil {
		t.Fatal(err)
	}
	pkgDoc, _, _ := strings.Cut(string(doc), "package testenv")
	for _, w := range want {
		if v, _, _ := strings.Cut(w, "="); !strings.Contains(pkgDoc, v) {
			t.Errorf("the package documentation does not name %s", v)
		}
	}
}
