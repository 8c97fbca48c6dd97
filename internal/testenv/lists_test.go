package testenv

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// mounts matches a call in a test that mounts a file system: the mount helper, s3fs over
// the fake S3 server, the layer itself, go-fuse, or the system call.
var mounts = regexp.MustCompile(`\b(fusetest\.Mount|MountS3FS|fusefs\.Mount|fs\.Mount|unix\.Mount|syscall\.Mount)\(`)

// TestPackageLists: scripts/packages.sh puts every package in exactly one of its lists
// (scripts/test.sh runs each package once, and CI's race and one-P runs take the nomount
// list), and a package whose tests mount anything is in the mount list.
func TestPackageLists(t *testing.T) {
	root := repoRoot(t)
	lists := map[string][]string{}
	for _, name := range []string{"nomount", "mount", "clusters"} {
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "packages.sh"), name)
		out, err := cmd.Output()
		if err != nil {
			t.Skipf("go list unavailable: scripts/packages.sh %s: %v", name, err)
		}
		lists[name] = strings.Fields(string(out))
	}
	all, err := exec.Command("go", "list", root+"/...").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	in := map[string][]string{}
	for name, pkgs := range lists {
		for _, p := range pkgs {
			in[p] = append(in[p], name)
		}
	}
	for _, p := range strings.Fields(string(all)) {
		if len(in[p]) != 1 {
			t.Errorf("%s is in %d lists of scripts/packages.sh (%v); want 1", p, len(in[p]), in[p])
		}
	}

	const module = "github.com/iotap/iotap"
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		m := mounts.Find(b)
		if m == nil {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := module + "/" + filepath.ToSlash(rel)
		if !slices.Contains(lists["mount"], pkg) && !slices.Contains(lists["clusters"], pkg) {
			t.Errorf("%s calls %s, but %s is not in the mount list of scripts/packages.sh", path, m, pkg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDevelopmentMapsEveryPackage: the table of docs/development.md has a row for every
// package of the module, and none for a package that is not.
func TestDevelopmentMapsEveryPackage(t *testing.T) {
	root := repoRoot(t)
	out, err := exec.Command("go", "list", root+"/...").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "development.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(string(doc), -1) {
		rows[m[1]] = true
	}
	for _, p := range strings.Fields(string(out)) {
		rel := strings.TrimPrefix(p, "github.com/iotap/iotap/")
		if !rows[rel] {
			t.Errorf("docs/development.md has no row for %s", rel)
		}
		delete(rows, rel)
	}
	for r := range rows {
		t.Errorf("docs/development.md has a row for %s, which is no package", r)
	}
}
