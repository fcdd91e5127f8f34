package datapath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cilium/ebpf"
)

// Counters are the packets the hooks saw. A stage's packets per CPU say where
// that stage ran; SteeredTo says where the stage after it was sent.
type Counters struct {
	RanOn     map[int]map[int]uint64 // hook ifindex -> CPU -> packets
	SteeredTo map[int]map[int]uint64 // hook ifindex -> target CPU -> packets
	Decided                          // over all hooks and CPUs
	Bytes     uint64                 // of the packets decided on
	Passed    map[string]uint64      // untouched packets per reason
	Stages    []Stage                // the same per hook (ifindexes may repeat across namespaces)
	CPUMap    map[int]CPUMapStats    // split CPU -> its cpumap traffic; nil when nothing is split
}

// Stage is one hook's counters.
type Stage struct {
	Hook             Hook
	RanOn, SteeredTo map[int]uint64
	Decided          // summed over PerCPU
	// PerCPU is what the hook decided on each CPU it ran on, the CPU of the
	// stage it sees (not the one it steered to). CPUs it decided nothing on
	// are absent.
	PerCPU map[int]Decided
	Bytes  uint64
	Passed map[string]uint64
}

// Decided counts a hook's decisions and its ordering guard's work.
type Decided struct {
	First, Second, Fallback uint64 // fresh decisions
	FallbackStale           uint64 // part of Fallback: the load data was stale
	FallbackIdle            uint64 // part of Fallback: adaptive, moving would not pay
	FlowletHits             uint64 // packets that kept their flow's decision
	// Micro is the packets of elephants in micro-flows (mode mflow): no
	// per-flow choice, no guard; MicroFlows counts the micro-flows the
	// split hook started.
	Micro, MicroFlows uint64
	Guard
}

func (d *Decided) add(o Decided) {
	d.First += o.First
	d.Second += o.Second
	d.Fallback += o.Fallback
	d.FallbackStale += o.FallbackStale
	d.FallbackIdle += o.FallbackIdle
	d.FlowletHits += o.FlowletHits
	d.Micro += o.Micro
	d.MicroFlows += o.MicroFlows
	d.Guard.add(o.Guard)
}

// Guard counts the ordering guard's work at a hook.
type Guard struct {
	Holds    uint64 // packets kept on the old target: earlier ones were still queued
	Moved    uint64 // times a (flow, hook) changed its target
	Timeouts uint64 // moves after the guard gave up on lost packets (part of Moved)
}

func (g *Guard) add(o Guard) {
	g.Holds += o.Holds
	g.Moved += o.Moved
	g.Timeouts += o.Timeouts
}

// Counters reads this datapath's counters.
func (d *Datapath) Counters() (Counters, error) {
	c, err := readCounters(d.maps.FalconHooks, d.maps.FalconCounters, d.maps.FalconSteered)
	if err != nil {
		return c, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if s := d.activeSplit(); s != nil {
		c.CPUMap, err = readCPUMapStats(s.stats)
	}
	return c, err
}

// Config returns the configuration in force.
// It takes no lock: the load sampler reads it on every sample and must not
// wait for a program being loaded and attached.
func (d *Datapath) Config() Config {
	if c := d.cfg.Load(); c != nil {
		return *c
	}
	return Config{}
}

func openPinned(pinDir, name string) (*ebpf.Map, error) {
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, name), &ebpf.LoadPinOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("open pinned map %s (is falcon enabled?): %w", name, err)
	}
	return m, nil
}

// ReadCounters reads the counters of the datapath pinned in pinDir.
func ReadCounters(pinDir string) (Counters, error) {
	var ms []*ebpf.Map
	defer func() {
		for _, m := range ms {
			m.Close()
		}
	}()
	for _, name := range []string{"falcon_hooks", "falcon_counters", "falcon_steered"} {
		m, err := openPinned(pinDir, name)
		if err != nil {
			return Counters{}, err
		}
		ms = append(ms, m)
	}
	c, err := readCounters(ms[0], ms[1], ms[2])
	if err != nil {
		return c, err
	}
	// Pinned only while a NIC is split.
	m, err := ebpf.LoadPinnedMap(filepath.Join(pinDir, splitStatsPin), &ebpf.LoadPinOptions{ReadOnly: true})
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("open pinned map %s: %w", splitStatsPin, err)
	}
	defer m.Close()
	c.CPUMap, err = readCPUMapStats(m)
	return c, err
}

// ReadState reads the configuration and the last published load of the
// datapath pinned in pinDir.
func ReadState(pinDir string) (cfg Config, perCPU []uint32, avg uint32, updatedNs uint64, err error) {
	cm, err := openPinned(pinDir, "falcon_config")
	if err != nil {
		return
	}
	defer cm.Close()
	lm, err := openPinned(pinDir, "falcon_load")
	if err != nil {
		return
	}
	defer lm.Close()
	var c falconConfig
	if err = cm.Lookup(uint32(0), &c); err != nil {
		return
	}
	var l falconLoad
	if err = lm.Lookup(uint32(0), &l); err != nil {
		return
	}
	cpus := ebpf.MustPossibleCPU()
	if cpus > MaxCPUs {
		cpus = MaxCPUs
	}
	return configFromBPF(&c), append([]uint32(nil), l.Pct[:cpus]...), l.Avg, l.UpdatedNs, nil
}

// stageOf is hook id's stage: where it ran and what it decided, CPU by
// CPU, from its per-CPU counters.
func stageOf(h *falconHook, id uint32, counters *ebpf.Map) (*Stage, error) {
	s := &Stage{
		Hook:      hookFromBPF(h),
		RanOn:     map[int]uint64{},
		SteeredTo: map[int]uint64{},
		PerCPU:    map[int]Decided{},
		Passed:    map[string]uint64{},
	}
	var per []falconCounters
	if err := counters.Lookup(id, &per); err != nil {
		return nil, fmt.Errorf("read counters of hook %d: %w", id, err)
	}
	for cpu, v := range per {
		var ran uint64
		for _, n := range v.C {
			ran += n
		}
		if ran > 0 {
			s.RanOn[cpu] = ran
		}
		if d := decidedOn(&v, s.Passed); d != (Decided{}) {
			s.PerCPU[cpu] = d
			s.Decided.add(d)
		}
		s.Bytes += v.Bytes
		for to, n := range v.To {
			if n > 0 {
				s.SteeredTo[to] += n
			}
		}
	}
	return s, nil
}

func readCounters(hooks, counters, steered *ebpf.Map) (Counters, error) {
	c := Counters{
		RanOn:     map[int]map[int]uint64{},
		SteeredTo: map[int]map[int]uint64{},
		Passed:    map[string]uint64{},
	}
	byID := map[uint32]*Stage{}
	var ids []uint32
	for id := uint32(0); id < MaxHooks; id++ {
		var h falconHook
		if err := hooks.Lookup(id, &h); err != nil {
			return c, fmt.Errorf("read hook %d: %w", id, err)
		}
		if h.Active == 0 {
			continue
		}
		s, err := stageOf(&h, id, counters)
		if err != nil {
			return c, err
		}
		byID[id] = s
		ids = append(ids, id)
	}

	var k falconSteerKey
	var v []uint64
	it := steered.Iterate()
	for it.Next(&k, &v) {
		s, ok := byID[k.Hook]
		if !ok {
			continue
		}
		var sum uint64
		for _, n := range v {
			sum += n
		}
		s.SteeredTo[int(k.Cpu)] += sum
	}
	if err := it.Err(); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return c, fmt.Errorf("read steering counters: %w", err)
	}

	for _, id := range ids {
		s := byID[id]
		c.Stages = append(c.Stages, *s)
		c.Decided.add(s.Decided)
		c.Bytes += s.Bytes
		for r, n := range s.Passed {
			c.Passed[r] += n
		}
		addTo(c.RanOn, s.Hook.Ifindex, s.RanOn)
		addTo(c.SteeredTo, s.Hook.Ifindex, s.SteeredTo)
	}
	return c, nil
}

// decidedOn is the one reading of what the counter slots of one CPU mean,
// so that a hook's per-CPU decisions and its totals cannot drift apart; the
// slots of packets passed untouched are added to passed by reason.
func decidedOn(v *falconCounters, passed map[string]uint64) Decided {
	d := Decided{Guard: Guard{Moved: v.Moved, Timeouts: v.Timeouts}, MicroFlows: v.Batches}
	for i, n := range v.C {
		switch i {
		case cntFirst:
			d.First = n
		case cntSecond:
			d.Second = n
		case cntFallbackLoad:
			d.Fallback += n
		case cntFallbackStale:
			d.Fallback += n
			d.FallbackStale = n
		case cntFallbackIdle:
			d.Fallback += n
			d.FallbackIdle = n
		case cntFlowletHit:
			d.FlowletHits = n
		case cntGuardHold:
			d.Holds = n
		case cntMflow:
			d.Micro = n
		default:
			if n > 0 {
				passed[passReasons[i]] += n
			}
		}
	}
	return d
}

func addTo(dst map[int]map[int]uint64, ifindex int, src map[int]uint64) {
	if dst[ifindex] == nil {
		dst[ifindex] = map[int]uint64{}
	}
	for cpu, n := range src {
		dst[ifindex][cpu] += n
	}
}

func hookFromBPF(h *falconHook) Hook {
	role := HookOnNIC
	switch h.Role {
	case roleOverlay:
		role = HookOnOverlay
	case roleSplit:
		role = HookSplit
	}
	return Hook{
		Netns:       cString(h.Netns[:]),
		Ifindex:     int(h.Ifindex),
		Name:        cString(h.Name[:]),
		Role:        role,
		NextIfindex: int(h.NextIfindex),
		Egress:      h.Egress != 0,
	}
}
