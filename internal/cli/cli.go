// Package cli is the command line that falcon's two binaries share: falcon,
// the node product, and falcon-lab, the lab's benches and testbeds. Each
// registers its subcommands with an App; the App parses, runs and reports
// them the same way in both, exit codes included.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"sort"
	"strings"
)

// LabCommands are falcon-lab's commands, which falcon points to when it is
// asked for one (they were falcon's until the lab got a binary of its
// own); NodeCommands are falcon's, which falcon-lab points to. Each
// binary's test checks that its list is what it registers.
var (
	LabCommands  = []string{"bench", "report", "sim", "testbed", "trace"}
	NodeCommands = []string{"agent", "disable", "doctor", "enable", "status", "top"}
)

// Elsewhere maps each of cmds to the binary bin, for New.
func Elsewhere(bin string, cmds []string) map[string]string {
	m := map[string]string{}
	for _, c := range cmds {
		m[c] = bin
	}
	return m
}

// Command is one subcommand. Each lives in its own file and registers
// itself from init, so adding a subcommand never touches main.
type Command struct {
	Name    string
	Summary string
	Run     func(args []string) error
}

// App is one binary's set of commands.
type App struct {
	name string
	// elsewhere maps a command this binary lacks to the binary that has it.
	elsewhere map[string]string
	commands  map[string]Command
}

// New returns the App of the binary name, with a version command that
// prints *version, stamped first (Stamped) when the link left it "dev".
// elsewhere lists commands that another binary has, by name.
func New(name string, version *string, elsewhere map[string]string) *App {
	*version = Stamped(*version)
	a := &App{name: name, elsewhere: elsewhere, commands: map[string]Command{}}
	a.Register(Command{Name: "version", Summary: "print the version", Run: func(args []string) error {
		if len(args) > 0 {
			return Usagef("unexpected argument %q", args[0])
		}
		fmt.Println(name, *version)
		return nil
	}})
	return a
}

// Register adds a command.
func (a *App) Register(c Command) { a.commands[c.Name] = c }

// Names are the registered commands' names, sorted.
func (a *App) Names() []string {
	names := make([]string, 0, len(a.commands))
	for n := range a.commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func (a *App) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s <command> [flags]\n\ncommands:\n", a.name)
	for _, n := range a.Names() {
		fmt.Fprintf(w, "  %-9s %s\n", n, a.commands[n].Summary)
	}
	byBin := map[string][]string{}
	for c, bin := range a.elsewhere {
		byBin[bin] = append(byBin[bin], c)
	}
	for bin, cs := range byBin {
		sort.Strings(cs)
		fmt.Fprintf(w, "\n%s are %s's commands.", strings.Join(cs, ", "), bin)
	}
	fmt.Fprintf(w, "\nRun '%s <command> -h' for a command's flags.\n", a.name)
}

// Main runs the command args name and returns the exit status: 0, 1 for
// a failure, 2 for a bad command line (flag's own convention).
func (a *App) Main(args []string, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		a.usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	c, ok := a.commands[args[0]]
	if !ok {
		if bin, ok := a.elsewhere[args[0]]; ok {
			fmt.Fprintf(stderr, "%s: %s is a command of %s: run '%s %s'\n", a.name, args[0], bin, bin, strings.Join(args, " "))
			return 2
		}
		fmt.Fprintf(stderr, "%s: unknown command %q\n", a.name, args[0])
		a.usage(stderr)
		return 2
	}
	err := c.Run(args[1:])
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return 0
	}
	fmt.Fprintf(stderr, "%s %s: %s\n", a.name, c.Name, strings.TrimSpace(err.Error()))
	return ExitCode(err)
}

// FlagSet returns a flag set whose parse errors are returned, not fatal,
// so every command reports them the same way.
func (a *App) FlagSet(name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet(a.name+" "+name, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s %s %s\n", a.name, name, args)
		fs.PrintDefaults()
	}
	return fs
}

// UsageError marks errors caused by the command line rather than the
// system; they exit with status 2, like flag's own errors.
type UsageError struct{ Msg string }

func (e UsageError) Error() string { return e.Msg }

// Usagef is a UsageError.
func Usagef(format string, a ...any) error { return UsageError{fmt.Sprintf(format, a...)} }

// ExitCode is the status a command's error exits with.
func ExitCode(err error) int {
	var ue UsageError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ue):
		return 2
	}
	return 1
}

// ParseFlags parses args and rejects stray positional arguments.
func ParseFlags(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return UsageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return Usagef("unexpected argument %q", fs.Arg(0))
	}
	return nil
}

// Stamped is version, or when that is "dev" (a binary built without the
// Makefile's -X, by go build or go install) the commit the go command
// stamped into the binary, short, with "-dirty" for a modified tree, so
// that a results file never records a bare "dev"; "dev" when there is none
// (go run and go test do not stamp it).
func Stamped(version string) string {
	if version != "dev" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if len(rev) < 7 {
		return "dev"
	}
	return rev[:7] + dirty
}
