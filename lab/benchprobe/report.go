// Package benchprobe answers: can this machine run 'falcon-lab bench' (the benchmark
// bundle's run.sh asks before anything else)? Unlike doctor, it needs no
// overlay: it tries what the testbeds and modes will do, in a scratch
// network namespace, and lists what is missing. The checks that decide are
// here and take a Prober, so that tests can hand in any machine, a gVisor
// sandbox included. DescribeMachine (describe.go) records the machine a
// bench ran on in its results file.
package benchprobe

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Features the bench probe looks for, in the order they are reported.
const (
	FeatRoot         = "root"
	FeatKernel       = "kernel"
	FeatNetns        = "netns"
	FeatVeth         = "veth"
	FeatVXLAN        = "vxlan"
	FeatBridge       = "bridge"
	FeatBPFSyscall   = "bpf-syscall"
	FeatBPFLoad      = "bpf-load"
	FeatTC           = "tc-attach"
	FeatXDP          = "xdp"
	FeatThreadedNAPI = "threaded-napi"
	FeatKernelSender = "kernel-sender"
	FeatTracefs      = "tracefs"
	FeatCPUs         = "cpus"
	// FeatTool + name: a tool the run starts (FeatTool+"iperf3").
	FeatTool = "tool:"
)

type benchFeature struct {
	id, what string
	deps     []string // probed only when these work
}

var benchFeatures = []benchFeature{
	{FeatRoot, "root", nil},
	{FeatKernel, "a real Linux kernel, 4.18 or newer", nil},
	{FeatNetns, "network namespaces (ip netns add)", []string{FeatRoot}},
	{FeatVeth, "veth pairs", []string{FeatNetns}},
	{FeatVXLAN, "VXLAN devices", []string{FeatNetns}},
	{FeatBridge, "bridges", []string{FeatNetns}},
	{FeatBPFSyscall, "the bpf() syscall", []string{FeatRoot}},
	{FeatBPFLoad, "loading falcon's tc programs (SCHED_CLS, bpf_set_hash, its maps)", []string{FeatBPFSyscall}},
	{FeatTC, "attaching tc programs (tcx, or clsact before Linux 6.6)", []string{FeatBPFLoad, FeatVeth}},
	{FeatXDP, "native XDP on a veth and a cpumap (falcon+split)", []string{FeatBPFLoad, FeatVeth}},
	{FeatThreadedNAPI, "threaded NAPI on a veth (--nic-cpu)", []string{FeatVeth}},
	{FeatKernelSender, "XDP live frames out of a veth (--sender kernel, Linux 5.18)", []string{FeatBPFSyscall, FeatVeth}},
	{FeatTracefs, "tracefs (only falcon-lab trace uses it)", nil},
}

func featureWhat(id string) string {
	for _, f := range benchFeatures {
		if f.id == id {
			return f.what
		}
	}
	return id
}

// BenchNeeds is what one bench configuration uses.
type BenchNeeds struct {
	VXLAN, Bridge, BPF, XDP, ThreadedNAPI, KernelSender bool
	// Tools are the programs it starts (iperf3, sockperf, ip, …).
	Tools []string
	// CPUs is why the configuration cannot run on this machine's CPUs
	// (the scale preset on fewer than 8), "" when it can.
	CPUs string
}

func (n BenchNeeds) needs(id string) bool {
	switch id {
	case FeatRoot, FeatKernel, FeatNetns, FeatVeth:
		return true
	case FeatVXLAN:
		return n.VXLAN
	case FeatBridge:
		return n.Bridge
	case FeatBPFSyscall, FeatBPFLoad, FeatTC:
		return n.BPF
	case FeatXDP:
		return n.XDP
	case FeatThreadedNAPI:
		return n.ThreadedNAPI
	case FeatKernelSender:
		return n.KernelSender
	}
	return false
}

// Prober tries one feature on the machine: a short note on what it found
// when the feature works, else an error saying why it does not.
type Prober interface {
	Probe(id string) (note string, err error)
	// Kernel is the release the kernel reports; CPUs the online CPUs.
	Kernel() string
	CPUs() int
	// ToolsDir is the bundle's tool directory, "" for PATH only.
	ToolsDir() string
}

// Probe states.
const (
	ProbeOK      = "ok"
	ProbeMissing = "MISSING"
	ProbeUntried = "untried" // a feature it depends on is missing
)

// BenchItem is one probed feature.
type BenchItem struct {
	ID     string `json:"id"`
	What   string `json:"what"`
	Needed bool   `json:"needed"`
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// BenchReport is what the probe found.
type BenchReport struct {
	Kernel   string      `json:"kernel"`
	CPUs     int         `json:"cpus"`
	ToolsDir string      `json:"tools_dir,omitempty"`
	Items    []BenchItem `json:"items"`
}

// ProbeBench tries every feature with p, in order, each only once the
// features it depends on work, and marks those n needs.
func ProbeBench(p Prober, n BenchNeeds) *BenchReport {
	r := &BenchReport{Kernel: p.Kernel(), CPUs: p.CPUs(), ToolsDir: p.ToolsDir()}
	works := map[string]bool{}
	for _, f := range benchFeatures {
		it := BenchItem{ID: f.id, What: f.what, Needed: n.needs(f.id)}
		var missingDeps []string
		for _, d := range f.deps {
			if !works[d] {
				missingDeps = append(missingDeps, featureWhat(d))
			}
		}
		if len(missingDeps) > 0 {
			it.State, it.Detail = ProbeUntried, "needs "+strings.Join(missingDeps, ", ")
		} else if note, err := p.Probe(f.id); err != nil {
			it.State, it.Detail = ProbeMissing, err.Error()
		} else {
			it.State, it.Detail = ProbeOK, note
			works[f.id] = true
		}
		r.Items = append(r.Items, it)
	}
	for _, t := range n.Tools {
		it := BenchItem{ID: FeatTool + t, What: t, Needed: true}
		if note, err := p.Probe(it.ID); err != nil {
			it.State, it.Detail = ProbeMissing, err.Error()
		} else {
			it.State, it.Detail = ProbeOK, note
		}
		r.Items = append(r.Items, it)
	}
	cpus := BenchItem{ID: FeatCPUs, What: "enough online CPUs", Needed: true, State: ProbeOK, Detail: fmt.Sprintf("%d online", r.CPUs)}
	if n.CPUs != "" {
		cpus.State, cpus.Detail = ProbeMissing, n.CPUs
	}
	r.Items = append(r.Items, cpus)
	return r
}

// Missing lists the needed features that are missing or could not be
// tried.
func (r *BenchReport) Missing() []BenchItem {
	var out []BenchItem
	for _, it := range r.Items {
		if it.Needed && it.State != ProbeOK {
			out = append(out, it)
		}
	}
	return out
}

// ErrBenchRefused is returned (wrapped) by Err when a needed feature is
// missing.
var ErrBenchRefused = errors.New("this machine cannot run the benchmark")

// Err is nil when every needed feature works, else one error listing what
// is missing: first the features that failed, then those that could not be
// tried for their sake.
func (r *BenchReport) Err() error {
	miss := r.Missing()
	if len(miss) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v; missing:", ErrBenchRefused)
	for _, it := range miss {
		if it.State == ProbeMissing {
			fmt.Fprintf(&b, "\n  - %s: %s", it.What, it.Detail)
		}
	}
	for _, it := range miss {
		if it.State == ProbeUntried {
			fmt.Fprintf(&b, "\n  - %s: not tried, it %s", it.What, it.Detail)
		}
	}
	return refusal(b.String())
}

// refusal is Err's error: its text is the list, and errors.Is finds
// ErrBenchRefused in it.
type refusal string

func (e refusal) Error() string { return string(e) }
func (e refusal) Unwrap() error { return ErrBenchRefused }

// WriteText prints every feature, needed or not, and a one-line verdict;
// Err has the list of what is missing.
func (r *BenchReport) WriteText(w io.Writer) error {
	tools := "tools from PATH"
	if r.ToolsDir != "" {
		tools = "tools from " + r.ToolsDir + " first"
	}
	fmt.Fprintf(w, "falcon-lab bench probe: kernel %s, %d online CPUs, %s\n\n", r.Kernel, r.CPUs, tools)
	var table bytes.Buffer
	tw := tabwriter.NewWriter(&table, 0, 0, 2, ' ', 0)
	for _, it := range r.Items {
		state := it.State
		if !it.Needed {
			state = "(" + it.State + ")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", state, it.What, it.Detail)
	}
	tw.Flush()
	// tabwriter pads the feature column also where no detail follows.
	for _, l := range strings.SplitAfter(table.String(), "\n") {
		if l != "" {
			fmt.Fprintln(w, strings.TrimRight(l, " \n"))
		}
	}
	verdict := "every feature this run needs is here"
	if n := len(r.Missing()); n > 0 {
		verdict = fmt.Sprintf("%d feature(s) this run needs are missing", n)
	}
	_, err := fmt.Fprintf(w, "\n%s (in parentheses: features this run does not need)\n", verdict)
	return err
}
