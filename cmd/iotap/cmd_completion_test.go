package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/iotap/iotap/internal/testenv"
)

// iotapOutput runs the test's iotap binary and returns its standard output.
func iotapOutput(t *testing.T, args ...string) []byte {
	t.Helper()
	if iotapBin == "" {
		t.Fatal("the iotap binary could not be built (see TestMain output)")
	}
	out, err := exec.Command(iotapBin, args...).Output()
	if err != nil {
		t.Fatalf("iotap %s: %v", strings.Join(args, " "), err)
	}
	return out
}

// TestCompletionBash sources the bash script in a real bash and asks it to complete
// command names, a command's flags and file names.
func TestCompletionBash(t *testing.T) {
	script := filepath.Join(t.TempDir(), "iotap.bash")
	if err := os.WriteFile(script, iotapOutput(t, "completion", "bash"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "trace.iotap"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	complete := func(words ...string) []string {
		t.Helper()
		var sh bytes.Buffer
		sh.WriteString("source " + script + "\ncd " + files + "\nCOMP_WORDS=(")
		for _, w := range words {
			sh.WriteString("'" + w + "' ")
		}
		sh.WriteString(")\nCOMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))\n_iotap\nprintf '%s\\n' \"${COMPREPLY[@]}\"\n")
		out, err := exec.Command("bash", "--norc", "-c", sh.String()).CombinedOutput()
		if err != nil {
			t.Fatalf("bash: %v\n%s", err, out)
		}
		return strings.Fields(string(out))
	}
	for _, tc := range []struct {
		words []string
		want  []string
		not   string
	}{
		{[]string{"iotap", "re"}, []string{"record", "replay", "report"}, "export"},
		{[]string{"iotap", "record", "--ta"}, []string{"--target"}, "--top"},
		{[]string{"iotap", "replay", "--s3-e"}, []string{"--s3-endpoint"}, "--target"},
		{[]string{"iotap", "report", "tr"}, []string{"trace.iotap"}, "report"},
	} {
		got := complete(tc.words...)
		for _, w := range tc.want {
			if !contains(got, w) {
				t.Errorf("%v: completions %v lack %q", tc.words, got, w)
			}
		}
		if contains(got, tc.not) {
			t.Errorf("%v: completions %v include %q", tc.words, got, tc.not)
		}
	}
}

// TestCompletionScriptsNameEveryFlag: the bash and fish scripts name every visible
// command and every flag of it, counted from the command table.
func TestCompletionScriptsNameEveryFlag(t *testing.T) {
	bash := string(iotapOutput(t, "completion", "bash"))
	fish := string(iotapOutput(t, "completion", "fish"))
	zsh := string(iotapOutput(t, "completion", "zsh"))
	if !strings.HasPrefix(zsh, "#compdef iotap") || !strings.Contains(zsh, "complete -o filenames -F _iotap iotap") {
		t.Errorf("zsh script lacks #compdef or the completion function:\n%.200s", zsh)
	}
	for _, c := range commandList() {
		if c.hidden {
			continue
		}
		if !strings.Contains(fish, " -a "+c.name+" ") {
			t.Errorf("fish: no command %s", c.name)
		}
		fs := newFlagSet(c)
		c.setup(fs)
		var line string
		for _, l := range strings.Split(bash, "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), c.name+") ") {
				line = l
			}
		}
		if line == "" {
			t.Errorf("bash: no case for %s", c.name)
			continue
		}
		words := strings.Fields(strings.Trim(strings.SplitN(line, "=", 2)[1], `" ;`))
		n := 0
		fs.VisitAll(func(f *pflag.Flag) {
			n++
			if !contains(words, "--"+f.Name) {
				t.Errorf("bash: %s lacks --%s", c.name, f.Name)
			}
			if !strings.Contains(fish, "__fish_seen_subcommand_from "+c.name+"' -l "+f.Name+" ") {
				t.Errorf("fish: %s lacks --%s", c.name, f.Name)
			}
		})
		if !contains(words, "--help") {
			t.Errorf("bash: %s lacks --help", c.name)
		}
	}
	if _, err := exec.LookPath("fish"); err == nil {
		if out, err := exec.Command("fish", "--no-execute", "-c", fish).CombinedOutput(); err != nil {
			t.Errorf("fish does not parse the script: %v\n%s", err, out)
		}
	}
}

// TestManPage renders iotap man with groff, warnings on, and finds every command and
// flag in the rendered page.
func TestManPage(t *testing.T) {
	testenv.Programs(t, testenv.FUSE, "groff") // Debian groff-base
	page := iotapOutput(t, "man")
	cmd := exec.Command("groff", "-man", "-Tutf8", "-ww", "-rLL=100n")
	cmd.Stdin = bytes.NewReader(page)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("groff: %v\n%s", err, stderr.String())
	}
	// groff marks bold and italic with backspaces in -Tutf8; drop them to read the text.
	text := regexp.MustCompile(".\b").ReplaceAllString(string(out), "")
	text = strings.ReplaceAll(text, "‐", "-")
	for _, c := range commandList() {
		if c.hidden {
			continue
		}
		if !strings.Contains(text, "iotap "+c.name+" ") && !strings.Contains(text, "iotap "+c.name+"\n") {
			t.Errorf("man page: no command %s", c.name)
		}
		fs := newFlagSet(c)
		c.setup(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			if !strings.Contains(text, "--"+f.Name) {
				t.Errorf("man page: no --%s (%s)", f.Name, c.name)
			}
		})
	}
	if !strings.Contains(text, "EXIT STATUS") || !strings.Contains(text, "127") {
		t.Errorf("man page: no exit status section")
	}
}

// TestScriptsOnAFullDevice: a completion script or manual page that cannot be written is
// an error, not a silent success.
func TestScriptsOnAFullDevice(t *testing.T) {
	if iotapBin == "" {
		t.Fatal("the iotap binary could not be built (see TestMain output)")
	}
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0) // Linux's always-full device
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = full.Close() }()
	for _, args := range [][]string{{"man"}, {"completion", "bash"}, {"completion", "zsh"}, {"completion", "fish"}} {
		cmd := exec.Command(iotapBin, args...)
		cmd.Stdout = full
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), "no space left on device") {
			t.Errorf("iotap %s onto /dev/full: %v, %q; want exit 1 naming the full device", strings.Join(args, " "), err, stderr.String())
		}
	}
}
