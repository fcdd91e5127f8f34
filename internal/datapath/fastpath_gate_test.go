package datapath

import "testing"

// TestFastConntrackGate: where the host tracks connections, a learned
// TCP entry waits for the agent (Keep) before it is used and a UDP one
// does not, unless every flow must wait (SetEstablishedOnly: the host's
// rules queue new packets to user space); a waiting entry's packets take
// the slow path, counted conntrack_wait.
func TestFastConntrackGate(t *testing.T) {
	for _, c := range []struct {
		name  string
		proto uint8
		all   bool
		wait  bool
	}{
		{"udp", protoUDP, false, false},
		{"udp-established-only", protoUDP, true, true},
		{"tcp", protoTCP, false, true},
		{"tcp-established-only", protoTCP, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fastHarness(t)
			if err := f.SetConntrack(true, 0); err != nil {
				t.Fatal(err)
			}
			if err := f.SetEstablishedOnly(c.all); err != nil {
				t.Fatal(err)
			}
			fl := fastFlow()
			fl.proto = c.proto
			learnIngress(t, f, fl, frame(fl, pktOpts{payload: 16}))
			pkt := vxlanFrame(underlay4a, underlay4b, 4789, frame(fl, pktOpts{payload: 16}), pktOpts{})
			if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); (ret == tcActRedirect) == c.wait {
				t.Fatalf("before Keep: returned %d, want waiting %v", ret, c.wait)
			}
			if !c.wait {
				return
			}
			arriveAll(t, f) // the waiting packet took the slow path
			st, _ := f.Stats()
			if st.Counters["conntrack_wait"] != 1 {
				t.Errorf("conntrack_wait %d, want 1", st.Counters["conntrack_wait"])
			}
			flow := FastFlow{Src: fl.src, Dst: fl.dst, Sport: fl.sport, Dport: fl.dport, Proto: fl.proto}
			if err := f.Keep(FastIngress, flow, f.Generation()); err != nil {
				t.Fatal(err)
			}
			if ret, _ := runFast(t, f.objs.FpathNicIn, pkt); ret != tcActRedirect {
				t.Errorf("after Keep: returned %d, want redirect", ret)
			}
		})
	}
}
