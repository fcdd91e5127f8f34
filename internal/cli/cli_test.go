package cli

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestMainExitCodes(t *testing.T) {
	v := "v1"
	a := New("prog", &v, map[string]string{"far": "other"})
	a.Register(Command{Name: "ok", Summary: "works", Run: func([]string) error { return nil }})
	a.Register(Command{Name: "fail", Summary: "fails", Run: func([]string) error { return errors.New("broke") }})
	a.Register(Command{Name: "flags", Summary: "parses", Run: func(args []string) error {
		fs := a.FlagSet("flags", "[--n N]")
		fs.Int("n", 0, "a number")
		fs.SetOutput(io.Discard) // flag's own messages, not Main's
		return ParseFlags(fs, args)
	}})
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{nil, 2, "usage: prog <command>"},
		{[]string{"help"}, 0, "  ok        works\n"},
		{[]string{"help"}, 0, "\nfar are other's commands.\n"},
		{[]string{"ok"}, 0, ""},
		{[]string{"fail"}, 1, "prog fail: broke\n"},
		{[]string{"flags", "--n", "x"}, 2, `prog flags: invalid value "x" for flag -n`},
		{[]string{"flags", "stray"}, 2, `prog flags: unexpected argument "stray"`},
		{[]string{"flags", "-h"}, 0, ""},
		{[]string{"far", "-x"}, 2, "prog: far is a command of other: run 'other far -x'\n"},
		{[]string{"nope"}, 2, `prog: unknown command "nope"`},
		{[]string{"version", "x"}, 2, `prog version: unexpected argument "x"`},
	} {
		var out bytes.Buffer
		code := a.Main(c.args, &out)
		if code != c.code || !strings.Contains(out.String(), c.out) {
			t.Errorf("prog %q: exit %d, %q; want exit %d and %q", c.args, code, out.String(), c.code, c.out)
		}
	}
}

func TestExitCode(t *testing.T) {
	for err, want := range map[error]int{
		nil:                                    0,
		errors.New("x"):                        1,
		Usagef("bad %d", 1):                    2,
		fmt.Errorf("wrapped: %w", Usagef("b")): 2,
	} {
		if got := ExitCode(err); got != want {
			t.Errorf("ExitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
