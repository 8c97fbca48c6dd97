package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/iotap/iotap/internal/recorder"
	"github.com/iotap/iotap/replay/campaign"
)

func TestRunDispatch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		args       []string
		code       int
		stdout     string // substring expected on stdout
		stderr     string // substring expected on stderr
		notCommand string // a hidden command that must not be listed
	}{
		{name: "no args", args: nil, code: exitUsage, stdout: "Commands:"},
		{name: "help", args: []string{"--help"}, code: exitOK, stdout: "Exit codes:"},
		{name: "help lists commands", args: []string{"help"}, code: exitOK, stdout: "record"},
		{name: "help of a command", args: []string{"help", "report"}, code: exitOK, stdout: "--format"},
		{name: "command --help", args: []string{"replay", "--help"}, code: exitOK, stdout: "--timing"},
		{name: "version", args: []string{"version"}, code: exitOK, stdout: "iotap "},
		{name: "unknown command", args: []string{"frobnicate"}, code: exitUsage, stderr: `unknown command "frobnicate"`},
		{name: "unknown flag", args: []string{"report", "--bogus"}, code: exitUsage, stderr: "unknown flag: --bogus"},
		{name: "missing trace", args: []string{"info", "/nonexistent/x.iotap"}, code: exitError, stderr: "does not exist"},
		{name: "no trace given", args: []string{"report"}, code: exitUsage, stderr: "no trace given"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, strings.NewReader(""), &out, &errb)
			if code != tc.code {
				t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tc.code, out.String(), errb.String())
			}
			if !strings.Contains(out.String(), tc.stdout) {
				t.Errorf("stdout lacks %q:\n%s", tc.stdout, out.String())
			}
			if !strings.Contains(errb.String(), tc.stderr) {
				t.Errorf("stderr lacks %q:\n%s", tc.stderr, errb.String())
			}
		})
	}
}

func TestExitCodeMapping(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		code int
	}{
		{"nil", nil, exitOK},
		{"job exit code", &exitCodeError{code: 42}, 42},
		{"command not found", fmt.Errorf("start: %w", &exitCodeError{code: exitNotFound, err: errors.New("no such command")}), exitNotFound},
		{"usage", usageErrorf("bad %s", "flag"), exitUsage},
		{"damaged", fmt.Errorf("%w: a.iotap", errDamaged), exitDamaged},
		{"campaign usage", fmt.Errorf("%w: --repeat 0", campaign.ErrUsage), exitUsage},
		{"campaign on a damaged trace", errors.Join(fmt.Errorf("%w: a.iotap", campaign.ErrDamaged), fmt.Errorf("%w: b", errDropped)), exitDamaged},
		{"other", errors.New("disk on fire"), exitError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := exitCode(io.Discard, "test", tc.err); got != tc.code {
				t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.code)
			}
		})
	}
}

// TestCommandList: every subcommand has a unique name, a summary and a usage line, binds its
// flags without conflict, and --help lists exactly the ones that are not hidden.
func TestCommandList(t *testing.T) {
	var help bytes.Buffer
	run(context.Background(), []string{"help"}, strings.NewReader(""), &help, io.Discard)
	seen := map[string]bool{}
	for _, c := range commandList() {
		if seen[c.name] {
			t.Errorf("command %q listed twice", c.name)
		}
		seen[c.name] = true
		if c.summary == "" || c.usage == "" || c.setup == nil {
			t.Errorf("command %q lacks a summary, usage or setup", c.name)
		}
		if c.setup(newFlagSet(c)) == nil {
			t.Errorf("command %q: setup returned no run function", c.name)
		}
		if listed := strings.Contains(help.String(), "\n  "+c.name+" "); listed == c.hidden {
			t.Errorf("command %q: hidden %v, listed in help %v", c.name, c.hidden, listed)
		}
	}
	for _, want := range []string{"record", "mount", "unmount", "report", "compare", "replay", "info", "export", recorder.ChildCommand, recorder.ProbeCommand} {
		if !seen[want] {
			t.Errorf("command %q missing", want)
		}
	}
}
