package main

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// An agent whose log reader is gone is not killed by SIGPIPE: it gets an
// error from the write and goes on (here, to its exit for bad input, exit
// 1, which a death by the signal would never reach).
func TestAgentSurvivesDeadLogReader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds falcon")
	}
	bin := buildFalcon(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	defer w.Close()
	cmd := exec.Command(bin, "agent", "--netns", "fct-no-such-netns")
	cmd.Stdout, cmd.Stderr = w, w
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("falcon agent: %v; want exit 1", err)
	}
	if ws := ee.Sys().(syscall.WaitStatus); ws.Signaled() || ws.ExitStatus() != 1 {
		t.Errorf("falcon agent with its log reader gone: %v; want exit 1, not death by %v", err, ws.Signal())
	}
}
