package datapath

import (
	"net/netip"
	"testing"
	"time"
)

// TestFastTCPAggregates: the fast path decapsulates a TCP aggregate of a
// cached flow only where the container takes it whole (SetWhole): any
// aggregate where its namespace forwards on no device, else one to an
// address it lists; the others take the slow path, as does a UDP
// aggregate. BPF_PROG_TEST_RUN can set an skb's GSO size and segments but
// not its GSO type, which bpf_skb_adjust_room checks, so here the
// decapsulation itself fails (helper_failed, the slow path); that the
// aggregates reach the socket whole is TestFastPathTCPAggregatesIntact's
// (internal/agent). Test runs come in on lo, which stands for the
// container's host-side veth.
//
// guest: bpf_skb_adjust_room's GSO handling differs on 6.1
func TestFastTCPAggregates(t *testing.T) {
	tcp := fastFlow()
	tcp.proto = protoTCP
	other := netip.MustParseAddr("10.0.9.9")
	agg := skbCtx{GSOSegs: 2, GSOSize: 600} // test runs take a page at most
	for _, c := range []struct {
		name  string
		fl    flowSpec
		whole Whole
		why   string
	}{
		{"tcp-forwards-nowhere", tcp, Whole{Any: true}, "helper_failed"},
		{"tcp-to-its-address", tcp, Whole{Addrs: []netip.Addr{other, tcp.dst}}, "helper_failed"},
		{"tcp-to-another-address", tcp, Whole{Addrs: []netip.Addr{other}}, "not_eligible"},
		{"tcp-address-past-the-limit", tcp, Whole{Addrs: []netip.Addr{other, other, other, other, tcp.dst}}, "not_eligible"},
		{"tcp-none", tcp, Whole{}, "not_eligible"},
		{"udp", fastFlow(), Whole{Any: true}, "not_eligible"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			inner := frame(c.fl, pktOpts{payload: 2 * 600})
			learnIngress(t, f, c.fl, frame(c.fl, pktOpts{payload: 16}))
			if err := f.SetWhole(1, c.whole); err != nil {
				t.Fatal(err)
			}
			before, _ := f.Stats()
			if ret, _ := runFastOn(t, f.objs.FpathNicIn, vxlanFrame(underlay4a, underlay4b, 4789, inner, pktOpts{}), agg); ret != tcActUnspec {
				t.Fatalf("returned %d, want the slow path", ret)
			}
			after, _ := f.Stats()
			if after.Counters[c.why] != before.Counters[c.why]+1 {
				t.Errorf("%s %d -> %d, want one more", c.why, before.Counters[c.why], after.Counters[c.why])
			}
		})
	}
	f := fastHarness(t)
	if err := f.SetWhole(0, Whole{Any: true}); err == nil {
		t.Error("SetWhole(0): no error")
	}
	if err := f.SetWhole(1, Whole{Addrs: []netip.Addr{netip.MustParseAddr("fd00::1")}}); err == nil {
		t.Error("SetWhole with an IPv6 address: no error")
	}
}

// TestFastTrustLapse: while the agent is late to renew the programs'
// trust, nothing cached is used, but what goes to the slow path is still
// counted, so when trust returns the flow waits for it; while the fast path
// is off (the agent judging the host's rules again), packets pass
// uncounted, so once it is on again no flow takes the fast path for a
// second: one of them could still be queued.
//
// guest: the fast path's helpers differ on 6.1
func TestFastTrustLapse(t *testing.T) {
	for _, c := range []struct {
		name        string
		lapse, back func(f *FastPath) error
	}{
		{"agent-late", func(f *FastPath) error { return f.Renew(-time.Second) }, func(f *FastPath) error { return f.Renew(time.Minute) }},
		{"off-and-on", func(f *FastPath) error { return f.SetOn(false) }, func(f *FastPath) error { return f.SetOn(true) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			fl := fastFlow()
			learnIngress(t, f, fl, frame(fl, pktOpts{payload: 16}))
			pkt := vxlanFrame(underlay4a, underlay4b, 4789, frame(fl, pktOpts{payload: 16}), pktOpts{})
			if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); ret != tcActRedirect {
				t.Fatalf("before the lapse: returned %d, want redirect", ret)
			}
			if err := c.lapse(f); err != nil {
				t.Fatal(err)
			}
			if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); ret != tcActUnspec {
				t.Fatalf("during the lapse: returned %d, want the slow path", ret)
			}
			if err := c.back(f); err != nil {
				t.Fatal(err)
			}
			before, _ := f.Stats()
			if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); ret != tcActUnspec {
				t.Fatalf("right after the lapse: returned %d, want the slow path", ret)
			}
			after, _ := f.Stats()
			if after.Counters["guard_wait"] != before.Counters["guard_wait"]+1 {
				t.Errorf("guard_wait %d -> %d, want one more", before.Counters["guard_wait"], after.Counters["guard_wait"])
			}
			time.Sleep(1100*time.Millisecond + 10*time.Millisecond) // GUARD_NS and a coarse clock tick
			arriveAll(t, f)
			if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); ret != tcActRedirect {
				t.Errorf("a second after the lapse: returned %d, want redirect", ret)
			}
		})
	}
}
