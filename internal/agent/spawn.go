package agent

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Starting an agent in the background (falcon enable) and its readiness
// protocol: the agent writes one line on a pipe, "ready" or "error: why".

// SpawnTimeout bounds the wait for a spawned agent to report.
const SpawnTimeout = 2 * time.Minute

// Spawn starts argv (the foreground agent, e.g. "falcon agent") with o's
// flags and a ready pipe as file descriptor 3 (--ready-fd=3), in a session
// of its own with its output in the state directory's log, and waits until
// it reports that it is ready, or why it is not. It returns the agent's
// pid and log.
func Spawn(o Options, argv ...string) (int, string, error) {
	dir, err := StateDir(o)
	if err != nil {
		return 0, "", err
	}
	_, statErr := os.Stat(dir)
	newDir := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, "", err
	}
	logPath := filepath.Join(dir, LogFile)
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return 0, "", err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	cmd := exec.Command(argv[0], append(append(argv[1:], "--ready-fd=3"), Args(o)...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{w}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.Dir = "/"
	if err := cmd.Start(); err != nil {
		w.Close()
		return 0, "", fmt.Errorf("start agent: %w", err)
	}
	w.Close()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	msg := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		msg <- strings.TrimSpace(line)
	}()
	var report string
	select {
	case report = <-msg:
	case <-time.After(SpawnTimeout):
		cmd.Process.Signal(syscall.SIGTERM)
		return 0, "", fmt.Errorf("the agent did not get ready within %v; see %s", SpawnTimeout, logPath)
	}
	if report == "ready" {
		return cmd.Process.Pid, logPath, nil
	}
	// The agent failed and exits having undone what it did; wait for that.
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(StopTimeout):
	}
	if newDir {
		if st, _ := Running(o); st == nil {
			if _, err := os.Stat(filepath.Join(dir, "state.json")); errors.Is(err, os.ErrNotExist) {
				os.RemoveAll(dir) // it only held the log; leave no trace
			}
		}
	}
	if msg, ok := strings.CutPrefix(report, "error: "); ok {
		return 0, "", errors.New(msg)
	}
	return 0, "", fmt.Errorf("the agent exited (%v) without reporting; its log:\n%s", werr, tail(logPath, 20))
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	defer f.Close()
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// ReadyPipe is the agent's end of Spawn's pipe; a nil one (no --ready-fd)
// reports nothing.
type ReadyPipe struct{ f *os.File }

// OpenReadyPipe takes file descriptor fd; fd < 0 means none.
func OpenReadyPipe(fd int) *ReadyPipe {
	if fd < 0 {
		return nil
	}
	return &ReadyPipe{os.NewFile(uintptr(fd), "ready")}
}

// Report tells Spawn that the agent is ready (err nil) or why it failed,
// once; later reports are dropped.
func (p *ReadyPipe) Report(err error) {
	if p == nil || p.f == nil {
		return
	}
	msg := "ready"
	if err != nil {
		msg = "error: " + strings.ReplaceAll(err.Error(), "\n", "; ")
	}
	fmt.Fprintln(p.f, msg)
	p.f.Close()
	p.f = nil
}

// Close reports nothing more.
func (p *ReadyPipe) Close() {
	if p != nil && p.f != nil {
		p.f.Close()
		p.f = nil
	}
}

// RunReporting is Run for a spawned agent: it reports readiness, or the
// failure, on p. started (nil: none) gets the agent once it is ready.
func RunReporting(ctx context.Context, o Options, p *ReadyPipe, started func(*Agent)) error {
	err := Run(ctx, o, func(a *Agent) {
		if started != nil {
			started(a)
		}
		o.log().Info("ready")
		p.Report(nil)
	})
	if err != nil {
		p.Report(err)
		o.log().Error("agent failed", "err", err)
	}
	return err
}
