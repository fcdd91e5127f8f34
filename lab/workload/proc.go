// Package workload runs the traffic tools bench measures with (iperf3,
// sockperf, memcached and memcaslap, nginx and wrk) inside network
// namespaces, pinned to CPUs, and parses what they report. Every process
// runs in its own process group, which is killed when its context ends or
// it is stopped, so nothing outlives a run. It also holds bench's catalogue
// of workloads (kinds.go: each one's tool, sizes and dimensions, the metric
// it is judged by) and the sizes and rates they are given in.
package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/procfs"
)

// Server is a traffic sink running in the background.
type Server interface {
	// Stop kills the server and waits for it to exit. It reports an error
	// only when the server had died by itself before.
	Stop() error
}

// tailBuffer keeps the last max bytes written to it: enough of a
// long-lived server's output to explain its death, without growing.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// proc is one started tool.
type proc struct {
	name     string
	cmd      *exec.Cmd
	done     chan struct{} // closed once the process has been reaped
	waitErr  error
	stopping chan struct{}
	stopOnce sync.Once
}

// command builds "ip netns exec NS taskset -c CPUS tool args...". Both
// wrappers exec the next program, so the pid is the tool's own (the
// bundle's loader wrapper execs too). tool is the bundle's copy when it
// carries one: the wrappers would otherwise search PATH for the host's.
func command(ns string, cpus []int, tool string, args ...string) []string {
	var argv []string
	if ns != "" {
		argv = append(argv, "ip", "netns", "exec", ns)
	}
	if len(cpus) > 0 {
		argv = append(argv, "taskset", "-c", cpuset.Format(cpus))
	}
	return append(append(argv, toolArg(tool)), args...)
}

// checkCommon validates what every run needs, before anything starts.
func checkCommon(tool, ns string, cpus []int) error {
	tools := []string{tool}
	if ns != "" {
		tools = append(tools, "ip")
	}
	if len(cpus) > 0 {
		tools = append(tools, "taskset")
	}
	if err := CheckTools(tools...); err != nil {
		return err
	}
	if err := netns.Check(ns); err != nil {
		return err
	}
	if len(cpus) == 0 {
		return nil
	}
	st, err := procfs.ReadStat()
	if err != nil {
		return err
	}
	for _, c := range cpus {
		if _, ok := st.CPU[c]; !ok {
			return fmt.Errorf("CPU %d is not online (this machine has %d CPUs online)", c, len(st.CPU))
		}
	}
	return nil
}

// start runs argv in its own process group and kills the group when ctx
// ends. stdout and stderr may be the same writer.
func start(ctx context.Context, name string, argv []string, stdout, stderr interface{ Write([]byte) (int, error) }) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Pdeathsig covers falcon itself being killed: the kernel then kills
	// the tool, which no deferred cleanup could. It fires when the forking
	// OS thread exits, so every tool is forked on the spawner thread,
	// which never does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 2 * time.Second
	var err error
	onSpawner(func() { err = cmd.Start() })
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{}), stopping: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			p.kill()
		case <-p.stopping:
		case <-p.done:
		}
	}()
	return p, nil
}

// interrupt asks the process group to finish (SIGINT, on which the tools
// print their totals) and kills it if it has not after grace.
func (p *proc) interrupt(grace time.Duration) {
	if !p.exited() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGINT)
		select {
		case <-p.done:
		case <-time.After(grace):
		}
	}
	p.kill()
}

// kill sends SIGKILL to the whole process group and waits for the reap.
func (p *proc) kill() {
	p.stopOnce.Do(func() { close(p.stopping) })
	select {
	case <-p.done:
		return
	default:
	}
	// The group id is the pid (Setpgid); once reaped, the pid may be reused,
	// which is why this only runs before done is closed.
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// run starts argv and waits for it, killing it when ctx ends.
func run(ctx context.Context, name string, argv []string) (stdout, stderr []byte, err error) {
	var o, e bytes.Buffer
	p, err := start(ctx, name, argv, &o, &e)
	if err != nil {
		return nil, nil, err
	}
	select {
	case <-p.done:
	case <-ctx.Done():
		p.kill()
	}
	if ctx.Err() != nil {
		return o.Bytes(), e.Bytes(), fmt.Errorf("%s: %w", name, ctx.Err())
	}
	return o.Bytes(), e.Bytes(), p.waitErr
}

// client is one run of a client tool to its end, and how to read what it
// printed.
type client[R any] struct {
	tool, ns string
	cpus     []int
	d        time.Duration // the run's length, which the timeout allows for
	args     []string
	parse    func(stdout, stderr []byte) (R, error)
	// failed explains a run that exited with an error and printed nothing
	// parse could read, from the tool's last words; "" keeps parse's error.
	failed func(stdout, stderr []byte) string
}

// runClient runs c pinned in its namespace: the clients' shared shape. The
// tool is killed when ctx ends, and at the latest 30 s after its run should
// have finished.
func runClient[R any](ctx context.Context, c client[R]) (R, error) {
	var zero R
	if err := checkCommon(c.tool, c.ns, c.cpus); err != nil {
		return zero, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(seconds(c.d))*time.Second+30*time.Second)
	defer cancel()
	stdout, stderr, err := run(ctx, c.tool, command(c.ns, c.cpus, c.tool, c.args...))
	if ctx.Err() != nil {
		return zero, err
	}
	res, perr := c.parse(stdout, stderr)
	if perr != nil {
		if why := c.failed(stdout, stderr); err != nil && why != "" {
			return zero, fmt.Errorf("%s: %v: %s", c.tool, err, why)
		}
		return zero, perr
	}
	return res, nil
}

// server is a background proc that must keep running until Stop.
type server struct {
	p   *proc
	out *tailBuffer
}

func (s *server) Stop() error {
	select {
	case <-s.p.stopping:
		return nil // stopped before, or killed with its context
	default:
	}
	died := s.p.exited()
	s.p.interrupt(2 * time.Second)
	if died {
		return fmt.Errorf("%s exited by itself (%v): %s", s.p.name, s.p.waitErr, lastLines(s.out.String(), 5))
	}
	return nil
}

// startServer starts a server and returns once it has bound port, or an
// error (with the server's last words) if it dies or takes too long.
func startServer(ctx context.Context, name, ns string, proto string, port int, argv []string) (*server, error) {
	if used, err := portBound(ns, proto, port); err != nil {
		return nil, err
	} else if used {
		return nil, fmt.Errorf("%s: %s port %d is already in use in network namespace %q", name, proto, port, ns)
	}
	out := &tailBuffer{max: 16 << 10}
	p, err := start(ctx, name, argv, out, out)
	if err != nil {
		return nil, err
	}
	s := &server{p: p, out: out}
	deadline := time.Now().Add(10 * time.Second)
	for {
		bound, err := portBound(ns, proto, port)
		if err != nil {
			p.kill()
			return nil, err
		}
		if bound {
			return s, nil
		}
		if p.exited() {
			return nil, fmt.Errorf("%s exited before listening on %s port %d (%v): %s", name, proto, port, p.waitErr, lastLines(out.String(), 5))
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			p.kill()
			if ctx.Err() != nil {
				return nil, fmt.Errorf("%s: %w", name, ctx.Err())
			}
			return nil, fmt.Errorf("%s did not listen on %s port %d within 10s: %s", name, proto, port, lastLines(out.String(), 5))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// portBound reports whether a socket of proto ("tcp": listening, "udp":
// bound) holds port in namespace ns, from /proc/net/{tcp,udp}{,6}.
func portBound(ns, proto string, port int) (bool, error) {
	for _, file := range []string{proto, proto + "6"} {
		b, err := netns.ReadProcNet(ns, file)
		if err != nil {
			if errors.Is(err, syscall.ENOENT) && file == proto+"6" {
				continue // no IPv6
			}
			return false, fmt.Errorf("read /proc/net/%s in network namespace %q: %w", file, ns, err)
		}
		if socketOnPort(b, proto == "tcp", port) {
			return true, nil
		}
	}
	return false, nil
}

// socketOnPort scans a /proc/net/{tcp,udp} table ("sl local_address
// rem_address st ...", addresses as HEXIP:HEXPORT).
func socketOnPort(table []byte, listenOnly bool, port int) bool {
	want := fmt.Sprintf(":%04X", port)
	for _, line := range strings.Split(string(table), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasSuffix(f[1], want) {
			continue
		}
		if !listenOnly || f[3] == "0A" { // TCP_LISTEN
			return true
		}
	}
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// seconds turns a duration into the whole seconds both tools take,
// rounding up so a run is never shorter than asked.
func seconds(d time.Duration) int {
	s := int((d + time.Second - 1) / time.Second)
	return max(s, 1)
}

// The spawner: one OS thread, locked and never released, that forks every
// tool. Go hands a goroutine any thread, and code that switches a thread's
// network or mount namespace lets the thread exit afterwards (netns,
// journal); a tool forked on a thread that later exits gets its Pdeathsig.
// That killed iperf3 and sockperf mid-run when an in-process agent (bench)
// restored values in a container's namespace while they ran.
var (
	spawnOnce sync.Once
	spawnReq  chan func()
)

func onSpawner(fn func()) {
	spawnOnce.Do(func() {
		spawnReq = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range spawnReq {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnReq <- func() { fn(); close(done) }
	<-done
}
