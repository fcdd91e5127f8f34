package datapath

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/falconnet/falcon/internal/steer"
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
	// Epoch: the last stage counts a hook's mark (bpf/datapath.h MARK_*) only
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
