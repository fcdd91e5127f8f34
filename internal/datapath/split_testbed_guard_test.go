package datapath

// TestSplitOnTestbed's subtests of the guard under split: unmarking before
// a detach, a kthread's CPU overloaded, a split attached under running
// flows.

import (
	"context"
	"net/netip"
	"os/exec"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/seqcheck"
)

// Unmarking before a detach: on the CPU that polls the NIC the split
// program stops marking once GRO let go of what it marked there, and
// passes the rest unmarked, in no count (a hold each); when the drain
// ends it marks again after the first poll. A detach then changes no
// frame's metadata under GRO (bpf/split.c gro_gate).
func (b *splitBed) unmark(t *testing.T) {
	dst := netip.MustParseAddr(b.sv.Addr)
	send := func(port uint16) (held uint64) {
		t.Helper()
		before := splitStage(t, b.d).Holds
		sendInOrder(b.ctx, t, seqcheck.SendOptions{Netns: b.cl.Netns, Dst: dst, Port: port, Flows: 1, PktsPerFlow: 300, Size: 64, CPU: 0}, b.sv.Netns)
		return splitStage(t, b.d).Holds - before
	}
	meta := func() uint32 {
		t.Helper()
		var g falconGroState
		if err := b.d.maps.FalconGro.Lookup(b.d.splits[b.nic.Hook().key()].id, &g); err != nil {
			t.Fatal(err)
		}
		return g.Meta
	}
	if m := meta(); m != 1 {
		t.Fatalf("before: the split marks %d, want 1", m)
	}
	if err := b.d.SetDraining(true); err != nil {
		t.Fatal(err)
	}
	if err := b.d.SetUnmarking(true); err != nil {
		t.Fatal(err)
	}
	held := send(40128)
	t.Logf("unmarking: %d of 300 frames passed unmarked", held)
	if held < 300 {
		t.Errorf("unmarking: %d of 300 frames passed unmarked, want all (GRO held nothing marked)", held)
	}
	if ok, err := b.d.Unmarked(); err != nil || !ok || meta() != 0 {
		t.Errorf("unmarking: Unmarked %v (%v), the split marks %d; want true, 0", ok, err, meta())
	}
	if err := b.d.SetDraining(false); err != nil {
		t.Fatal(err)
	}
	if b.d.Config().Unmarking {
		t.Error("SetDraining(false) left Unmarking on")
	}
	held = send(40129)
	t.Logf("marking again: %d of 300 frames passed unmarked", held)
	if held > 64 {
		t.Errorf("marking again: %d of 300 frames unmarked, want at most the first poll's (64)", held)
	}
	if m := meta(); m != 1 {
		t.Errorf("after: the split marks %d, want 1", m)
	}
}

// Overload: the kthread's CPU also runs a busy loop while eight flows
// come at full rate. The split program keeps the queue from filling
// and counts each frame it drops for its flow, so the kernel drops
// none where no program sees the flow, and once the queues are empty
// every split flow's guard balances: what it sent arrived or was
// counted dropped (with a dropped frame unseen, a full-rate flow could
// never move again, nor falcon stand down).
func (b *splitBed) overload(t *testing.T) {
	const port = 40126
	dst := netip.MustParseAddr(b.sv.Addr)
	r, err := seqcheck.Listen(b.sv.Netns, dst, port)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	id, hk := b.guardAsAgent(t)
	var (
		k   falconFlowletKey
		v   falconFlowlet
		per []falconDone
	)
	earlier := map[uint32]bool{} // the flows of the subtests before
	for it := b.d.maps.FalconFlowlets.Iterate(); it.Next(&k, &v); {
		earlier[k.Flowhash] = true
	}
	c0, err := b.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	// At nice -19 the loop leaves the kthread a few per cent of CPU 1.
	busy := exec.CommandContext(b.ctx, "nice", "-n", "-19", "taskset", "-c", "1", "sh", "-c", "while :; do :; done")
	if err := busy.Start(); err != nil {
		t.Fatal(err)
	}
	defer busy.Wait()
	defer busy.Process.Kill()
	sendCtx, stop := context.WithTimeout(b.ctx, 2*time.Second)
	defer stop()
	done := make(chan error, 1)
	go func() {
		_, err := r.Wait(b.ctx, 0)
		done <- err
	}()
	err = seqcheck.Send(sendCtx, seqcheck.SendOptions{Netns: b.cl.Netns, Dst: dst, Port: port, Flows: 8, PktsPerFlow: 1 << 28, Size: 64, CPU: 0})
	if err != nil && sendCtx.Err() == nil {
		t.Fatal(err)
	}
	busy.Process.Kill()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c1, err := b.d.Counters()
	if err != nil {
		t.Fatal(err)
	}
	kernel := c1.CPUMap[1].EnqueueDrops - c0.CPUMap[1].EnqueueDrops
	full := c1.CPUMap[1].QueueFull - c0.CPUMap[1].QueueFull
	t.Logf("cpumap CPU 1: %d frames queued, %d dropped by the split program as the queue might fill, %d by the full queue",
		c1.CPUMap[1].Enqueued-c0.CPUMap[1].Enqueued, full, kernel)
	if kernel != 0 {
		t.Errorf("the full queue dropped %d frames: the split program let it fill", kernel)
	}
	if full == 0 {
		t.Log("the queue never came near full: this run did not test the bound")
	}
	n := 0
	for it := b.d.maps.FalconFlowlets.Iterate(); it.Next(&k, &v); {
		if k.Hook != id || earlier[k.Flowhash] {
			continue
		}
		var arrived uint64
		if b.d.maps.FalconDone.Lookup(&k.Flowhash, &per) == nil {
			for _, c := range per {
				arrived += c.C[doneSlot(hk)]
			}
		}
		if v.Base+v.Sent != arrived {
			t.Errorf("split flow %x: sent %d (base %d), arrived or counted dropped %d", k.Flowhash, v.Sent, v.Base, arrived)
		}
		n++
	}
	if n != 8 {
		t.Errorf("%d new split flows in the guard, want the 8 sent", n)
	}
}

// A split attached under running flows: their first counted frames
// stay on the NIC's CPU, behind those from before the attach, and
// their marks guard them from there, so they are split while they run
// and stay in order. They run as paced senders do, with gaps shorter
// than the guard timeout (so not moved by it): a gap lets their queues
// empty, and a flow moves then. A flow at full rate whose queues never
// empty cannot move without reordering, and the guard keeps it where it
// is: in a 6.1 guest under emulation on a loaded host, none of eight
// full-rate flows moved in 10 s, every frame counted once they stopped.
func (b *splitBed) running(t *testing.T) {
	const port = 40127
	if err := b.d.DetachSplit(b.nic); err != nil {
		t.Fatal(err)
	}
	dst := netip.MustParseAddr(b.sv.Addr)
	r, err := seqcheck.Listen(b.sv.Netns, dst, port)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The flows run from before the attach until a while after it;
	// the attach itself may take seconds (a guest under emulation).
	sendCtx, stop := context.WithCancel(b.ctx)
	defer stop()
	done := make(chan map[netip.AddrPort]seqcheck.Stats, 1)
	go func() {
		st, err := r.Wait(b.ctx, 0)
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	sent := make(chan error, 1)
	go func() {
		sent <- seqcheck.Send(sendCtx, seqcheck.SendOptions{Netns: b.cl.Netns, Dst: dst, Port: port, Flows: 8, PktsPerFlow: 1 << 28, Size: 64, CPU: 0,
			Pause: b.guardTimeout / 2, PauseEvery: 16})
	}()
	time.Sleep(time.Second)
	if err := b.d.AttachSplit(b.nic); err != nil {
		stop()
		<-sent
		t.Fatal(err)
	}
	// A flow moves once its first counted frames arrived: at once on
	// hardware, within seconds under emulation.
	before, start := splitStage(t, b.d).SteeredTo[1], time.Now()
	var redirected uint64
	for redirected == 0 && time.Since(start) < 10*time.Second {
		time.Sleep(100 * time.Millisecond)
		redirected = splitStage(t, b.d).SteeredTo[1] - before
	}
	waited := time.Since(start)
	time.Sleep(500 * time.Millisecond) // split flows running on
	stop()
	if err := <-sent; err != nil && sendCtx.Err() == nil {
		t.Fatal(err)
	}
	var got, bad uint64
	for _, st := range <-done {
		got += st.Received
		bad += st.Reordered + st.Duplicates
	}
	g := splitStage(t, b.d).Guard
	t.Logf("%d datagrams received, %d reordered or duplicated; the first frames redirected to CPU 1 %s after the attach; split guard: %d holds, %d moves, %d timeouts",
		got, bad, waited.Round(time.Millisecond), g.Holds, g.Moved, g.Timeouts)
	if bad != 0 {
		t.Errorf("%d datagrams reordered or duplicated", bad)
	}
	if redirected == 0 {
		t.Error("no frame of the running flows was split in the 10 s after the attach")
		b.logInline(t)
	}
}

// guardAsAgent sets the guard up as the agent does: the container's end
// counts arrivals, the VXLAN device its drops. It returns the split hook's
// id and entry, which must mark its packets.
func (b *splitBed) guardAsAgent(t *testing.T) (uint32, falconHook) {
	t.Helper()
	for _, st := range []struct {
		ns, name string
		ifindex  int
		last     bool
	}{{b.sv.Netns, b.sv.Dev, b.devIdx, true}, {b.h2.Netns, b.h2.Overlay, b.ovlIdx, false}} {
		ino, err := netns.Inode(st.ns)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.d.AddStage(StageDev{NetnsIno: uint32(ino), Ifindex: st.ifindex, Last: st.last}); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.d.AttachArrival(Hook{Netns: b.sv.Netns, Ifindex: b.devIdx, Name: b.sv.Dev}); err != nil {
		t.Fatal(err)
	}
	id := b.d.splits[b.nic.Hook().key()].id
	var hk falconHook
	if err := b.d.maps.FalconHooks.Lookup(id, &hk); err != nil {
		t.Fatal(err)
	}
	if hk.Marks == 0 {
		t.Error("the split hook does not mark its packets, with the NIC's tc hook there to carry the mark")
	}
	return id, hk
}

// logInline logs each split flow still inline, with what its guard waits
// for: what it sent against what arrived in its done slot.
func (b *splitBed) logInline(t *testing.T) {
	var (
		k   falconFlowletKey
		v   falconFlowlet
		hk  falconHook
		per []falconDone
	)
	id := b.d.splits[b.nic.Hook().key()].id
	if err := b.d.maps.FalconHooks.Lookup(id, &hk); err != nil {
		t.Log(err)
		return
	}
	for it := b.d.maps.FalconFlowlets.Iterate(); it.Next(&k, &v); {
		if k.Hook != id || v.Target != targetFallback {
			continue
		}
		var arrived uint64
		if b.d.maps.FalconDone.Lookup(&k.Flowhash, &per) == nil {
			for _, c := range per {
				arrived += c.C[doneSlot(hk)]
			}
		}
		t.Logf("split flow %x inline: sent %d (base %d), arrived %d", k.Flowhash, v.Sent, v.Base, arrived)
	}
}
