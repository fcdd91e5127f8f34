package seqcheck

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"
)

var lo = netip.MustParseAddr("127.0.0.1")

func TestSendRecvInOrder(t *testing.T) {
	r, err := Listen("", lo, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Send(ctx, SendOptions{Dst: lo, Port: r.Addr().Port(), Flows: 4, PktsPerFlow: 500, Size: 100, CPU: -1}); err != nil {
		t.Fatal(err)
	}
	got, err := r.Wait(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 {
		t.Fatalf("got %d flows, want 4: %v", len(got), got)
	}
	idx := map[uint32]bool{}
	for a, s := range got {
		idx[s.Index] = true
		if s.Total != 500 || s.Received+s.Lost != 500 || s.Reordered != 0 || s.Duplicates != 0 {
			t.Errorf("flow %s: %+v", a, s)
		}
	}
	if len(idx) != 4 {
		t.Errorf("flow indexes %v, want 0..3", idx)
	}
}

// Datagrams written out of order by hand are counted as the receiver sees
// them: 0 3 1 2 3 4 has two arrivals below the maximum and one duplicate.
func TestRecvCountsReorderLossDuplicates(t *testing.T) {
	r, err := Listen("", lo, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	c, err := net.DialUDP("udp", nil, net.UDPAddrFromAddrPort(r.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	buf := make([]byte, HeaderLen)
	for _, seq := range []uint64{0, 3, 1, 2, 3, 4} {
		header{seq: seq, total: 6, flows: 1}.put(buf)
		if _, err := c.Write(buf); err != nil {
			t.Fatal(err)
		}
	}
	c.Write([]byte("not a sequenced datagram, ignored"))
	got, err := r.Wait(context.Background(), 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	want := Stats{Total: 6, Received: 5, Reordered: 2, Duplicates: 1, Lost: 1}
	g := got[c.LocalAddr().(*net.UDPAddr).AddrPort()]
	at := g.ReorderedAt
	g.ReorderedAt = nil
	if len(got) != 1 || !reflect.DeepEqual(g, want) || len(at) != 2 || at[1].Before(at[0]) {
		t.Fatalf("got %+v, want one flow %+v with 2 reorder times", got, want)
	}
}

func TestSendRejectsBadInput(t *testing.T) {
	ok := SendOptions{Dst: lo, Port: 9, Flows: 1, PktsPerFlow: 1, Size: HeaderLen, CPU: -1}
	bad := map[string]func(*SendOptions){
		"no dst":     func(o *SendOptions) { o.Dst = netip.Addr{} },
		"port 0":     func(o *SendOptions) { o.Port = 0 },
		"no flows":   func(o *SendOptions) { o.Flows = 0 },
		"no packets": func(o *SendOptions) { o.PktsPerFlow = 0 },
		"tiny":       func(o *SendOptions) { o.Size = HeaderLen - 1 },
		"huge":       func(o *SendOptions) { o.Size = 70000 },
		"cpu":        func(o *SendOptions) { o.CPU = 1 << 20 },
		"netns":      func(o *SendOptions) { o.Netns = "fct-no-such-netns" },
	}
	if err := ok.validate(); err != nil {
		t.Fatalf("valid options rejected: %v", err)
	}
	for name, f := range bad {
		o := ok
		f(&o)
		if err := Send(context.Background(), o); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestWaitNothingArrived(t *testing.T) {
	r, err := Listen("", lo, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := r.Wait(ctx, 0); err == nil {
		t.Fatal("Wait without any datagram returned no error")
	}
}

// A paced sender still delivers every flow whole and in order.
func TestSendPaced(t *testing.T) {
	r, err := Listen("", lo, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	o := SendOptions{Dst: lo, Port: r.Addr().Port(), Flows: 2, PktsPerFlow: 40, Size: HeaderLen,
		CPU: -1, Pause: time.Millisecond, PauseEvery: 10}
	if err := Send(ctx, o); err != nil {
		t.Fatal(err)
	}
	got, err := r.Wait(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for a, s := range got {
		if s.Received != 40 || s.Reordered != 0 {
			t.Errorf("flow %s: %+v", a, s)
		}
	}
	o.Pause = -time.Millisecond
	if err := Send(ctx, o); err == nil {
		t.Error("a negative pause was accepted")
	}
}
