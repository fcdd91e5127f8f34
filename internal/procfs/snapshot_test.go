package procfs

import (
	"encoding/json"
	"math"
	"testing"
)

func readSnapshot(t *testing.T, dir string) Snapshot {
	t.Helper()
	var s Snapshot
	var err error
	if s.Stat, err = ParseStat(read(t, dir+"/stat")); err != nil {
		t.Fatal(err)
	}
	if s.Softirqs, err = ParseSoftirqs(read(t, dir+"/softirqs")); err != nil {
		t.Fatal(err)
	}
	if s.Interrupts, err = ParseInterrupts(read(t, dir+"/interrupts")); err != nil {
		t.Fatal(err)
	}
	if s.Softnet, err = ParseSoftnet(read(t, dir+"/softnet_stat")); err != nil {
		t.Fatal(err)
	}
	return s
}

// testdata/window was recorded around one second of UDP over loopback,
// whose receive side ran on CPU1.
func TestWindowRecorded(t *testing.T) {
	w := Window(readSnapshot(t, "window/before"), readSnapshot(t, "window/after"))
	if len(w) != 2 {
		t.Fatalf("%d cpus", len(w))
	}
	c1 := w[1]
	if c1.NetRX != 221528-2498 {
		t.Errorf("cpu1 NET_RX = %d", c1.NetRX)
	}
	if c1.RES != 5938-5914 || w[0].RES != 10984-10960 {
		t.Errorf("RES = %d, %d", w[0].RES, c1.RES)
	}
	if w[0].NetRX != 0 {
		t.Errorf("cpu0 NET_RX = %d", w[0].NetRX)
	}
	// cpu1: 24 usr, 65 sys, 17 soft, 2 idle ticks
	if math.Abs(c1.Usage.Soft-100*17.0/108) > 1e-9 || math.Abs(c1.Usage.Busy()-100*106.0/108) > 1e-9 {
		t.Errorf("cpu1 usage %+v", c1.Usage)
	}
	for cpu, x := range w {
		u := x.Usage
		if s := u.Usr + u.Sys + u.Soft + u.IRQ + u.Idle + u.IOWait + u.Steal; math.Abs(s-100) > 1e-9 {
			t.Errorf("cpu%d usage sums to %v", cpu, s)
		}
	}
}

func TestWindowMissingCPU(t *testing.T) {
	after := Snapshot{Stat: Stat{CPU: map[int]CPUTimes{0: {User: 5}, 1: {User: 9}}},
		Softnet: []Softnet{{CPU: 1, Dropped: 7}}}
	before := Snapshot{Stat: Stat{CPU: map[int]CPUTimes{0: {}}}}
	w := Window(before, after)
	if w[1].SoftnetDropped != 0 || w[1].Usage.Busy() != 0 {
		t.Errorf("cpu absent before counted: %+v", w[1])
	}
	if w[0].Usage.Usr != 100 {
		t.Errorf("cpu0 %+v", w[0])
	}
}

func TestCPUWindowJSON(t *testing.T) {
	in := CPUWindow{Usage: CPUUsage{Usr: 1, Sys: 2, Soft: 3, IRQ: 4, Idle: 90}, NetRX: 5, RES: 6, ReceivedRPS: 7}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var flat map[string]float64
	if err := json.Unmarshal(b, &flat); err != nil {
		t.Fatal(err)
	}
	if flat["usr"] != 1 || flat["soft"] != 3 || flat["net_rx"] != 5 || flat["res"] != 6 {
		t.Errorf("json %s", b)
	}
	var out CPUWindow
	if err := json.Unmarshal(b, &out); err != nil || out != in {
		t.Errorf("round trip: %+v %v", out, err)
	}
}

func TestTakeSnapshot(t *testing.T) {
	a, err := TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := TakeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	if w := Window(a, b); len(w) != len(a.Stat.CPU) {
		t.Errorf("window has %d cpus, stat %d", len(w), len(a.Stat.CPU))
	}
}

func TestSumWindows(t *testing.T) {
	before, after := readSnapshot(t, "window/before"), readSnapshot(t, "window/after")
	s := SumWindows(Window(before, after))
	if s.NetRX != 221528-2498 || s.RES != 24+24 {
		t.Errorf("counters %+v", s)
	}
	// equal to the aggregate line here: both CPUs ticked 108 times
	total := Usage(before.Stat.Total, after.Stat.Total)
	if math.Abs(s.Usage.Busy()-total.Busy()) > 1 {
		t.Errorf("busy %v, aggregate line %v", s.Usage.Busy(), total.Busy())
	}
	if SumWindows(nil) != (CPUWindow{}) {
		t.Error("empty")
	}
}
