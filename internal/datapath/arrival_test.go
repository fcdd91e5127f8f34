package datapath

import (
	"os/exec"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/falconnet/falcon/internal/netns"
)

// TestArrivalCountsEveryPacket: the guard's arrival counter on a
// container's end counts every packet that reaches it, in its flow, with
// tcx and with clsact; it goes with DetachArrival and with Close, and the
// hook API refuses its role.
//
// guest: the arrival counter attached to the kernel, through clsact where 6.1 has no tcx
func TestArrivalCountsEveryPacket(t *testing.T) {
	for _, clsact := range []bool{false, true} {
		name := "tcx"
		if clsact {
			name = "clsact"
		}
		t.Run(name, func(t *testing.T) {
			if !clsact {
				needTCX(t)
			}
			arrivals(t, clsact)
		})
	}
}

func arrivals(t *testing.T, clsact bool) {
	ns, _, _ := testNetns(t)
	ns2 := ns + "b"
	ip(t, "netns", "add", ns2)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns2).Run() })
	ip(t, "-n", ns, "link", "set", "fvb", "netns", ns2)
	ip(t, "-n", ns, "addr", "add", "10.201.0.1/24", "dev", "fva")
	ip(t, "-n", ns2, "addr", "add", "10.201.0.2/24", "dev", "fvb")
	ip(t, "-n", ns2, "link", "set", "fvb", "up")
	end := Hook{Netns: ns2, Ifindex: ifindex(t, ns2, "fvb"), Name: "fvb"}

	d := loadOnCPU0(t, "")
	defer d.Close()
	d.forceClsact = clsact
	if err := d.Attach(Hook{Netns: ns2, Ifindex: end.Ifindex, Role: HookArrival}); err == nil {
		t.Error("Attach took the arrival role")
	}
	if err := d.AttachArrival(end); err != nil {
		t.Fatal(err)
	}
	if err := d.AttachArrival(end); err != nil { // again: nothing more
		t.Fatal(err)
	}
	if n := arrivalsOn(t, ns2, end.Ifindex, clsact); n != 1 {
		t.Fatalf("%d arrival counters on fvb, want 1", n)
	}

	const pings = 20
	if out, err := exec.Command("ip", "netns", "exec", ns, "ping", "-q", "-c", "20", "-i", "0.01", "-W", "1",
		"10.201.0.2").CombinedOutput(); err != nil {
		t.Fatalf("ping: %v: %s", err, out)
	}
	// The echo requests are one flow (ICMP is one flow per address pair);
	// the last one is counted when the NAPI poll that delivered it returns.
	var (
		k    uint32
		per  []falconDone
		best uint64
	)
	it := d.maps.FalconDone.Iterate()
	for it.Next(&k, &per) {
		var sum uint64
		for _, v := range per {
			sum += v.C[0]
		}
		best = max(best, sum)
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	if best != pings {
		t.Errorf("the echo requests' flow counted %d arrivals, want %d", best, pings)
	}

	if err := d.DetachArrival(end); err != nil {
		t.Fatal(err)
	}
	if n := arrivalsOn(t, ns2, end.Ifindex, clsact); n != 0 {
		t.Errorf("%d arrival counters on fvb after DetachArrival", n)
	}
	if err := d.AttachArrival(end); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if n := arrivalsOn(t, ns2, end.Ifindex, clsact); n != 0 {
		t.Errorf("%d arrival counters on fvb after Close", n)
	}
}

// arrivalsOn counts falcon_arrive programs on the ingress of a device: tcx
// links, or (clsact) our cls_bpf filters.
func arrivalsOn(t *testing.T, ns string, ifindex int, clsact bool) int {
	t.Helper()
	if clsact {
		return inspect(t, ns, ifindex, false).filters
	}
	n := 0
	err := netns.Do(ns, func() error {
		res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
		if err != nil {
			return err
		}
		for _, p := range res.Programs {
			prog, err := ebpf.NewProgramFromID(p.ID)
			if err != nil {
				continue
			}
			if info, err := prog.Info(); err == nil && info.Name == arriveProgName {
				n++
			}
			prog.Close()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
