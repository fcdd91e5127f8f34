package loadavg

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// rtThread is the scheduling policy of the sampler's own (locked) thread:
// SCHED_FIFO priority 1 while its samples decide (see Sampler.RealTime),
// ordinary while it rests. A real-time thread preempts whatever runs on
// its CPU at once and runs until it blocks, and each of a resting
// sampler's samples also hands its P back and forth through the Go
// scheduler: measured with bpftrace during the bench's nginx workload on 2
// vCPUs, a stood-down agent's sampler thread ran more than 150 µs at a
// time about 11 times a second, at real-time priority, on the CPUs that
// served the requests. Ordinary, those runs yield to the workload's
// wake-ups.
type rtThread struct {
	warn   func(error)
	on     bool // SCHED_FIFO now
	failed bool // SCHED_FIFO refused (no CAP_SYS_NICE): ordinary for good
}

// keep makes the calling thread real-time (on) or ordinary, where it is
// not already, and reports whether it is real-time now; a nil rtThread
// never is.
func (t *rtThread) keep(on bool) bool {
	if t == nil || t.failed || on == t.on {
		return t != nil && t.on
	}
	attr := unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_NORMAL}
	if on {
		attr.Policy, attr.Priority = unix.SCHED_FIFO, 1
	}
	if err := unix.SchedSetAttr(0, &attr, 0); err != nil {
		if on {
			t.failed = true
			if t.warn != nil {
				t.warn(fmt.Errorf("load sampler stays an ordinary task (SCHED_FIFO: %w); under saturation its samples may come late", err))
			}
		}
		return t.on // leaving SCHED_FIFO cannot fail for want of a capability
	}
	t.on = on
	return on
}
