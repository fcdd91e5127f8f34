package datapath

import (
	"encoding/binary"
	"testing"
	"time"
)

// sprayFlow is the i-th flow of a sprayer: fastFlow from another port.
func sprayFlow(i int) flowSpec {
	fl := fastFlow()
	fl.sport = uint16(20000 + i)
	return fl
}

// learnEgress sends fl's packet from the veth ctx names to the slow path
// and has it come back encapsulated, as the VXLAN device builds it.
func learnEgress(t *testing.T, f *FastPath, fl flowSpec, from skbCtx) {
	t.Helper()
	pkt := frame(fl, pktOpts{payload: 16})
	runFastOn(t, f.objs.FpathVethIn, pkt, from)
	runFast(t, f.objs.FpathNicEg, vxlanFrame(underlay4b, underlay4a, 4789, pkt, pktOpts{}))
}

func shareOf(t *testing.T, f *FastPath, kind, id uint32) fastpathFpShare {
	t.Helper()
	var s fastpathFpShare
	f.objs.FpShares.Lookup(&fastpathFpTenant{Id: id, Kind: kind}, &s)
	return s
}

// TestFastShareEgress: a container spraying flows begins at most its share
// of pending records a second and holds at most its share of entries;
// past it its flows stay on the slow path, and another container's flow
// is learned and carried as before.
func TestFastShareEgress(t *testing.T) {
	f := fastHarness(t)
	const share = 4
	if err := f.SetShares(share, 4*share); err != nil {
		t.Fatal(err)
	}
	victim, sprayer := skbCtx{Ifindex: 1}, skbCtx{Ifindex: otherDevice(t)}
	for i := range 5 * share {
		learnEgress(t, f, sprayFlow(i), sprayer)
	}
	st, _ := f.Stats()
	if st.EgressEntries != share || st.Counters["over_share_pending"] != 4*share {
		t.Fatalf("after %d flows: %d entries, %d packets refused a record; want %d and %d",
			5*share, st.EgressEntries, st.Counters["over_share_pending"], share, 4*share)
	}
	learnEgress(t, f, fastFlow(), victim)
	if ret, _ := runFastOn(t, f.objs.FpathVethIn, frame(fastFlow(), pktOpts{payload: 16}), victim); ret != tcActRedirect {
		t.Errorf("the other container's flow returned %d, want it carried", ret)
	}
	// A second on, the sprayer may begin records again, but holds its
	// share of entries: what it begins is not learned.
	time.Sleep(1100 * time.Millisecond)
	drainPending(t, f.objs.FpPendEg)
	for i := 5 * share; i < 6*share; i++ {
		learnEgress(t, f, sprayFlow(i), sprayer)
	}
	st, _ = f.Stats()
	if st.EgressEntries != share+1 || st.Counters["over_share_entry"] != share {
		t.Errorf("a second later: %d entries, %d refused an entry; want %d and %d", st.EgressEntries, st.Counters["over_share_entry"], share+1, share)
	}
	// A flow of the sprayer's that is cached relearns within its share
	// (after an invalidation), and its entries leave its tally as they go.
	f.Invalidate()
	learnEgress(t, f, sprayFlow(0), sprayer)
	if ret, _ := runFastOn(t, f.objs.FpathVethIn, frame(sprayFlow(0), pktOpts{payload: 16}), sprayer); ret != tcActRedirect {
		t.Errorf("the sprayer's cached flow, relearned, returned %d, want it carried", ret)
	}
	if got := shareOf(t, f, tenantVeth, sprayer.Ifindex).Entries; got != share {
		t.Errorf("the sprayer's tally: %d entries, want %d", got, share)
	}
	if _, err := f.Age(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := shareOf(t, f, tenantVeth, sprayer.Ifindex).Entries; got != 1 {
		t.Errorf("after aging out the older generation's: %d entries, want 1", got)
	}
}

// TestFastShareIngress: a remote host begins at most its share of pending
// records a second; another remote's flow is learned as before; an entry
// is charged to the remote and the container it is delivered to.
func TestFastShareIngress(t *testing.T) {
	f := fastHarness(t)
	const share = 4
	if err := f.SetShares(64, share); err != nil {
		t.Fatal(err)
	}
	for i := range 3 * share {
		learnIngress(t, f, sprayFlow(i), frame(sprayFlow(i), pktOpts{payload: 16}))
	}
	st, _ := f.Stats()
	if st.IngressEntries != share || st.Counters["over_share_pending"] != 2*share {
		t.Fatalf("after %d flows: %d entries, %d packets refused a record; want %d and %d",
			3*share, st.IngressEntries, st.Counters["over_share_pending"], share, 2*share)
	}
	// Another remote host (spoofer's address, here an honest one).
	fl := fastFlow()
	inner := frame(fl, pktOpts{payload: 16})
	runFast(t, f.objs.FpathNicIn, vxlanFrame(spoofer, underlay4b, 4789, inner, pktOpts{}))
	runFast(t, f.objs.FpathVethEg, inner)
	arriveAll(t, f)
	if ret, _ := runFast(t, f.objs.FpathNicIn, vxlanFrame(spoofer, underlay4b, 4789, inner, pktOpts{})); ret != tcActRedirect {
		t.Errorf("the other remote's flow returned %d, want it carried", ret)
	}
	remote := binary.NativeEndian.Uint32(underlay4a.AsSlice())
	if got := shareOf(t, f, tenantRemote, remote).Entries; got != share {
		t.Errorf("the spraying remote's tally: %d entries, want %d", got, share)
	}
	if got := shareOf(t, f, tenantVeth, 1).Entries; got != share+1 {
		t.Errorf("the receiving container's tally: %d entries, want %d", got, share+1)
	}
}
