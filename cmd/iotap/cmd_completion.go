package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// completionCommands returns the completion and man subcommands: shell completion and a
// manual page, both made from the commands and flags this binary has.
func completionCommands() []*command {
	return []*command{
		{
			name:    "completion",
			summary: "print a shell completion script: source <(iotap completion bash), or zsh, or fish",
			usage:   "bash|zsh|fish",
			setup:   withoutOptions(runCompletion),
		},
		{
			name:    "man",
			summary: "print the manual page (roff): iotap man | man -l -",
			usage:   "(no arguments)",
			setup:   withoutOptions(runMan),
		},
	}
}

// cmdFlags is a command with its flags, as completion and the manual page list them.
type cmdFlags struct {
	c     *command
	flags []*pflag.Flag
}

// visibleCommands returns the commands --help lists, sorted by name, with their flags in
// the order they were added.
func visibleCommands() []cmdFlags {
	var out []cmdFlags
	for _, c := range commandList() {
		if c.hidden {
			continue
		}
		fs := newFlagSet(c)
		c.setup(fs)
		cf := cmdFlags{c: c}
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				cf.flags = append(cf.flags, f)
			}
		})
		out = append(out, cf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].c.name < out[j].c.name })
	return out
}

// flagWords returns a flag's spellings: --name, and -x when it has a shorthand.
func flagWords(f *pflag.Flag) []string {
	w := []string{"--" + f.Name}
	if f.Shorthand != "" {
		w = append(w, "-"+f.Shorthand)
	}
	return w
}

func runCompletion(_ context.Context, e *env, args []string) error {
	if len(args) != 1 {
		return usageErrorf("want one shell: bash, zsh or fish")
	}
	cmds := visibleCommands()
	var b bytes.Buffer
	switch args[0] {
	case "bash":
		writeBash(&b, cmds, false)
	case "zsh":
		writeBash(&b, cmds, true)
	case "fish":
		writeFish(&b, cmds)
	default:
		return usageErrorf("shell %q: want bash, zsh or fish", args[0])
	}
	return writeAll(e.stdout, b.Bytes())
}

// writeAll writes b to w, saying so when it could not (a full disk, a closed pipe).
func writeAll(w io.Writer, b []byte) error {
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("write output: %w", err)
	}
	return nil
}

// writeBash writes a bash completion function (for zsh, with bashcompinit first): the
// commands after iotap, each command's flags after it, file names elsewhere.
func writeBash(w io.Writer, cmds []cmdFlags, zsh bool) {
	if zsh {
		_, _ = fmt.Fprintln(w, "#compdef iotap\nautoload -U +X bashcompinit && bashcompinit")
	}
	var names []string
	for _, c := range cmds {
		names = append(names, c.c.name)
	}
	_, _ = fmt.Fprintf(w, `# iotap completion (iotap completion bash)
_iotap() {
	local cur=${COMP_WORDS[COMP_CWORD]} flags=""
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W "%s --help --version" -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, c := range cmds {
		var words []string
		for _, f := range c.flags {
			words = append(words, flagWords(f)...)
		}
		_, _ = fmt.Fprintf(w, "\t%s) flags=%q ;;\n", c.c.name, strings.Join(append(words, "--help"), " "))
	}
	_, _ = fmt.Fprint(w, `	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	else
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o filenames -F _iotap iotap
`)
}

// writeFish writes fish completions: the commands with their summaries, and each
// command's flags with their help.
func writeFish(w io.Writer, cmds []cmdFlags) {
	_, _ = fmt.Fprintln(w, "# iotap completion (iotap completion fish)")
	for _, c := range cmds {
		_, _ = fmt.Fprintf(w, "complete -c iotap -n __fish_use_subcommand -f -a %s -d %s\n", c.c.name, fishQuote(c.c.summary))
	}
	for _, c := range cmds {
		for _, f := range c.flags {
			line := fmt.Sprintf("complete -c iotap -n '__fish_seen_subcommand_from %s' -l %s", c.c.name, f.Name)
			if f.Shorthand != "" {
				line += " -s " + f.Shorthand
			}
			if f.Value.Type() != "bool" {
				line += " -r"
			}
			_, _ = fmt.Fprintf(w, "%s -d %s\n", line, fishQuote(firstSentence(f.Usage)))
		}
	}
}

func fishQuote(s string) string {
	return "'" + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), "'", `\'`) + "'"
}

// firstSentence returns usage text up to its first colon or sentence end, without the
// backquotes pflag uses to name the argument.
func firstSentence(s string) string {
	s = strings.ReplaceAll(s, "`", "")
	if i := strings.IndexAny(s, ";:("); i > 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}

func runMan(_ context.Context, e *env, args []string) error {
	if len(args) != 0 {
		return usageErrorf("man takes no arguments")
	}
	var b bytes.Buffer
	writeMan(&b, visibleCommands(), time.Now())
	return writeAll(e.stdout, b.Bytes())
}

// writeMan writes a manual page in roff (man(7) macros): every command with its usage,
// summary and flags, and the exit codes.
func writeMan(w io.Writer, cmds []cmdFlags, now time.Time) {
	esc := func(s string) string {
		s = strings.ReplaceAll(s, `\`, `\e`)
		s = strings.ReplaceAll(s, "`", "")
		s = strings.ReplaceAll(s, "-", `\-`)
		s = strings.ReplaceAll(s, ",", `,\:`)
		if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
			s = `\&` + s
		}
		return s
	}
	_, _ = fmt.Fprintf(w, ".TH IOTAP 1 %q %q \"iotap manual\"\n", now.UTC().Format("2006-01-02"), "iotap "+version)
	_, _ = fmt.Fprintln(w, ".ad l")
	_, _ = fmt.Fprintln(w, ".SH NAME\niotap \\- record a job's filesystem I/O, report its latencies, replay it on other storage")
	_, _ = fmt.Fprintln(w, ".SH SYNOPSIS\n.B iotap\n.I command\n[\\fIflags\\fR] [\\fIargs\\fR]")
	_, _ = fmt.Fprintln(w, ".SH DESCRIPTION\niotap mounts a passthrough FUSE layer over the directory a job uses, times every")
	_, _ = fmt.Fprintln(w, "filesystem operation while the job runs, reports latency distributions per system call,")
	_, _ = fmt.Fprintln(w, "and replays the same work on other storage to compare backends on the work the job does.")
	_, _ = fmt.Fprintln(w, ".SH COMMANDS")
	for _, c := range cmds {
		_, _ = fmt.Fprintf(w, ".SS \"iotap %s %s\"\n%s\n", c.c.name, esc(c.c.usage), esc(c.c.summary))
		for _, f := range c.flags {
			name, usage := pflag.UnquoteUsage(f)
			spell := "\\-\\-" + esc(f.Name)
			if f.Shorthand != "" {
				spell = "\\-" + esc(f.Shorthand) + ", " + spell
			}
			if name != "" {
				spell += " \\fI" + esc(name) + "\\fR"
			}
			_, _ = fmt.Fprintf(w, ".TP\n%s\n%s\n", spell, esc(usage))
		}
	}
	_, _ = fmt.Fprintln(w, ".SH EXIT STATUS\n.nf")
	for _, l := range strings.Split(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(exitCodesHelp), "Exit codes:")), "\n") {
		_, _ = fmt.Fprintln(w, esc(strings.TrimSpace(l)))
	}
	_, _ = fmt.Fprintln(w, ".fi\n.SH SEE ALSO\nThe manual, docs/manual.md in iotap's source.")
}
