package cause

import (
	"slices"
	"testing"
)

func cpus(busy, soft []float64) []CPU {
	var out []CPU
	for i := range busy {
		out = append(out, CPU{ID: i, Busy: busy[i], Softirq: soft[i], BusyTicks: uint64(busy[i] * 15 / 100)})
	}
	return out
}

func TestDecide(t *testing.T) {
	set2, set4 := []int{0, 1}, []int{0, 1, 2, 3}
	for _, tc := range []struct {
		name    string
		w       Window
		set     []int
		engage  bool
		bn      int
		targets []int
	}{
		{"2 vCPUs: sender and NIC on 0, receiver on 1: nowhere to go",
			Window{CPUs: cpus([]float64{100, 70}, []float64{60, 20}), AppCPUs: []int{1}, NICCPUs: []int{0}}, set2, false, 0, nil},
		{"saturated NIC CPU, an idle CPU free of app and NIC",
			Window{CPUs: cpus([]float64{99, 40, 5, 5}, []float64{90, 5, 0, 0}), AppCPUs: []int{1}, NICCPUs: []int{0}}, set4, true, 0, []int{2, 3}},
		{"not saturated, not dropping: nothing to relieve",
			Window{CPUs: cpus([]float64{60, 40, 5, 5}, []float64{50, 5, 0, 0}), AppCPUs: []int{1}, NICCPUs: []int{0}}, set4, false, 0, []int{2, 3}},
		{"under the threshold but dropping",
			Window{CPUs: []CPU{{ID: 0, Busy: 70, Softirq: 60, Dropped: 3}, {ID: 1, Busy: 10}, {ID: 2, Busy: 5}, {ID: 3, Busy: 50}}, AppCPUs: []int{3}, NICCPUs: []int{0}}, []int{0, 1, 2}, true, 0, []int{1, 2}},
		{"no receiver known: it may run on any CPU of the set",
			Window{CPUs: cpus([]float64{99, 40, 5, 5}, []float64{90, 5, 0, 0}), NICCPUs: []int{0}}, set4, false, 0, nil},
		{"2 vCPUs, the receiver beside the NIC: a set of 2 never engages",
			Window{CPUs: cpus([]float64{100, 5}, []float64{90, 0}), AppCPUs: []int{0}, NICCPUs: []int{0}}, set2, false, 0, nil},
		{"the only other CPU is full",
			Window{CPUs: cpus([]float64{99, 95}, []float64{90, 5}), NICCPUs: []int{0}}, set2, false, 0, nil},
		{"targets only within the set",
			Window{CPUs: cpus([]float64{99, 40, 5, 5}, []float64{90, 5, 0, 0}), AppCPUs: []int{1}, NICCPUs: []int{0}}, []int{0, 1, 3}, true, 0, []int{3}},
		{"the NIC on two CPUs, both excluded",
			Window{CPUs: cpus([]float64{99, 90, 5, 5}, []float64{90, 80, 0, 0}), AppCPUs: []int{3}, NICCPUs: []int{0, 1}}, set4, true, 0, []int{2}},
		{"a busier sender CPU with softirq work is not the bottleneck: the NIC's is",
			Window{CPUs: cpus([]float64{100, 97, 5, 5}, []float64{30, 90, 0, 0}), AppCPUs: []int{3}, NICCPUs: []int{1}}, set4, true, 1, []int{2}},
		{"busy without softirq is no bottleneck (a compiler)",
			Window{CPUs: cpus([]float64{100, 5}, []float64{2, 0})}, set2, false, -1, nil},
		{"unreadable: no ruling",
			Window{Unreadable: "no visible process holds the containers' sockets"}, set2, false, -1, nil},
		{"no traffic: a receiver that did not run would pass for idle",
			Window{CPUs: cpus([]float64{99, 40, 5, 5}, []float64{90, 5, 0, 0}), NICCPUs: []int{0}, Delivered: 50}, set4, false, -1, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.w.Delivered == 0 {
				tc.w.Delivered = 10000
			}
			v := Decide(tc.w, Params{Threshold: 85, Set: tc.set})
			if v.Engage != tc.engage || v.Bottleneck != tc.bn || !slices.Equal(v.Targets, append([]int{}, tc.targets...)) {
				t.Errorf("got engage %v bottleneck %d targets %v (%s); want %v %d %v", v.Engage, v.Bottleneck, v.Targets, v.Why, tc.engage, tc.bn, tc.targets)
			}
			if v.Why == "" {
				t.Error("no reason given")
			}
		})
	}
}

// win is a window of 150 ms: the bottleneck CPU 0 busy with ticks of its
// 15, delivering n packets.
func win(busy float64, n uint64) Window {
	return Window{Ms: 150, Delivered: n, CPUs: []CPU{{ID: 0, Busy: busy, Softirq: 80, BusyTicks: uint64(busy * 15 / 100)}, {ID: 1, Busy: 5}}}
}

func repeat(w Window, n int) (out []Window) {
	for range n {
		out = append(out, w)
	}
	return out
}

func TestConfirm(t *testing.T) {
	base := repeat(win(100, 15000), 10)
	swing := func(n int) (out []Window) { // offered load 1x and 1.5x in turns, unsaturated: the same cost
		for i := range n {
			if i%2 == 0 {
				out = append(out, win(60, 9000))
			} else {
				out = append(out, win(90, 13500))
			}
		}
		return out
	}
	cheapFewer := win(100, 12000)
	cheapFewer.CPUs[0].BusyTicks = 10
	for _, tc := range []struct {
		name    string
		base    []Window
		engaged []Window
		want    string
	}{
		{"cheaper per packet, more delivered", base, repeat(win(100, 30000), 8), Pays},
		{"cheaper per packet but fewer delivered while saturated", base, repeat(cheapFewer, 8), Fails},
		{"dearer per packet", base, repeat(win(100, 12000), 8), Fails},
		{"too early to tell", base, repeat(win(100, 30000), 4), Pending},
		{"a 1.5x swing of the offered load is no gain", repeat(win(80, 12000), 10), swing(20), Fails},
		{"no baseline", base[:3], repeat(win(100, 30000), 8), Fails},
		{"no traffic while engaged", base, repeat(win(100, 10), 8), Fails},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Confirm(0, 85, tc.base, tc.engaged)
			if c.Outcome != tc.want {
				t.Errorf("got %s (%s), want %s", c.Outcome, c.Why, tc.want)
			}
		})
	}
}
