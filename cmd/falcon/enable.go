package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/cpuset"
)

func init() {
	register(command{name: "enable", summary: "accelerate a host's overlay (falcon: starts a background agent; rps, rfs: sets values, nothing runs)", run: runEnable})
}

const agentSynopsis = "[--netns HOSTNS] [--mode falcon|rps|rfs] [--cpus LIST] [--threshold PCT] [--interval DUR] " +
	"[--flowlet-gap DUR] [--order flowlet|per-packet] [--devices auto|LIST] [--container-level] [--rps-cpus LIST] [--flow-entries N] " +
	"[--split] [--split-cpus LIST] [--split-proto tcp|udp|all]"

// agentFlags are the settings enable and agent share. They are strings so
// that an empty value means the default: the Kubernetes DaemonSet passes
// every ConfigMap key, set or not.
type agentFlags struct {
	netns, mode, cpus, threshold, interval, flowletGap, order, devices string
	containerLevel, rpsCPUs, flowEntries, split, splitCPUs, splitProto string
}

func addAgentFlags(fs *flag.FlagSet) *agentFlags {
	f := &agentFlags{}
	fs.StringVar(&f.netns, "netns", "", "host network namespace to accelerate (name under /run/netns or a path; default: the current one)")
	fs.StringVar(&f.mode, "mode", "", "falcon: steer each stage with BPF (default); rps, rfs: the kernel's RPS/RFS, for comparison")
	fs.StringVar(&f.cpus, "cpus", "", "CPUs that may run the stages after the NIC, e.g. 0-3,6 (default: all online)")
	fs.StringVar(&f.threshold, "threshold", "", "busy percent at which a CPU takes no new flows and, on average over the CPUs, falcon steps aside (default 85)")
	fs.StringVar(&f.interval, "interval", "", "how often CPU load is sampled from /proc/stat (default 10ms)")
	fs.StringVar(&f.flowletGap, "flowlet-gap", "", "idle time after which a flow may move to another CPU without reordering (default 1ms)")
	fs.StringVar(&f.order, "order", "", "flowlet: keep each flow in order (default); per-packet: choose per packet as the paper did (may reorder)")
	fs.StringVar(&f.devices, "devices", "", "auto (default), or the VXLAN devices to accelerate, comma-separated, optionally with the NIC")
	fs.Var(optBool{&f.containerLevel}, "container-level", "rps/rfs modes: also set the containers' eth0, from the host side (the study's RPS+ and RFS+; true/false)")
	fs.StringVar(&f.rpsCPUs, "rps-cpus", "", "rps mode: the CPUs written to rps_cpus (default: all online, as the study); "+
		"rfs mode: also set rps_cpus, so that flows with no socket CPU yet get plain RPS (default: left alone, as the study)")
	fs.StringVar(&f.flowEntries, "flow-entries", "", "rfs mode: net.core.rps_sock_flow_entries, a power of two; each receive queue's "+
		"rps_flow_cnt gets this divided by its device's queue count (default 32768, as the study and the kernel's scaling.rst)")
	fs.Var(optBool{&f.split}, "split", "falcon mode: move the NIC stage (skb allocation, GRO from Linux 6.15, IP, UDP, VXLAN) off "+
		"the interrupt CPU with native XDP and a cpumap (true/false)")
	fs.StringVar(&f.splitCPUs, "split-cpus", "", "--split: the CPUs that may build the NIC stage's skbs (default: the --cpus set)")
	fs.StringVar(&f.splitProto, "split-proto", "", "--split: split only inner tcp or udp flows, or all (default)")
	return f
}

// optBool is a string flag that may also stand alone, as a boolean does:
// --container-level means true, --container-level=false false, and
// --container-level= (an empty ConfigMap key) the default.
type optBool struct{ s *string }

func (b optBool) String() string {
	if b.s == nil {
		return ""
	}
	return *b.s
}

func (b optBool) Set(v string) error { *b.s = v; return nil }

func (b optBool) IsBoolFlag() bool { return true }

// options turns the flags into agent options; bad syntax is a usage error.
func (f *agentFlags) options() (agent.Options, error) {
	o := agent.DefaultOptions()
	o.Netns = f.netns
	if f.mode != "" {
		o.Mode = f.mode
	}
	var err error
	cpuList := func(flag, s string) ([]int, error) {
		if s == "" {
			return nil, nil
		}
		cpus, err := cpuset.Parse(s)
		if err != nil {
			return nil, usagef("--%s: %v", flag, err)
		}
		return cpus, nil
	}
	if o.CPUs, err = cpuList("cpus", f.cpus); err != nil {
		return o, err
	}
	if o.RPSCPUs, err = cpuList("rps-cpus", f.rpsCPUs); err != nil {
		return o, err
	}
	if o.SplitCPUs, err = cpuList("split-cpus", f.splitCPUs); err != nil {
		return o, err
	}
	if f.threshold != "" {
		t, err := strconv.Atoi(strings.TrimSuffix(f.threshold, "%"))
		if err != nil {
			return o, usagef("--threshold %q: want a percentage 0..100", f.threshold)
		}
		if t < 0 || t > 100 {
			return o, usagef("--threshold %d: outside 0..100", t)
		}
		o.Threshold = t
	}
	dur := func(flag, s string, d *time.Duration) error {
		if s == "" {
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return usagef("--%s %q: want a duration such as 10ms", flag, s)
		}
		*d = v
		return nil
	}
	if err := dur("interval", f.interval, &o.Interval); err != nil {
		return o, err
	}
	if err := dur("flowlet-gap", f.flowletGap, &o.FlowletGap); err != nil {
		return o, err
	}
	switch f.order {
	case "", "flowlet":
	case "per-packet":
		o.PerPacket = true
	default:
		return o, usagef("--order %q: want flowlet or per-packet", f.order)
	}
	if f.devices != "" && f.devices != "auto" {
		for _, d := range strings.Split(f.devices, ",") {
			if d = strings.TrimSpace(d); d != "" {
				o.Devices = append(o.Devices, d)
			}
		}
	}
	boolean := func(flag, s string, b *bool) error {
		if s == "" {
			return nil
		}
		v, err := strconv.ParseBool(s)
		if err != nil {
			return usagef("--%s %q: want true or false", flag, s)
		}
		*b = v
		return nil
	}
	if err := boolean("container-level", f.containerLevel, &o.ContainerLevel); err != nil {
		return o, err
	}
	if err := boolean("split", f.split, &o.Split); err != nil {
		return o, err
	}
	switch f.splitProto {
	case "", "tcp", "udp", "all":
		o.SplitProto = f.splitProto
	default:
		return o, usagef("--split-proto %q: want tcp, udp or all", f.splitProto)
	}
	if f.flowEntries != "" {
		n, err := strconv.Atoi(f.flowEntries)
		if err != nil || n < 1 {
			return o, usagef("--flow-entries %q: want a power of two from 1 to %d (default %d; 0 would switch RFS off, which is 'falcon disable')",
				f.flowEntries, agent.MaxFlowEntries, agent.DefaultFlowEntries)
		}
		o.FlowEntries = n
	}
	return o, nil
}

// args renders the options back as agent flags, for the agent enable
// starts.
func agentArgs(o agent.Options) []string {
	a := []string{"--mode=" + o.Mode, "--cpus=" + cpuset.Format(o.CPUs),
		"--threshold=" + strconv.Itoa(o.Threshold), "--interval=" + o.Interval.String(),
		"--flowlet-gap=" + o.FlowletGap.String()}
	if o.Netns != "" {
		a = append(a, "--netns="+o.Netns)
	}
	if o.PerPacket {
		a = append(a, "--order=per-packet")
	}
	if len(o.Devices) > 0 {
		a = append(a, "--devices="+strings.Join(o.Devices, ","))
	}
	if o.ContainerLevel {
		a = append(a, "--container-level=true")
	}
	if o.RPSCPUs != nil {
		a = append(a, "--rps-cpus="+cpuset.Format(o.RPSCPUs))
	}
	if o.FlowEntries != 0 {
		a = append(a, "--flow-entries="+strconv.Itoa(o.FlowEntries))
	}
	if o.Split {
		a = append(a, "--split=true")
	}
	if o.SplitCPUs != nil {
		a = append(a, "--split-cpus="+cpuset.Format(o.SplitCPUs))
	}
	if o.SplitProto != "" {
		a = append(a, "--split-proto="+o.SplitProto)
	}
	return a
}

// enableTimeout bounds the wait for the agent to report.
const enableTimeout = 2 * time.Minute

func runEnable(args []string) error {
	fs := newFlagSet("enable", agentSynopsis)
	f := addAgentFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	// Checks that need no change to the system come first, here, so that
	// bad input never starts (or replaces) an agent.
	if err := agent.Check(&o); err != nil {
		return err
	}
	if agent.IsStatic(o.Mode) {
		return applyStatic(o)
	}
	st, err := agent.Running(o)
	if err != nil {
		return err
	}
	if st != nil {
		if st.Pid > 0 && agent.SameSettings(st.Options, o) {
			fmt.Printf("falcon is already enabled in network namespace %s with these settings (agent pid %d)\n", nsLabel(o.Netns), st.Pid)
			return nil
		}
		fmt.Printf("falcon is enabled in network namespace %s with other settings: replacing agent pid %d\n", nsLabel(o.Netns), st.Pid)
		if _, err := agent.Disable(o); err != nil {
			return fmt.Errorf("stop the running agent: %w", err)
		}
	}
	pid, logPath, err := spawnAgent(o)
	if err != nil {
		return err
	}
	fmt.Printf("falcon enabled in network namespace %s (mode %s, CPUs %s, threshold %d%%): agent pid %d, log %s\n",
		nsLabel(o.Netns), o.Mode, cpuset.Format(o.CPUs), o.Threshold, pid, logPath)
	return nil
}

// spawnAgent starts 'falcon agent' in a session of its own, with its
// output in the state directory's log, and waits until it reports on a pipe
// that it is ready, or why it is not.
func spawnAgent(o agent.Options) (int, string, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, "", err
	}
	dir, err := agent.StateDir(o)
	if err != nil {
		return 0, "", err
	}
	_, statErr := os.Stat(dir)
	newDir := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, "", err
	}
	logPath := filepath.Join(dir, agent.LogFile)
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
	cmd := exec.Command(exe, append([]string{"agent", "--ready-fd=3"}, agentArgs(o)...)...)
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
	case <-time.After(enableTimeout):
		cmd.Process.Signal(syscall.SIGTERM)
		return 0, "", fmt.Errorf("the agent did not get ready within %v; see %s", enableTimeout, logPath)
	}
	if report == "ready" {
		return cmd.Process.Pid, logPath, nil
	}
	// The agent failed and exits having undone what it did; wait for that.
	var werr error
	select {
	case werr = <-exited:
	case <-time.After(agent.StopTimeout):
	}
	if newDir {
		if st, _ := agent.Running(o); st == nil {
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

func nsLabel(ns string) string {
	if ns == "" {
		return "host (the current one)"
	}
	return ns
}
