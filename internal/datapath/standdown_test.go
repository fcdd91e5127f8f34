package datapath

import (
	"testing"

	"github.com/cilium/ebpf/link"

	"github.com/falconnet/falcon/lab/labtest"
)

// A datapath that stands down leaves no program of its own running (the
// hooks and arrival counters are the caller's to detach, and it refuses
// while one is attached), and one that comes back has forgotten every
// flow: their packets ran uncounted meanwhile.
//
// guest: standing down and coming back detaches and attaches on the old kernel
func TestStandDown(t *testing.T) {
	labtest.NeedRoot(t)
	ns, a, _ := testNetns(t)
	d := loadOnCPU0(t, testPinDir(t))
	defer d.Close()
	hk := Hook{Netns: ns, Ifindex: a, Name: "fva", Role: HookOnNIC, NextIfindex: 9}
	if err := d.Attach(hk); err != nil {
		t.Fatal(err)
	}
	if err := d.StandDown(true); err == nil {
		t.Fatal("stood down with a hook attached")
	}
	if err := d.Detach(hk); err != nil {
		t.Fatal(err)
	}
	var ids []link.ID
	for _, l := range d.guard.links {
		info, err := l.Info()
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, info.ID)
	}
	if len(ids) != 4 { // kfree_skb, napi_poll, xdp_cpumap_kthread, sched_switch
		t.Fatalf("%d guard tracepoint links, want 4", len(ids))
	}
	if err := d.StandDown(true); err != nil {
		t.Fatal(err)
	}
	if !d.Config().StoodDown {
		t.Error("Config().StoodDown false after StandDown(true)")
	}
	for _, id := range ids {
		if l, err := link.NewFromID(id); err == nil {
			l.Close()
			t.Errorf("guard link %d still in the kernel after standing down", id)
		}
	}
	if err := d.Attach(hk); err != nil { // attaching is the caller's business, even now
		t.Fatal(err)
	}
	if err := d.StandDown(false); err == nil {
		t.Fatal("came back with a hook attached: its flows would keep counts from before")
	}
	if err := d.Detach(hk); err != nil {
		t.Fatal(err)
	}

	fk := falconFlowletKey{Flowhash: 7, Hook: 1}
	if err := d.maps.FalconFlowlets.Put(&fk, &falconFlowlet{Sent: 5}); err != nil {
		t.Fatal(err)
	}
	per := make([]falconDone, possibleCPUs())
	per[0].C[0] = 3
	epoch := d.Config().Epoch
	if err := d.maps.FalconDone.Put(uint32(7), per); err != nil {
		t.Fatal(err)
	}
	if err := d.StandDown(false); err != nil {
		t.Fatal(err)
	}
	if d.Config().Epoch == epoch {
		t.Errorf("came back in epoch %d: marks from before would count", epoch)
	}
	if d.Config().StoodDown || len(d.guard.links) != 4 {
		t.Errorf("after coming back: StoodDown %v, %d guard links (want false, 4)", d.Config().StoodDown, len(d.guard.links))
	}
	var v falconFlowlet
	if err := d.maps.FalconFlowlets.Lookup(&fk, &v); err == nil {
		t.Error("a flow's count survived standing down")
	}
	if err := d.maps.FalconDone.Lookup(uint32(7), &per); err == nil {
		t.Error("a flow's arrivals survived standing down")
	}
}
