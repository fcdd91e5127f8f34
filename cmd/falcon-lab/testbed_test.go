package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// runTB runs 'falcon-lab testbed args...' and returns its stdout, its error and
// the exit status main would give it.
func runTB(t *testing.T, args ...string) (string, error, int) {
	t.Helper()
	var out bytes.Buffer
	testbedOut = &out
	t.Cleanup(func() { testbedOut = os.Stdout })
	err := runTestbed(args)
	return out.String(), err, cli.ExitCode(err)
}

func TestTestbedBadInput(t *testing.T) {
	labtest.NeedRoot(t)
	name := fmt.Sprintf("cli%d", os.Getpid())
	t.Cleanup(func() { testbed.Down(name) })
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{}, 2, "subcommand"},
		{[]string{"start"}, 2, "unknown subcommand"},
		{[]string{"up", "--layout", "weave", "--name", name}, 2, "unknown layout"},
		{[]string{"up", "--layout", "docker"}, 2, "required"},
		{[]string{"up", "--layout", "docker", "--name", "Bad_Name"}, 2, "lower-case"},
		{[]string{"up", "--layout", "docker", "--name", name, "--containers", "0"}, 2, "at least 1"},
		{[]string{"up", "--layout", "docker", "--name", name, "--containers", "1000"}, 2, "1..80"},
		{[]string{"up", "--layout", "docker", "--name", name, "extra"}, 2, "unexpected"},
		{[]string{"down"}, 2, "--name N or --all"},
		{[]string{"down", "--name", name, "--all"}, 2, "--name N or --all"},
		{[]string{"down", "--name", name}, 1, "no testbed"},
	} {
		_, err, code := runTB(t, c.args...)
		if code != c.code || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("testbed %q: exit %d, %v; want exit %d mentioning %q", c.args, code, err, c.code, c.msg)
		}
		if l := labtest.TestbedLeft(t, name); len(l) > 0 {
			t.Fatalf("testbed %q left %v", c.args, l)
		}
	}
	// A missing tool is named with its package, and nothing is made.
	t.Setenv("PATH", t.TempDir())
	_, err, code := runTB(t, "up", "--layout", "flannel", "--name", name)
	if code != 1 || err == nil || !strings.Contains(err.Error(), "install") {
		t.Errorf("up without tools: exit %d, %v", code, err)
	}
	if l := labtest.TestbedLeft(t, name); len(l) > 0 {
		t.Fatalf("up without tools left %v", l)
	}
}

func TestTestbedUpJSONListDown(t *testing.T) {
	labtest.NeedTestbeds(t)
	name := fmt.Sprintf("cli%d-ok", os.Getpid())
	t.Cleanup(func() { testbed.Down(name) })
	out, err, _ := runTB(t, "up", "--layout", "flannel", "--name", name, "--containers", "2", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var tb testbed.Testbed
	if err := json.Unmarshal([]byte(out), &tb); err != nil {
		t.Fatalf("up --json: %v\n%s", err, out)
	}
	if tb.Name != name || tb.Layout != "flannel" || len(tb.Hosts[1].Containers) != 2 || tb.Hosts[1].Containers[1].Netns != "fb-"+name+"-h2-c1" {
		t.Errorf("up --json printed %+v", tb)
	}

	// The same name again: refused, and the first testbed stays whole.
	if _, err, code := runTB(t, "up", "--layout", "host", "--name", name); code != 1 || !strings.Contains(err.Error(), "in use") {
		t.Errorf("up with a name in use: exit %d, %v", code, err)
	}
	out, err, _ = runTB(t, "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var list []testbed.Testbed
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	found := false
	for _, l := range list {
		found = found || (l.Name == name && l.Layout == "flannel" && len(l.Problems) == 0)
	}
	if !found {
		t.Errorf("list --json does not show %s whole:\n%s", name, out)
	}
	if out, _, _ := runTB(t, "list"); !strings.Contains(out, name) {
		t.Errorf("list does not show %s:\n%s", name, out)
	}

	if _, err, _ := runTB(t, "down", "--name", name); err != nil {
		t.Fatal(err)
	}
	if l := labtest.TestbedLeft(t, name); len(l) > 0 {
		t.Errorf("down left %v", l)
	}
}
