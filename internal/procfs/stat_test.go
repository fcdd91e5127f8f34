package procfs

import (
	"math"
	"os"
	"testing"
)

func TestParseStatRecorded(t *testing.T) {
	b, err := os.ReadFile("testdata/stat-2cpu")
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CPU) != 2 {
		t.Fatalf("got %d cpus, want 2", len(st.CPU))
	}
	var sum CPUTimes
	for _, c := range st.CPU {
		sum.User += c.User
		sum.System += c.System
		sum.Idle += c.Idle
		sum.SoftIRQ += c.SoftIRQ
	}
	// The aggregate line is the sum of the per-CPU lines (within a tick per
	// CPU: the kernel samples them one after another).
	for name, p := range map[string][2]uint64{
		"user": {sum.User, st.Total.User}, "system": {sum.System, st.Total.System},
		"idle": {sum.Idle, st.Total.Idle}, "softirq": {sum.SoftIRQ, st.Total.SoftIRQ},
	} {
		if diff := int64(p[0]) - int64(p[1]); diff < -2 || diff > 2 {
			t.Errorf("%s: per-cpu sum %d, total %d", name, p[0], p[1])
		}
	}
}

func TestParseStat4CPU(t *testing.T) {
	b, err := os.ReadFile("testdata/stat-4cpu")
	if err != nil {
		t.Fatal(err)
	}
	st, err := ParseStat(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CPU) != 4 {
		t.Fatalf("got %d cpus, want 4", len(st.CPU))
	}
	want := CPUTimes{User: 1000, Nice: 10, System: 500, Idle: 30000, IOWait: 20, IRQ: 5, SoftIRQ: 300, Steal: 7}
	if st.CPU[3] != want {
		t.Errorf("cpu3 = %+v, want %+v", st.CPU[3], want)
	}
}

func TestParseStatErrors(t *testing.T) {
	for _, in := range []string{
		"",                           // no cpu line
		"cpu 1 2 3\n",                // too few columns
		"cpu 1 2 3 x 5 6 7 8 9 10\n", // not a number
		"cpu 1 2 3 4\ncpuX 1 2 3 4\n",
	} {
		if _, err := ParseStat([]byte(in)); err == nil {
			t.Errorf("ParseStat(%q): no error", in)
		}
	}
}

func TestReadStat(t *testing.T) {
	st, err := ReadStat()
	if err != nil {
		t.Fatal(err)
	}
	if len(st.CPU) == 0 {
		t.Fatal("no cpus")
	}
}

func TestUsage(t *testing.T) {
	before := CPUTimes{User: 100, Nice: 0, System: 50, Idle: 1000, IOWait: 5, IRQ: 1, SoftIRQ: 10, Steal: 0}
	after := CPUTimes{User: 130, Nice: 10, System: 60, Idle: 1040, IOWait: 5, IRQ: 1, SoftIRQ: 20, Steal: 0, Guest: 5}
	u := Usage(before, after)
	// 40 usr + 10 sys + 10 soft + 40 idle = 100 ticks
	want := CPUUsage{Usr: 40, Sys: 10, Soft: 10, Idle: 40}
	if !usageEq(u, want) {
		t.Errorf("Usage = %+v, want %+v", u, want)
	}
	if b := u.Busy(); math.Abs(b-60) > 1e-9 {
		t.Errorf("Busy = %v, want 60", b)
	}
	z := Usage(before, before)
	if z.Idle != 100 || z.Busy() != 0 {
		t.Errorf("zero interval: %+v busy %v", z, z.Busy())
	}
	// idle going backwards must not underflow into a huge number
	back := after
	back.Idle = before.Idle - 1
	if u := Usage(before, back); u.Idle != 0 || math.IsNaN(u.Usr) {
		t.Errorf("backwards idle: %+v", u)
	}
}

func usageEq(a, b CPUUsage) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	return eq(a.Usr, b.Usr) && eq(a.Sys, b.Sys) && eq(a.Soft, b.Soft) && eq(a.IRQ, b.IRQ) &&
		eq(a.Idle, b.Idle) && eq(a.IOWait, b.IOWait) && eq(a.Steal, b.Steal)
}
