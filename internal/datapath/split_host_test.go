package datapath

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
)

// TestSplitHostNIC is FALCON's Host+ at the datapath: on the host layout,
// with the sender on CPU 0 and the split set {1}, the split program on
// h2's wire end (a NIC of the host network itself: HostNIC) takes its
// packets as they come, unencapsulated, so the NIC stage (skb, GRO, IP,
// the socket) of every flow runs on CPU 1 in the cpumap kthread; the
// arrival counter on that NIC counts each marked packet, so once the flows
// stop none of their packets is still owed to the guard (the kthread's
// last batch counted when it went to sleep, not after the guard timeout);
// UDP and TCP arrive in order; Close leaves neither the XDP program nor
// the arrival counter behind.
//
// guest: XDP and a cpumap without GRO on 6.1, on the host's own NIC
func TestSplitHostNIC(t *testing.T) {
	labtest.NeedRoot(t)
	if testing.Short() {
		t.Skip("builds a testbed")
	}
	if runtime.NumCPU() < 2 {
		t.Skip("needs 2 CPUs")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tb := labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("sh%d", os.Getpid()), Layout: "host"})
	h1, h2 := tb.Hosts[0], tb.Hosts[1]
	nicIdx := ifindex(t, h2.Netns, h2.NIC)
	ping(t, h1.Netns, h2.Addr)
	d := splitOnHostNIC(t, h2, nicIdx)
	closed := false
	defer func() {
		if !closed {
			d.Close()
		}
	}()
	nicStage := h2.Netns + "/" + h2.NIC
	dst := netip.MustParseAddr(h2.Addr)
	owed := noneOwed(d)

	t.Run("udp", func(t *testing.T) {
		const port = 40134
		tr, err := stagetrace.Start(stagetrace.Options{Netns: []string{h2.Netns}, Proto: 17, PortMin: port, PortMax: port})
		if err != nil {
			t.Fatal(err)
		}
		defer tr.Close()
		before := splitStage(t, d)
		sendInOrder(ctx, t, seqcheck.SendOptions{Netns: h1.Netns, Dst: dst, Port: port, Flows: 8, PktsPerFlow: 500, Size: 64, CPU: 0}, h2.Netns)
		owed(t)
		recs, err := tr.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		flows := stagetrace.StagesByFlow(recs)
		if len(flows) != 8 {
			t.Fatalf("saw %d flows, want 8", len(flows))
		}
		for f, st := range flows {
			if c, ok := mainCPU(st[nicStage]); !ok || c != 1 {
				t.Errorf("%s: NIC stage on %s, want CPU 1 (the split set)", f, stagetrace.FormatCPUs(st[nicStage]))
			}
		}
		after := splitStage(t, d)
		redirected, held := after.SteeredTo[1]-before.SteeredTo[1], after.Holds-before.Holds
		if redirected+held < 8*500 || held > 64 {
			t.Errorf("%d packets redirected to CPU 1 and %d held inline by the GRO gate, want the %d sent with at most 64 held",
				redirected, held, 8*500)
		}
	})

	t.Run("tcp", func(t *testing.T) {
		// All of h1's sending on CPU 0 (TestSplitOnTestbed/tcp says why).
		setRPS(t, h1.Netns, h1.NIC, "1")
		data, st := splitTCP(ctx, t, d, h1.Netns, h2.Netns, h2.Addr, 40135, []string{h2.Netns}, nicStage, owed)
		t.Logf("%s: NIC stage %s", data, stagetrace.FormatCPUs(st[nicStage]))
		if c, ok := mainCPU(st[nicStage]); !ok || c != 1 {
			t.Errorf("%s: NIC stage on %s, want CPU 1 (the split set)", data, stagetrace.FormatCPUs(st[nicStage]))
		}
	})

	closed = true
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	if id := xdpProg(t, h2.Netns, nicIdx); id != 0 {
		t.Errorf("XDP program %d still on %s after Close", id, h2.NIC)
	}
	if n := tcPrograms(t, h2.Netns, nicIdx); n != 0 {
		t.Errorf("%d tc programs still on %s's ingress after Close", n, h2.NIC)
	}
}

// splitOnHostNIC loads a datapath that splits over {1} at h2's wire end,
// with the arrival counter there as the last stage, and waits out the
// guard timeout: flows first seen by a young hook stay inline.
func splitOnHostNIC(t *testing.T, h2 testbed.Host, nicIdx int) *Datapath {
	t.Helper()
	needSplit(t)
	cfg := DefaultConfig()
	cfg.Policy = PolicyPaper // split whatever it costs: the test checks where skbs are built
	cfg.CPUs = []int{0, 1}
	cfg.SplitCPUs = []int{1}
	cfg.StaleAfter = 0
	d, err := Load(cfg, "")
	if err != nil {
		t.Fatal(err)
	}
	fail := func(format string, args ...any) {
		d.Close()
		t.Fatalf(format, args...)
	}
	if err := d.SetLoad(make([]uint32, 2), 0, 0); err != nil {
		fail("%v", err)
	}
	ino, err := netns.Inode(h2.Netns)
	if err != nil {
		fail("%v", err)
	}
	if err := d.AddStage(StageDev{NetnsIno: uint32(ino), Ifindex: nicIdx, Last: true}); err != nil {
		fail("%v", err)
	}
	if err := d.AttachArrival(Hook{Netns: h2.Netns, Ifindex: nicIdx, Name: h2.NIC, HostNIC: true}); err != nil {
		fail("%v", err)
	}
	nic := SplitHook{Netns: h2.Netns, Ifindex: nicIdx, Name: h2.NIC, HostNIC: true}
	if err := d.AttachSplit(nic); err != nil {
		fail("%v", err)
	}
	var hk falconHook
	if err := d.maps.FalconHooks.Lookup(d.splits[nic.Hook().key()].id, &hk); err != nil {
		fail("%v", err)
	}
	if hk.HostNic != 1 || hk.Marks != 1 {
		fail("split hook: host_nic %d, marks %d; want both 1 (its arrival counter carries the mark)", hk.HostNic, hk.Marks)
	}
	time.Sleep(cfg.GuardTimeout)
	return d
}

// noneOwed checks that nothing the split sent of flows still active is
// owed: the arrival counter has counted it all.
func noneOwed(d *Datapath) func(t *testing.T) {
	return func(t *testing.T) {
		t.Helper()
		time.Sleep(20 * time.Millisecond) // well inside the guard timeout: the flows are not idle yet
		p, err := d.Steered()
		if err != nil {
			t.Fatal(err)
		}
		if p.InFlight != 0 || p.IdleInFlight != 0 {
			t.Errorf("after the traffic: %+v; want nothing in flight (every packet the split sent counted at h2's wire)", p)
		}
	}
}

// tcPrograms counts the programs on a device's tc ingress, anyone's: tcx
// links and cls_bpf filters.
func tcPrograms(t *testing.T, ns string, ifindex int) int {
	t.Helper()
	n := 0
	err := netns.Do(ns, func() error {
		if HaveTCX() == nil {
			res, err := link.QueryPrograms(link.QueryOptions{Target: ifindex, Attach: ebpf.AttachTCXIngress})
			if err != nil {
				return err
			}
			n += len(res.Programs)
		}
		l, err := netlink.LinkByIndex(ifindex)
		if err != nil {
			return err
		}
		fs, err := netlink.FilterList(l, netlink.HANDLE_MIN_INGRESS)
		if err != nil && !gone(err) && !errors.Is(err, unix.EINVAL) {
			return err
		}
		n += len(fs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
