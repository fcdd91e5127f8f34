// Package datapath loads falcon's BPF program (bpf/falcon.c), attaches it to
// the devices of an overlay's receive path and feeds it configuration and
// CPU load. The program at one stage sets skb->hash so that the next
// device's RPS runs the next stage on the CPU FALCON's Algorithm 1 chose;
// internal/steer is the Go twin of that choice.
package datapath

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"

	"github.com/falconnet/falcon/internal/steer"
)

// Limits of the BPF program (bpf/datapath.h).
const (
	MaxCPUs  = 1024 // CPU ids and the size of the CPU set
	MaxPorts = 8    // VXLAN UDP ports
	MaxHooks = 128  // attachments of one datapath
)

// Counter slots, as enum counter in bpf/datapath.h.
const (
	cntFirst = iota
	cntSecond
	cntFallbackLoad
	cntFallbackStale
	cntFlowletHit
	cntFallbackIdle
	cntGuardHold
	cntPassNonIP
	cntPassFragment
	cntPassTruncated
	cntPassMalformed
	cntPassNotVXLAN
	cntPassDisabled
	cntPassProto
	cntMflow
	cntMax
)

// passReasons names the packets a hook let through untouched.
var passReasons = map[int]string{
	cntPassNonIP:     "non_ip",
	cntPassFragment:  "fragment",
	cntPassTruncated: "truncated",
	cntPassMalformed: "malformed",
	cntPassNotVXLAN:  "not_vxlan",
	cntPassDisabled:  "disabled",
	cntPassProto:     "not_split_proto",
}

const (
	roleNIC     = 1
	roleOverlay = 2
	roleSplit   = 3
	roleArrival = 4 // never in a hook slot: the guard's arrival counter

	fallbackInline = 0
	fallbackLocal  = 1

	policyAdaptive = 0
	policyPaper    = 1
	policyStatic   = 2
)

// Policies: how a hook chooses the next stage's CPU (bpf/choose.h).
const (
	// PolicyAdaptive moves a stage only off a busy CPU onto the less loaded
	// of two hash choices with room, and only while the agent has measured
	// that steering pays (Config.Engaged); otherwise stages run inline.
	PolicyAdaptive = "adaptive"
	// PolicyPaper is FALCON's Algorithm 1 as published: first choice under
	// the threshold, else the second, whatever it costs.
	PolicyPaper = "paper"
	// PolicyStatic is Algorithm 1 without its second choice: the first
	// hash choice, busy or not (FALCON Fig. 16's "static", against which
	// the paper measured what two choices buy).
	PolicyStatic = "static"
)

// Unconditional reports whether the policy steers whatever steering costs,
// as the paper's figures ran it: no engagement test, never stood down.
func Unconditional(policy string) bool { return policy == PolicyPaper || policy == PolicyStatic }

// Fallback spellings for "the next stage stays on the current CPU".
//
// Measured on 6.18 (docker testbed, rps_cpus = S on vxlan0 and the
// container's eth0, 16 000 packets sent from CPU 0, napi:napi_poll work on
// CPU 0): with hash 0 every stage stayed on CPU 0 and the backlog NAPI did 2
// polls' work per packet (the sender's host veth and the container's eth0,
// both netif_rx); with "local" it did 3: the VXLAN stage took one more trip
// through the backlog instead of running inside the gro_cells poll. Without
// the program the same rps_cpus spread the stages, so hash 0 is what turns
// RPS off. TestSteeringOnTestbed checks the CPUs.
const (
	// FallbackInline sets hash 0, for which get_rps_cpu() does no RPS: the
	// next stages run as without falcon (inline after gro_cells, the local
	// backlog after veth's netif_rx). The socket then sees hash 0, which
	// only RFS would care about (and RFS is off on falcon's devices).
	FallbackInline = "inline"
	// FallbackLocal aims RPS at the current CPU: the same CPU, but one more
	// trip through its backlog queue. On a CPU outside the set the program
	// uses inline, as RPS cannot aim there.
	FallbackLocal = "local"
)

// Datapath is the loaded maps plus one program instance per attached hook.
type Datapath struct {
	mu     sync.Mutex
	spec   *ebpf.CollectionSpec
	maps   falconMaps
	pinDir string
	pinned []string
	links  atomic.Uint64          // names the pins of links (pinLink)
	cfg    atomic.Pointer[Config] // written under mu, read without it
	// stateMu serialises read-modify-writes of the configuration, so that
	// SetConfig and the running state never undo each other.
	stateMu sync.Mutex
	hooks   map[hookKey]*attachment
	splits  map[hookKey]*attachment // XDP on NICs (split.go)
	split   *cpumapState            // the cpumap: parked while splits is empty, until Close
	guard   *guardState             // the guard's counting programs (guard.go)
	// arrivals: the guard's arrival counter on containers' ends (guard.go)
	arrivals map[hookKey]*attachment
	ids      [MaxHooks]bool
	// spare: programs of detached hooks, by slot, for the next attach in
	// that slot: a load is about half a second of verifier time on one
	// CPU, which a stand-down and comeback would pay per hook each time.
	spare map[uint32]*ebpf.Program
	// splitSpare: the same for split hooks (their XDP programs).
	splitSpare map[uint32]*ebpf.Program
	debug      bool // tests: programs record their last decision in falcon_debug
	// forceClsact makes Attach skip tcx (tests of the pre-6.6 path).
	forceClsact bool
	// clock stamps attachments (CLOCK_MONOTONIC ns); tests backdate them.
	clock func() uint64
	spent spentClock // time in each running state (Spent)
}

// Load validates cfg, creates the maps and writes cfg. With pinDir set the
// maps are pinned there (a bpffs directory, created if needed) so that
// ReadCounters in another process can read them; pins already there mean
// another datapath is loaded (or was killed: see Cleanup).
func Load(cfg Config, pinDir string) (*Datapath, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if pinDir != "" {
		if err := checkPinDir(pinDir); err != nil {
			return nil, err
		}
	}
	spec, err := loadFalcon()
	if err != nil {
		return nil, err
	}
	d := &Datapath{spec: spec, pinDir: pinDir, hooks: map[hookKey]*attachment{}, splits: map[hookKey]*attachment{},
		arrivals: map[hookKey]*attachment{}, spare: map[uint32]*ebpf.Program{}, splitSpare: map[uint32]*ebpf.Program{}}
	if cfg.Epoch == 0 {
		cfg.Epoch = 1
	}
	if err := spec.LoadAndAssign(&d.maps, nil); err != nil {
		return nil, fmt.Errorf("create BPF maps: %w", err)
	}
	if err := d.setConfig(cfg); err != nil {
		d.maps.Close()
		return nil, err
	}
	// Pinned first: the guard pins its links there.
	if pinDir != "" {
		if err := d.pin(); err != nil {
			d.unpin()
			d.maps.Close()
			return nil, err
		}
	}
	if err := d.openGuard(); err != nil {
		d.unpin()
		d.maps.Close()
		return nil, err
	}
	return d, nil
}

// SetConfig replaces the configuration; flowlets whose CPU left the set
// choose again on their next packet. Engaged, Draining, Unmarking,
// StoodDown and Epoch are the running state, not configuration: SetConfig
// keeps the values in force (SetEngaged, SetDraining, SetUnmarking and
// StandDown change them; Load takes the first ones).
func (d *Datapath) SetConfig(cfg Config) error {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	cur := d.Config()
	cfg.Engaged, cfg.Draining, cfg.Unmarking, cfg.StoodDown, cfg.Epoch = cur.Engaged, cur.Draining, cur.Unmarking, cur.StoodDown, cur.Epoch
	return d.setConfig(cfg)
}

// setState changes the running state in the configuration in force.
func (d *Datapath) setState(change func(*Config)) error {
	d.stateMu.Lock()
	defer d.stateMu.Unlock()
	cfg := d.Config()
	change(&cfg)
	return d.setConfig(cfg)
}

func (d *Datapath) setConfig(cfg Config) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	split := d.activeSplit() // a parked one takes the set at its start
	if split != nil {
		if err := checkPossible(cfg.SplitSet()); err != nil {
			return err
		}
		if err := split.sync(cfg.SplitSet(), true); err != nil {
			return err
		}
	}
	b := cfg.toBPF()
	if err := d.maps.FalconConfig.Put(uint32(0), &b); err != nil {
		return fmt.Errorf("write BPF config: %w", err)
	}
	d.cfg.Store(&cfg)
	d.spent.set(cfg, time.Now())
	if split != nil {
		return split.sync(cfg.SplitSet(), false)
	}
	return nil
}

// SetLoad publishes per-CPU load (percent, indexed by CPU id), the average
// load of the CPU set and the CLOCK_MONOTONIC time of the sample.
func (d *Datapath) SetLoad(perCPU []uint32, avg uint32, monotonicNs uint64) error {
	if len(perCPU) > MaxCPUs {
		return fmt.Errorf("load for %d CPUs, at most %d are supported", len(perCPU), MaxCPUs)
	}
	var l falconLoad
	copy(l.Pct[:], perCPU)
	l.Avg = avg
	// The split set's own average switches splitting off, as S's does
	// pipelining; the same set gets the caller's average.
	cfg := d.Config()
	l.SplitAvg = avg
	if len(cfg.SplitCPUs) > 0 && !slices.Equal(cfg.SplitSet(), cfg.SortedCPUs()) {
		l.SplitAvg = steer.AvgLoad(cfg.SplitSet(), perCPU)
	}
	l.UpdatedNs = monotonicNs
	if err := d.maps.FalconLoad.Put(uint32(0), &l); err != nil {
		return fmt.Errorf("write BPF load: %w", err)
	}
	return nil
}

// Close detaches every hook, closes the maps and removes the pins.
func (d *Datapath) Close() error {
	d.mu.Lock()
	hooks := make([]Hook, 0, len(d.hooks))
	for _, a := range d.hooks {
		hooks = append(hooks, a.hook)
	}
	d.mu.Unlock()
	errs := []error{d.closeSplits()}
	for _, h := range hooks {
		errs = append(errs, d.Detach(h))
	}
	d.mu.Lock()
	for _, a := range d.arrivals {
		errs = append(errs, d.detachLocked(d.arrivals, a.hook))
	}
	d.mu.Unlock()
	if d.guard != nil {
		errs = append(errs, d.guard.close())
		d.guard = nil
	}
	d.mu.Lock()
	for id, p := range d.spare {
		errs = append(errs, p.Close())
		delete(d.spare, id)
	}
	d.mu.Unlock()
	errs = append(errs, d.unpin(), d.maps.Close())
	return errors.Join(errs...)
}
