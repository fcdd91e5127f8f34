// Package datapath loads falcon's BPF program (bpf/falcon.c), attaches it to
// the devices of an overlay's receive path and feeds it configuration and
// CPU load. The program at one stage sets skb->hash so that the next
// device's RPS runs the next stage on the CPU FALCON's Algorithm 1 chose;
// internal/steer is the Go twin of that choice.
package datapath

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"

	"github.com/falconnet/falcon/internal/steer"
)

// Limits of the BPF program (bpf/falcon.h).
const (
	MaxCPUs  = 1024 // CPU ids and the size of the CPU set
	MaxPorts = 8    // VXLAN UDP ports
	MaxHooks = 128  // attachments of one datapath
)

// Counter slots, as enum counter in bpf/falcon.h.
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

// Config is what the BPF program decides with.
type Config struct {
	CPUs      []int  // the Falcon CPU set S; the next devices' rps_cpus must be exactly S
	Threshold int    // load percent, 0..100
	Policy    string // PolicyAdaptive, PolicyPaper or PolicyStatic; "" = adaptive
	// AlwaysOn: never inline because of the set's average load (FALCON
	// Fig. 15's "always-on"); a CPU's own load still counts.
	AlwaysOn bool
	Engaged  bool // adaptive: the agent measured that steering pays
	Draining bool // stopping: every flow goes inline, under its guard
	// Unmarking: drained, the split programs stop marking before their
	// detach (SetUnmarking).
	Unmarking bool
	StoodDown bool // every program detached: steering did not pay, or nothing to relieve (StandDown)
	// Epoch: the last stage counts a hook's mark (bpf/falcon.h MARK_*) only
	// while the mark's epoch is this one, 1..MaxEpoch; forgetting the flows'
	// counts moves it on, so marks from before never count. 0: Load's 1.
	Epoch   int
	Recheck time.Duration // a flow's decision is reconsidered after this long
	// GuardTimeout: a flow idle this long has nothing left in any queue, so
	// segments still missing at its next stage were lost; the guard stops
	// waiting for them (counted).
	GuardTimeout time.Duration
	PerPacket    bool          // choose per packet, as the paper did (may reorder)
	Fallback     string        // FallbackInline or FallbackLocal; "" = inline
	VXLANPorts   []uint16      // UDP ports that carry VXLAN at NIC hooks
	StaleAfter   time.Duration // load older than this switches falcon off; 0 = never stale
	// The split set (AttachSplit): CPUs whose cpumap kthreads may build the
	// NIC stage's skbs; nil = CPUs. SplitProto is SplitTCP, SplitUDP or
	// SplitAll ("" = all), the inner protocol split.
	SplitCPUs  []int
	SplitProto string
	// MFLOW (bpf/mflow.h): Batch > 0 sends an elephant's packets to the
	// split CPUs in turns of Batch packets; a flow is an elephant while
	// it brings ElephantBps bit/s or more, window after window (0: every
	// flow). UDP flows are split only with ReorderUDP.
	Batch       int
	ElephantBps uint64
	ReorderUDP  bool
}

// MaxBatch bounds a micro-flow: MFLOW measured 16 to 1024 packets.
const MaxBatch = 1 << 20

// MflowWindow is bpf/mflow.h's MFLOW_WINDOW_NS: the elephant rate is
// measured over windows this long.
const MflowWindow = 10 * time.Millisecond

// MflowElephantWindows is bpf/mflow.h's MFLOW_ELEPHANT_WINDOWS: a flow is
// an elephant after this many windows in a row at the elephant rate.
const MflowElephantWindows = 2

// elephantBytes is the elephant rate as bytes per MflowWindow, rounded up
// so that a rate never counts as more than it is.
func elephantBytes(bps uint64) uint32 {
	b := (bps*uint64(MflowWindow/time.Millisecond) + 7999) / 8000
	return uint32(min(b, math.MaxUint32))
}

// DefaultVXLANPorts are the VXLAN ports the datapath parses unless told.
var DefaultVXLANPorts = steer.DefaultVXLANPorts

// DefaultThreshold is the paper's load threshold in percent: it found
// 80–90 best.
const DefaultThreshold = 85

// DefaultGuardTimeout is how long the ordering guard waits, at most, for a
// flow's packets lost on the way.
const DefaultGuardTimeout = 100 * time.Millisecond

// CheckThreshold is the threshold's range check, for whoever takes one.
func CheckThreshold(pct int) error {
	if pct < 0 || pct > 100 {
		return fmt.Errorf("%d: outside 0..100", pct)
	}
	return nil
}

// DefaultConfig has the paper's threshold, the adaptive policy, a decision
// reconsidered every 10 ms (the load sampling period) and a guard that
// waits up to 100 ms for lost packets; CPUs is left for the caller.
func DefaultConfig() Config {
	return Config{
		Threshold:    DefaultThreshold,
		Policy:       PolicyAdaptive,
		Recheck:      10 * time.Millisecond,
		GuardTimeout: DefaultGuardTimeout,
		Fallback:     FallbackInline,
		VXLANPorts:   slices.Clone(DefaultVXLANPorts),
		StaleAfter:   250 * time.Millisecond,
	}
}

// Validate checks cfg without touching the system. Whether the CPUs exist
// is the caller's business: the datapath only needs valid ids.
func (c Config) Validate() error {
	if len(c.CPUs) == 0 {
		return errors.New("CPU set is empty")
	}
	if err := checkSet(c.CPUs, "CPU"); err != nil {
		return err
	}
	if err := checkSet(c.SplitCPUs, "split CPU"); err != nil {
		return err
	}
	if _, err := splitProto(c.SplitProto); err != nil {
		return err
	}
	if err := CheckThreshold(c.Threshold); err != nil {
		return fmt.Errorf("threshold %w", err)
	}
	if c.Batch < 0 || c.Batch > MaxBatch {
		return fmt.Errorf("batch %d: want 0..%d packets", c.Batch, MaxBatch)
	}
	if c.ElephantBps/8*uint64(MflowWindow/time.Millisecond)/1000 >= math.MaxUint32 {
		return fmt.Errorf("elephant rate %d bit/s is beyond what the datapath counts", c.ElephantBps)
	}
	if _, err := policyBPF(c.Policy); err != nil {
		return err
	}
	if c.Recheck < 0 {
		return fmt.Errorf("recheck period %v is negative", c.Recheck)
	}
	if c.GuardTimeout <= 0 {
		return fmt.Errorf("guard timeout %v must be positive", c.GuardTimeout)
	}
	if c.StaleAfter < 0 {
		return fmt.Errorf("stale-after %v is negative", c.StaleAfter)
	}
	if c.Epoch < 0 || c.Epoch > MaxEpoch {
		return fmt.Errorf("epoch %d: want 0..%d", c.Epoch, MaxEpoch)
	}
	switch c.Fallback {
	case "", FallbackInline, FallbackLocal:
	default:
		return fmt.Errorf("fallback %q: want %q or %q", c.Fallback, FallbackInline, FallbackLocal)
	}
	if len(c.VXLANPorts) > MaxPorts {
		return fmt.Errorf("%d VXLAN ports, at most %d are supported", len(c.VXLANPorts), MaxPorts)
	}
	for _, p := range c.VXLANPorts {
		if p == 0 {
			return errors.New("VXLAN port 0 is not a port")
		}
	}
	return nil
}

func policyBPF(p string) (uint32, error) {
	switch p {
	case "", PolicyAdaptive:
		return policyAdaptive, nil
	case PolicyPaper:
		return policyPaper, nil
	case PolicyStatic:
		return policyStatic, nil
	}
	return 0, fmt.Errorf("policy %q: want %q, %q or %q", p, PolicyAdaptive, PolicyPaper, PolicyStatic)
}

func checkSet(cpus []int, what string) error {
	if len(cpus) > MaxCPUs {
		return fmt.Errorf("%s set has %d CPUs, at most %d are supported", what, len(cpus), MaxCPUs)
	}
	seen := map[int]bool{}
	for _, cpu := range cpus {
		if cpu < 0 || cpu >= MaxCPUs {
			return fmt.Errorf("%s %d out of range 0..%d", what, cpu, MaxCPUs-1)
		}
		if seen[cpu] {
			return fmt.Errorf("%s %d listed twice", what, cpu)
		}
		seen[cpu] = true
	}
	return nil
}

// SortedCPUs is S in the order RPS lists a mask's CPUs: ascending.
func (c Config) SortedCPUs() []int {
	s := slices.Clone(c.CPUs)
	slices.Sort(s)
	return s
}

func (c Config) toBPF() falconConfig {
	var b falconConfig
	cpus := c.SortedCPUs()
	b.N = uint32(len(cpus))
	for i, cpu := range cpus {
		b.Cpus[i] = uint32(cpu)
		b.Pos[cpu] = uint16(i + 1)
	}
	b.Threshold = uint32(c.Threshold)
	b.RecheckNs = uint64(c.Recheck)
	b.GuardTimeoutNs = uint64(c.GuardTimeout)
	b.StaleNs = uint64(c.StaleAfter)
	b.Policy, _ = policyBPF(c.Policy)
	if c.AlwaysOn {
		b.AlwaysOn = 1
	}
	if c.Engaged {
		b.Engaged = 1
	}
	if c.Draining {
		b.Drain = 1
	}
	if c.Unmarking {
		b.Unmark = 1
	}
	if c.StoodDown {
		b.StoodDown = 1
	}
	b.Epoch = uint32(c.Epoch)
	b.Ncpus = uint32(possibleCPUs())
	if c.PerPacket {
		b.PerPacket = 1
	}
	if c.Fallback == FallbackLocal {
		b.Fallback = fallbackLocal
	}
	b.Nports = uint32(len(c.VXLANPorts))
	copy(b.Ports[:], c.VXLANPorts)
	split := c.SplitSet()
	b.SplitN = uint32(len(split))
	for i, cpu := range split {
		b.SplitCpus[i] = uint32(cpu)
	}
	b.SplitProto, _ = splitProto(c.SplitProto)
	b.Batch = uint32(c.Batch)
	b.ElephantBytes = elephantBytes(c.ElephantBps)
	if c.ReorderUDP {
		b.ReorderUdp = 1
	}
	return b
}

func configFromBPF(b *falconConfig) Config {
	c := Config{
		Threshold:    int(b.Threshold),
		Policy:       PolicyAdaptive,
		Engaged:      b.Engaged != 0,
		Draining:     b.Drain != 0,
		Unmarking:    b.Unmark != 0,
		StoodDown:    b.StoodDown != 0,
		Epoch:        int(b.Epoch),
		Recheck:      time.Duration(b.RecheckNs),
		GuardTimeout: time.Duration(b.GuardTimeoutNs),
		StaleAfter:   time.Duration(b.StaleNs),
		PerPacket:    b.PerPacket != 0,
		Fallback:     FallbackInline,
	}
	switch b.Policy {
	case policyPaper:
		c.Policy = PolicyPaper
	case policyStatic:
		c.Policy = PolicyStatic
	}
	c.AlwaysOn = b.AlwaysOn != 0
	for i := uint32(0); i < b.N && i < MaxCPUs; i++ {
		c.CPUs = append(c.CPUs, int(b.Cpus[i]))
	}
	if b.Fallback == fallbackLocal {
		c.Fallback = FallbackLocal
	}
	for i := uint32(0); i < b.Nports && i < MaxPorts; i++ {
		c.VXLANPorts = append(c.VXLANPorts, b.Ports[i])
	}
	for i := uint32(0); i < b.SplitN && i < MaxCPUs; i++ {
		c.SplitCPUs = append(c.SplitCPUs, int(b.SplitCpus[i]))
	}
	c.SplitProto = protoName(b.SplitProto)
	c.Batch = int(b.Batch)
	c.ElephantBps = uint64(b.ElephantBytes) * 8000 / uint64(MflowWindow/time.Millisecond)
	c.ReorderUDP = b.ReorderUdp != 0
	return c
}

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
