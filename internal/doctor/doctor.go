// Package doctor finds the misconfigurations that overlay users hit most
// (checksum offload on the VXLAN device, zero UDP checksums, GRO/GSO off,
// MTU mismatches, half-configured RFS, missing kernel features) on the
// overlay that internal/discover finds, and repairs the ones that are safe
// to repair on a live host.
package doctor

import (
	"fmt"

	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/kernel"
	"github.com/falconnet/falcon/internal/netns"
)

// Severity of a finding. Only warn and error make 'falcon doctor' exit 1.
type Severity string

const (
	OK    Severity = "ok"
	Info  Severity = "info"
	Warn  Severity = "warn"
	Error Severity = "error"
)

// Problem reports whether s needs attention.
func (s Severity) Problem() bool { return s == Warn || s == Error }

// Check ids, stable for scripts and tests.
const (
	CheckTxChecksum = "tx-checksum" // VXLAN device tx checksum offload
	CheckGRO        = "gro"
	CheckGSO        = "gso" // GSO and TSO
	CheckUDPCsum    = "udp-csum"
	CheckMTU        = "mtu"
	CheckRPS        = "rps" // state, always info
	CheckRFS        = "rfs" // consistency
	CheckBPF        = "kernel-bpf"
	CheckBTF        = "kernel-btf"
	CheckTCX        = "kernel-tcx"
	CheckXDP        = "kernel-xdp-native"
	CheckCPUMapGRO  = "kernel-cpumap-gro"
	CheckTracefs    = "kernel-tracefs"
	CheckBPFQdisc   = "kernel-bpf-qdisc" // always ok or info: nothing falcon ships needs it
)

// Finding is one result of one check on one device (Device "" for the
// kernel and other host-wide state).
type Finding struct {
	Check    string   `json:"check"`
	Severity Severity `json:"severity"`
	Device   string   `json:"device,omitempty"`
	Netns    string   `json:"netns,omitempty"`
	Message  string   `json:"message"`
	// Fix is the command that repairs it, or what to change where no
	// command can (a device that must be recreated by its CNI).
	Fix string `json:"fix,omitempty"`
	// Safe fixes are runtime settings that cannot break connectivity and
	// only move the host towards what its CNI intends; --fix applies those
	// of warn and error findings (an info finding's fix is an option).
	Safe     bool   `json:"safe"`
	Fixed    bool   `json:"fixed"`
	FixError string `json:"fix_error,omitempty"`

	apply func() error
}

func (f Finding) key() string { return f.Check + "|" + f.Netns + "|" + f.Device }

// Options of Run.
type Options struct {
	// Netns is the host namespace whose overlay is examined ("" = current).
	Netns string
	// Fix applies the safe fixes of warn and error findings.
	Fix bool
}

// Report is what Run found and did.
type Report struct {
	Netns    string            `json:"netns"`
	Kernel   string            `json:"kernel"`
	Overlay  *discover.Overlay `json:"overlay"`
	Findings []Finding         `json:"findings"`
}

// Problems counts warn and error findings that are not fixed.
func (r *Report) Problems() int {
	n := 0
	for _, f := range r.Findings {
		if f.Severity.Problem() && !f.Fixed {
			n++
		}
	}
	return n
}

// Run discovers the overlay of o.Netns, checks it, and with o.Fix applies
// the safe fixes. Bad input (no such namespace, no overlay) is an error
// before anything is read or changed.
func Run(o Options) (*Report, error) {
	if err := netns.Check(o.Netns); err != nil {
		return nil, err
	}
	ov, err := discover.Discover(o.Netns)
	if err != nil {
		return nil, err
	}
	k, err := kernel.Running()
	if err != nil {
		return nil, err
	}
	r := &Report{Netns: o.Netns, Kernel: k.String(), Overlay: ov}
	st, err := gather(ov)
	if err != nil {
		return nil, err
	}
	r.Findings = checkAll(st, k)
	if !o.Fix {
		return r, nil
	}
	applied := map[string]int{}
	for i := range r.Findings {
		f := &r.Findings[i]
		if !f.Severity.Problem() || !f.Safe || f.apply == nil {
			continue
		}
		if err := f.apply(); err != nil {
			f.FixError = err.Error()
			continue
		}
		applied[f.key()] = i
	}
	if len(applied) == 0 {
		return r, nil
	}
	// A fix counts only when a fresh look no longer finds the problem.
	st, err = gather(ov)
	if err != nil {
		return r, fmt.Errorf("re-reading after fixes: %w", err)
	}
	still := map[string]bool{}
	for _, f := range checkAll(st, k) {
		if f.Severity.Problem() {
			still[f.key()] = true
		}
	}
	for key, i := range applied {
		if still[key] {
			r.Findings[i].FixError = "applied, but the problem is still there"
		} else {
			r.Findings[i].Fixed = true
		}
	}
	return r, nil
}

// checkAll runs every check on one snapshot.
func checkAll(st *state, k kernel.Release) []Finding {
	var fs []Finding
	fs = append(fs, checkOffloads(st, k)...)
	fs = append(fs, checkMTU(st)...)
	fs = append(fs, checkRPS(st)...)
	fs = append(fs, checkKernel(st, k)...)
	return fs
}

// ErrNoOverlay is returned (wrapped) when the namespace has no VXLAN overlay.
var ErrNoOverlay = discover.ErrNoOverlay
