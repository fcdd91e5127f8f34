package steer

// ChooseAdaptive is the adaptive policy (bpf/choose.h, choose_adaptive): a
// stage moves only off a busy CPU (load at or above the threshold) onto
// the less loaded of the flow's two hash choices, and only when that one
// is below the threshold; a steered flow stays while its CPU is below the
// threshold. Nothing moves while engaged is false: the agent has not
// measured that steering pays; never for the set's average load with
// alwaysOn. cur is the CPU running the current stage,
// prev the flow's current target (-1: inline). It returns the CPU for the
// next stage, or -1 with Fallback. Kind says which hash choice it is.
func ChooseAdaptive(flowhash, salt uint32, cpus []int, load []uint32, threshold, avg uint32, stale, alwaysOn, engaged bool, cur, prev int) (int, Kind) {
	idx, kind := ChooseAdaptiveIndex(flowhash, salt, cpus, load, threshold, avg, stale, alwaysOn, engaged, cur, indexOf(cpus, prev))
	if idx < 0 {
		return -1, kind
	}
	return cpus[idx], kind
}

// ChooseAdaptiveIndex is ChooseAdaptive in terms of indexes into S (prev
// -1: inline).
func ChooseAdaptiveIndex(flowhash, salt uint32, cpus []int, load []uint32, threshold, avg uint32, stale, alwaysOn, engaged bool, cur, prev int) (int, Kind) {
	n := len(cpus)
	if stale || !engaged || (!alwaysOn && avg >= threshold) || n == 0 {
		return -1, Fallback
	}
	loadOf := func(cpu int) uint32 {
		if cpu >= 0 && cpu < len(load) {
			return load[cpu]
		}
		if cpu >= 0 && cpu < 1024 {
			return 0
		}
		return 100
	}
	h1 := Hash32(flowhash + salt)
	i1 := int(h1 % uint32(n))
	i2 := int(Hash32(h1) % uint32(n))
	best, lb, kind := i1, loadOf(cpus[i1]), First
	if l2 := loadOf(cpus[i2]); l2 < lb {
		best, lb, kind = i2, l2, Second
	}
	if prev >= 0 && prev < n && loadOf(cpus[prev]) < threshold {
		if prev == i1 {
			return prev, First
		}
		return prev, Second
	}
	if (prev < 0 && loadOf(cur) < threshold) || lb >= threshold || cpus[best] == cur {
		return -1, Fallback
	}
	return best, kind
}

func indexOf(cpus []int, cpu int) int {
	for i, c := range cpus {
		if c == cpu {
			return i
		}
	}
	return -1
}

// Entry is one (flow, hook)'s decision and its ordering guard, as the BPF
// program keeps it (struct flowlet): Target is an index into S or -1
// (inline); Sent the segments passed on; Base the arrivals at the next
// stage when counting began. Times are nanoseconds.
type Entry struct {
	Target          int
	Unsure          bool // unmarked split hooks: made while packets from before the hook may be queued
	LastSeen        uint64
	NextCheck       uint64
	Sent, Base      uint64
	Recheck, Expiry uint64 // the configuration: recheck period, guard timeout
}

// Step is what Guard did with one packet.
type Step struct {
	Target   int  // index into S or -1: where this packet's next stage goes
	Kept     bool // within the recheck period: no choice was made
	Held     bool // a move was wanted, but earlier packets were still queued
	Moved    bool // the target changed with this packet
	TimedOut bool // ... after the guard gave up on lost packets
}

// Start is the entry a flow's first packet at a hook makes (bpf/guard.h,
// decide), at time now with done its arrivals so far. A hook younger than
// the guard timeout may have packets of the flow from before it queued on
// this CPU's path, in no count: the flow starts inline, behind them, and
// reconsiders from its next packet, moving once its own have arrived.
// Unmarked (marked false: the split hook without metadata), the hook
// cannot tell those arrivals from its own, and the entry stays Unsure
// until the flow is quiet. Otherwise it takes want's choice.
func Start(now, done, segs, recheck, expiry uint64, young, marked bool, want func(prev int) int) Entry {
	e := Entry{Target: -1, LastSeen: now, NextCheck: now, Sent: segs, Base: done, Recheck: recheck, Expiry: expiry}
	if young {
		e.Unsure = !marked
		return e
	}
	e.Target, e.NextCheck = want(-1), now+recheck
	return e
}

// Guard is the ordering guard (bpf/guard.h, decide) for one packet of segs
// segments at time now: done is the sum of the flow's arrivals at the next
// stage and last when the latest of them was counted, want the policy's
// choice given the current target. A changed choice takes effect only when
// every segment passed on has arrived; a flow quiet for longer than the
// guard timeout (idle at the hook, and nothing counted) has its count
// restarted instead.
func (e *Entry) Guard(now, done, last, segs uint64, want func(prev int) int) Step {
	idle := int64(now - e.LastSeen) // signed: another CPU may have stamped it later
	e.LastSeen = max(e.LastSeen, now)
	lost := idle > int64(e.Expiry) && int64(now-last) > int64(e.Expiry)
	s := Step{Target: e.Target}
	defer func() { e.Sent += segs }()
	if e.Unsure {
		if !lost {
			s.Held = true
			return s
		}
		e.Base, e.Unsure, e.NextCheck = done-e.Sent, false, now
	}
	if int64(now-e.NextCheck) < 0 {
		s.Kept = true
		return s
	}
	w := want(e.Target)
	if w == e.Target {
		e.NextCheck = now + e.Recheck
		return s
	}
	out := int64(e.Base + e.Sent - done)
	if out < 0 {
		e.Base = done - e.Sent
		out = 0
	}
	if out > 0 && !lost {
		e.NextCheck = now + e.Recheck>>6
		s.Held = true
		return s
	}
	if out > 0 {
		e.Base = done - e.Sent
		s.TimedOut = true
	}
	e.Target, e.NextCheck = w, now+e.Recheck
	s.Target, s.Moved = w, true
	return s
}
