package main

import (
	"path/filepath"
	"slices"
	"testing"
)

// The list comes from the committed objects: the guard's tracepoints, the
// split's cpumap ones and the lab tracer's, once each; an object without
// tracepoint programs gives an error, not an empty hold.
func TestTracepointsFromObjects(t *testing.T) {
	objs, err := filepath.Glob("../../../internal/datapath/*_bpfel.o")
	if err != nil || len(objs) == 0 {
		t.Fatalf("no objects: %v", err)
	}
	lab, _ := filepath.Glob("../../../lab/stagetrace/*_bpfel.o")
	names, err := tracepoints(append(objs, lab...))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"napi_poll", "sched_switch", "kfree_skb", "xdp_cpumap_kthread", "xdp_cpumap_enqueue", "netif_receive_skb"} {
		if !slices.Contains(names, want) {
			t.Errorf("%s missing from %v", want, names)
		}
	}
	if !slices.IsSorted(names) || len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Errorf("want sorted and unique: %v", names)
	}
	if _, err := tracepoints([]string{"../../../internal/datapath/falcon_bpfel.o"}); err == nil {
		t.Error("an object without tracepoint programs: want an error")
	}
}
