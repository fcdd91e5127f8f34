package probes

import (
	"testing"

	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/schema"
)

// TestCPUBusyByTheClock: busy is what the idle loop did not take of the
// window, whatever the ticks charged the rest to.
func TestCPUBusyByTheClock(t *testing.T) {
	snap := func(idle0, iow0, idle1 uint64) procfs.Snapshot {
		return procfs.Snapshot{Stat: procfs.Stat{CPU: map[int]procfs.CPUTimes{0: {Idle: idle0, IOWait: iow0, User: 5}, 1: {Idle: idle1}}}}
	}
	// 2 s: CPU 0 idle 1.5 s (0.1 of it in iowait), CPU 1 idle 2 s; CPU 2
	// came online inside the window and is left out.
	after := snap(1000+140, 10, 500+200)
	after.Stat.CPU[2] = procfs.CPUTimes{Idle: 7}
	got := cpuBusy(snap(1000, 0, 500), after, 2)
	if len(got) != 2 || got[0] != 25 || got[1] != 0 {
		t.Errorf("busy %v, want CPU 0 25 %%, CPU 1 0 %%", got)
	}
	if cpuBusy(snap(0, 0, 0), snap(0, 0, 0), 0) != nil {
		t.Error("an empty window has a busy share")
	}
	// The clock's busy share is what the run is judged by; the ticks'
	// split stays beside it.
	r := schema.Run{WindowS: 2, BusyPct: got, CPU: map[int]procfs.CPUWindow{0: {Usage: procfs.CPUUsage{Soft: 10, Idle: 90}}, 1: {Usage: procfs.CPUUsage{Idle: 100}}}}
	m := schema.Metrics(r)
	if m["cpu_total_busy"] != 25 || m["cpu_total_sampled_busy"] != 10 || m["cpu0_busy_clock"] != 25 || m["cpu_total_soft"] != 10 {
		t.Errorf("metrics %v", m)
	}
}
