package agent

import (
	"errors"
	"fmt"
	"math/bits"
	"os"
	"slices"
	"sort"
	"strconv"
	"sync/atomic"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/journal"
)

// The kernel's own RPS and RFS as modes, configured as the Kubernetes
// RPS/RFS study (Vasudevan and Harfoush) configured them on its server
// node: on the NIC, the VXLAN device and the host-side veths (Calico's
// cali*), and with ContainerLevel also inside the containers — set here from
// the host side, where the study had to run its pods privileged to remount
// /sys. The study wrote the rps_cpus mask "f" (all 4 CPUs of its VMs) for
// RPS and RPS+, and for RFS and RFS+ rps_sock_flow_entries = 32768 and
// rps_flow_cnt = 32768 on each (single-queue) device; its RFS scripts leave
// rps_cpus alone, so RFS here does too unless RPSCPUs is given, which adds
// plain RPS for flows whose socket CPU is not known yet. Inside the
// containers the study's scripts globbed every interface; only eth0 (the
// veth end) carries overlay traffic, and only it is set here: RPS on a
// container's loopback would change how a service mesh's local traffic is
// processed, which neither the study measured nor the modes are about.
const (
	ModeRPS = "rps"
	ModeRFS = "rfs"

	// DefaultFlowEntries is rps_sock_flow_entries of the study and of the
	// kernel's scaling.rst ("works fairly well on a moderately loaded
	// server").
	DefaultFlowEntries = 32768
	// MaxFlowEntries is the kernel's limit on rps_sock_flow_entries
	// (rps_sock_flow_sysctl refuses more).
	MaxFlowEntries = 1 << 29

	// SockFlowPath is the global RFS socket table's size (kernel-wide).
	SockFlowPath = journal.SockFlowEntries
)

// StaticMode is a mode that only sets values: once Start has set them,
// nothing needs to run, no BPF is involved, and 'falcon enable' applies it
// with Apply and leaves no process behind. An agent running one still
// follows containers as they come and go.
type StaticMode interface {
	Mode
	Static()
}

// IsStatic reports whether the mode named only sets values.
func IsStatic(mode string) bool {
	impl, ok := lookupMode(mode)
	if !ok {
		return false
	}
	_, static := impl.new().(StaticMode)
	return static
}

// checkModeOptions refuses settings that belong to another mode (a setting
// that would silently do nothing is a mistake worth hearing about) and
// fills in the rps and rfs defaults.
func checkModeOptions(o *Options) error {
	switch o.Mode {
	case ModeRPS:
		if o.FlowEntries != 0 {
			return fmt.Errorf("--flow-entries sizes RFS's flow tables: use --mode rfs (mode rps sets only rps_cpus)")
		}
		if o.RPSCPUs == nil {
			cpus, err := cpuset.Online()
			if err != nil {
				return fmt.Errorf("read online CPUs: %w", err)
			}
			o.RPSCPUs = cpus // "RPS enabled on all cores", as the study did
		}
	case ModeRFS:
		if o.FlowEntries == 0 {
			o.FlowEntries = DefaultFlowEntries
		}
		if err := checkFlowEntries(o.FlowEntries); err != nil {
			return err
		}
	default:
		var set []string
		if o.ContainerLevel {
			set = append(set, "--container-level")
		}
		if o.RPSCPUs != nil {
			set = append(set, "--rps-cpus")
		}
		if o.FlowEntries != 0 {
			set = append(set, "--flow-entries")
		}
		if len(set) > 0 {
			why := ""
			if o.Mode == ModeFalcon {
				why = " (falcon always sets the RPS of the containers' eth0 it steers, to the --cpus set)"
			}
			return fmt.Errorf("%v: only for --mode rps or rfs, not %s%s", set, o.Mode, why)
		}
	}
	if (o.Mode == ModeRPS || o.Mode == ModeRFS) && (o.Split || o.SplitCPUs != nil) {
		return fmt.Errorf("--split moves the NIC stage with falcon's XDP program: only for --mode falcon, not %s", o.Mode)
	}
	if len(o.RPSCPUs) == 0 && o.RPSCPUs != nil {
		return errors.New("--rps-cpus: empty CPU list")
	}
	return nil
}

// checkFlowEntries wants a power of two: the kernel rounds both
// rps_sock_flow_entries and rps_flow_cnt up to one, so any other number
// would read back as something the user did not ask for.
func checkFlowEntries(n int) error {
	switch {
	case n < 1:
		return fmt.Errorf("--flow-entries %d: want a power of two from 1 to %d (0 would switch RFS off; that is 'falcon disable')", n, MaxFlowEntries)
	case n > MaxFlowEntries:
		return fmt.Errorf("--flow-entries %d: more than the kernel's limit of %d", n, MaxFlowEntries)
	case n&(n-1) != 0:
		return fmt.Errorf("--flow-entries %d: not a power of two (the kernel would round it up to %d); use %d or %d",
			n, 1<<bits.Len(uint(n)), 1<<(bits.Len(uint(n))-1), 1<<bits.Len(uint(n)))
	}
	return nil
}

// FlowCount is rps_flow_cnt for each of a device's queues with entries in
// the global table: entries / queues, as scaling.rst suggests (for one
// queue, the same as rps_sock_flow_entries, as the study set it), rounded
// down to a power of two so that the kernel keeps it as written and the
// queues together never outnumber the global table; at least 1.
func FlowCount(entries, queues int) int {
	n := entries / max(queues, 1)
	if n < 1 {
		return 1
	}
	return 1 << (bits.Len(uint(n)) - 1)
}

// queueChanges sets every receive queue of dev: rps_cpus to cpus (nil:
// left alone) and, with entries > 0, rps_flow_cnt to FlowCount. It runs
// inside dev's namespace (journal.ApplyFunc).
func queueChanges(dev string, cpus []int, entries int) func() ([]journal.Change, error) {
	return func() ([]journal.Change, error) {
		var cs []journal.Change
		if cpus != nil {
			c, err := RPSChanges(dev, cpus, "")()
			if err != nil {
				return nil, err
			}
			cs = append(cs, c...)
		}
		if entries > 0 {
			qs, err := QueuePaths(dev, journal.RPSFlowCnt)
			if err != nil {
				return nil, err
			}
			v := strconv.Itoa(FlowCount(entries, len(qs)))
			for _, p := range qs {
				cs = append(cs, journal.Change{Path: p, Value: v})
			}
		}
		return cs, nil
	}
}

// rpsMode is the rps mode, or with rfs the rfs mode.
type rpsMode struct {
	rfs     bool
	applied map[string][]Value // by device key and name
	global  []Value
	ready   atomic.Bool
}

func (m *rpsMode) Static() {}

func (m *rpsMode) name() string {
	if m.rfs {
		return ModeRFS
	}
	return ModeRPS
}

// targets are the devices the study set: the NIC, the VXLAN devices and
// the host-side veths, and with ContainerLevel the containers' ends.
func (m *rpsMode) targets(h *Host, ov *discover.Overlay) []discover.Device {
	var out []discover.Device
	for _, d := range ov.Devices {
		switch d.Role {
		case discover.RoleNIC, discover.RoleOverlay, discover.RoleHostVeth:
			out = append(out, d)
		case discover.RoleContainer:
			if h.Opts.ContainerLevel {
				out = append(out, d)
			}
		}
	}
	return out
}

func (m *rpsMode) Check(h *Host, ov *discover.Overlay) error {
	if err := checkOverlay(h, ov); err != nil {
		return err
	}
	if m.rfs {
		if _, err := os.Stat(SockFlowPath); err != nil {
			return fmt.Errorf("RFS needs %s, which only the initial network namespace has (the table is global): "+
				"run falcon from the host's network namespace (hostNetwork in Kubernetes): %w", SockFlowPath, err)
		}
	}
	return nil
}

func (m *rpsMode) Start(h *Host, ov *discover.Overlay) error {
	m.applied = map[string][]Value{}
	if m.rfs {
		v := strconv.Itoa(h.Opts.FlowEntries)
		// The table is the kernel's, shared with any other agent's RFS
		// (see holdGlobal); it lives in the initial namespace, the agent's
		// own (Check made sure).
		if err := holdGlobal(h.Dir, SockFlowPath, v); err != nil {
			return fmt.Errorf("set %s: %w", SockFlowPath, err)
		}
		m.global = []Value{{Path: SockFlowPath, Value: v}}
	}
	if err := m.set(h, ov, true); err != nil {
		return err
	}
	m.ready.Store(true)
	h.Log().Info("mode applied", "mode", m.name(), "values", m.describe(h))
	return nil
}

func (m *rpsMode) describe(h *Host) string {
	s := ""
	if h.Opts.RPSCPUs != nil {
		s = fmt.Sprintf("rps_cpus %s (CPUs %s)", cpuset.Mask(h.Opts.RPSCPUs), cpuset.Format(h.Opts.RPSCPUs))
	}
	if m.rfs {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("rps_sock_flow_entries %d and rps_flow_cnt entries/queues", h.Opts.FlowEntries)
	}
	n := len(m.applied)
	where := "the NIC, the VXLAN devices and the host-side veths"
	if h.Opts.ContainerLevel {
		where += " and the containers' eth0"
	}
	return fmt.Sprintf("%s on %s (%d devices)", s, where, n)
}

func (m *rpsMode) Update(h *Host, ov *discover.Overlay) error { return m.set(h, ov, false) }

func (m *rpsMode) Ready() bool { return m.ready.Load() }

// Stop has nothing to undo: every value is in the journal, which the agent
// restores.
func (m *rpsMode) Stop(*Host) error {
	m.ready.Store(false)
	return nil
}

// set sets the devices not set yet and forgets those gone. A veth or
// container that vanishes on the way is no error (it is gone, with its
// settings); on the first call the NIC and the VXLAN devices must succeed.
func (m *rpsMode) set(h *Host, ov *discover.Overlay, strict bool) error {
	var cpus []int
	if h.Opts.RPSCPUs != nil {
		cpus = h.Opts.RPSCPUs
	}
	entries := 0
	if m.rfs {
		entries = h.Opts.FlowEntries
	}
	var errs []error
	now := map[string]bool{}
	for _, d := range m.targets(h, ov) {
		k := d.Key() + "/" + d.Name
		now[k] = true
		if _, ok := m.applied[k]; ok {
			continue
		}
		var got []journal.Change
		err := h.ApplyFunc(d.Netns, func() ([]journal.Change, error) {
			cs, err := queueChanges(d.Name, cpus, entries)()
			got = cs
			return cs, err
		})
		host := d.Role == discover.RoleNIC || d.Role == discover.RoleOverlay
		switch {
		case err == nil:
			var vs []Value
			for _, c := range got {
				vs = append(vs, Value{Netns: d.Netns, Device: d.Name, Role: string(d.Role), Path: c.Path, Value: c.Value})
			}
			m.applied[k] = vs
			if d.Role == discover.RoleContainer && !strict {
				h.Log().Info("container followed", "container", d.String(), "mode", m.name())
			}
		case strict && host:
			return fmt.Errorf("set %s on %s: %w", m.name(), d, err)
		default:
			errs = append(errs, fmt.Errorf("set %s on %s: %w", m.name(), d, err))
		}
	}
	gone := false
	for k := range m.applied {
		if !now[k] {
			delete(m.applied, k)
			gone = true
		}
	}
	if gone {
		errs = append(errs, h.journal.Prune())
	}
	errs = append(errs, h.update(func(s *State) { s.Values = m.values() }))
	return errors.Join(errs...)
}

// values lists what the mode set, global values first, then by device.
func (m *rpsMode) values() []Value {
	out := slices.Clone(m.global)
	keys := make([]string, 0, len(m.applied))
	for k := range m.applied {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, m.applied[k]...)
	}
	return out
}
