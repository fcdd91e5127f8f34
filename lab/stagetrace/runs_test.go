package stagetrace

import (
	"net/netip"
	"testing"
)

func TestRunLengths(t *testing.T) {
	f := Flow{Proto: 6, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Sport: 1, Dport: 2}
	other := f
	other.Sport = 3
	recs := []Record{
		{Netns: "h2", Dev: "nic0", Flow: f, PerCPU: map[int]uint64{0: 130, 1: 64},
			DataSegsPerCPU: map[int]uint64{0: 128, 1: 64}, JumpsPerCPU: map[int]uint64{0: 2, 1: 4}},
		{Netns: "h2", Dev: "vxlan0", Flow: f, DataSegsPerCPU: map[int]uint64{2: 192}, JumpsPerCPU: map[int]uint64{2: 1}},
		{Netns: "h2", Dev: "nic0", Flow: other, DataSegsPerCPU: map[int]uint64{0: 7}, JumpsPerCPU: map[int]uint64{0: 7}},
		{Netns: "h2", Dev: "nic0", Flow: Flow{Proto: 17}, PerCPU: map[int]uint64{0: 5}}, // UDP: no runs
	}
	got := RunLengths(recs, f, "h2/nic0")
	want := map[int]Runs{0: {DataSegs: 128, Jumps: 2}, 1: {DataSegs: 64, Jumps: 4}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("RunLengths = %v, want %v", got, want)
	}
	if got[0].MeanLen() != 64 || got[1].MeanLen() != 16 {
		t.Errorf("mean run lengths %v, %v; want 64, 16", got[0].MeanLen(), got[1].MeanLen())
	}
	if a := AllRuns(got); a != (Runs{DataSegs: 192, Jumps: 6}) || a.MeanLen() != 32 {
		t.Errorf("AllRuns = %v", a)
	}
	if r := RunLengths(recs, f, "h2/vxlan0"); len(r) != 1 || r[2].MeanLen() != 192 {
		t.Errorf("vxlan0: %v", r)
	}
	if r := RunLengths(recs, Flow{Proto: 17}, "h2/nic0"); len(r) != 0 {
		t.Errorf("UDP flow has runs: %v", r)
	}
	if (Runs{}).MeanLen() != 0 {
		t.Error("no runs: mean not 0")
	}
	if s := (Runs{DataSegs: 10, Jumps: 4}).String(); s != "10 segs in 4 runs (mean 2.5)" {
		t.Errorf("String = %q", s)
	}
}
