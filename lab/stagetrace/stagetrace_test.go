package stagetrace

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/seqcheck"
)

const (
	portUDP4 = 40001
	portUDP6 = 40002
	portTCP  = 40003
)

var (
	h1v4  = netip.MustParseAddr("10.77.0.1")
	c1v4  = netip.MustParseAddr("10.77.0.2")
	h1v4b = netip.MustParseAddr("10.78.0.1") // over the IPv6 underlay
	c1v4b = netip.MustParseAddr("10.78.0.2")
	h1v6  = netip.MustParseAddr("fd77::1")
	c1v6  = netip.MustParseAddr("fd77::2")
)

// traffic is what was sent from h1 to c1, by flow, with the tunnel it took.
type traffic struct {
	flows  map[Flow]string // flow -> VXLAN device on h2
	udp    map[Flow]seqcheck.Stats
	tcpLen int
}

// sendTraffic sends sequenced UDP over both tunnels, IPv4 and IPv6 inner,
// and a few TCP connections, from h1 to c1, and waits until c1 got it all.
func sendTraffic(t *testing.T, o *overlay, cpu int) traffic {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tr := traffic{flows: map[Flow]string{}, udp: map[Flow]seqcheck.Stats{}, tcpLen: 256 << 10}
	tr.sendUDP(ctx, t, o, cpu)
	tr.sendTCP(t, o)
	return tr
}

// sendUDP sends sequenced UDP flows over both tunnels, IPv4 and IPv6
// inner, from CPU cpu.
func (tr *traffic) sendUDP(ctx context.Context, t *testing.T, o *overlay, cpu int) {
	t.Helper()
	type udpRun struct {
		src, dst netip.Addr
		port     uint16
		flows    int
		vxlan    string
	}
	for _, u := range []udpRun{
		{h1v4, c1v4, portUDP4, 4, "vxlan0"},
		{h1v4b, c1v4b, portUDP4 + 10, 2, "vxlan6"},
		{h1v6, c1v6, portUDP6, 2, "vxlan0"},
	} {
		r, err := seqcheck.Listen(o.c1, u.dst, u.port)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		err = seqcheck.Send(ctx, seqcheck.SendOptions{Netns: o.h1, Dst: u.dst, Port: u.port,
			Flows: u.flows, PktsPerFlow: 300, Size: 512, CPU: cpu})
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.Wait(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != u.flows {
			t.Fatalf("%s: %d flows arrived, want %d", u.dst, len(got), u.flows)
		}
		for from, s := range got {
			f := Flow{Proto: 17, Src: from.Addr().Unmap(), Dst: u.dst, Sport: from.Port(), Dport: u.port}
			tr.flows[f] = u.vxlan
			tr.udp[f] = s
		}
	}
}

// sendTCP sends two TCP connections' streams of tcpLen bytes.
func (tr *traffic) sendTCP(t *testing.T, o *overlay) {
	t.Helper()
	var ln net.Listener
	err := netns.Do(o.c1, func() (err error) {
		ln, err = net.Listen("tcp", netip.AddrPortFrom(c1v4, portTCP).String())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 2)
	go func() {
		for range 2 {
			c, err := ln.Accept()
			if err != nil {
				done <- err
				return
			}
			go func() {
				defer c.Close()
				n, err := io.Copy(io.Discard, c)
				if err == nil && n != int64(tr.tcpLen) {
					err = errors.New("short TCP stream")
				}
				done <- err
			}()
		}
	}()
	for range 2 {
		var c net.Conn
		err := netns.Do(o.h1, func() (err error) {
			c, err = net.Dial("tcp", netip.AddrPortFrom(c1v4, portTCP).String())
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		ap := c.LocalAddr().(*net.TCPAddr).AddrPort()
		tr.flows[Flow{Proto: 6, Src: ap.Addr().Unmap(), Dst: c1v4, Sport: ap.Port(), Dport: portTCP}] = "vxlan0"
		_, err = c.Write(make([]byte, tr.tcpLen))
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func traceOptions(o *overlay) Options {
	return Options{Netns: []string{o.h2, o.c1}, PortMin: portUDP4, PortMax: portUDP4 + 10,
		Seq: []Device{{Netns: o.c1, Name: "eth0"}}}
}

// Every flow shows at the NIC (outer VXLAN parsed down to the inner
// flow), at its VXLAN device and at the container's eth0, with the same
// Flow key, and no flow is reordered at eth0.
func TestStagesAcrossOverlay(t *testing.T) {
	t.Run("tp_btf", func(t *testing.T) { testStagesAcrossOverlay(t, false) })
	t.Run("raw_tp", func(t *testing.T) { testStagesAcrossOverlay(t, true) })
}

func testStagesAcrossOverlay(t *testing.T, raw bool) {
	o := newOverlay(t, true)
	// Run-time statistics stay on only while this fd is open.
	if st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME)); err == nil {
		defer st.Close()
	}
	opts := traceOptions(o)
	opts.rawOnly = raw
	tr, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	t.Logf("attached at %s", tr.Hook())
	// One sending CPU: a sender the scheduler moves mid-flow fills two
	// CPUs' backlogs, and the kernel then delivers the flow out of order
	// by itself (CI saw 9 of 300 reordered so), which is not the tracer's
	// to explain.
	sent := sendTraffic(t, o, 0)

	recs, err := tr.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	stages := StagesByFlow(recs)
	for f, vx := range sent.flows {
		got := stages[f]
		for _, st := range []string{o.h2 + "/nic0", o.h2 + "/" + vx, o.c1 + "/eth0"} {
			n := Total(got[st])
			t.Logf("%s at %s: %s", f, st, FormatCPUs(got[st]))
			if n == 0 {
				t.Errorf("%s not seen at %s; stages seen: %v", f, st, got)
			}
			if s, ok := sent.udp[f]; ok && n < s.Received {
				t.Errorf("%s at %s: %d packets counted, the receiver got %d", f, st, n, s.Received)
			}
		}
	}

	order, err := tr.Reordering()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Flow]SeqRecord{}
	for _, r := range order {
		seen[r.Flow] = r
	}
	for f, s := range sent.udp {
		if s.Reordered != 0 || s.Duplicates != 0 {
			t.Errorf("%s: receiver saw %+v", f, s)
		}
		r := seen[f]
		if r.Seen < s.Received || r.Reordered != 0 || r.MaxSeq != s.Total-1 {
			t.Errorf("%s at eth0: %+v, receiver %+v", f, r, s)
		}
	}
	// TCP over IPv4, numbered by IP ID: every data segment of the stream
	// (no segment carries more than 1500 bytes), none reordered.
	for f := range sent.flows {
		if r := seen[f]; f.Proto == 6 && (r.Seen < uint64(sent.tcpLen/1500) || r.Reordered != 0) {
			t.Errorf("%s at eth0: %+v, %d bytes sent", f, r, sent.tcpLen)
		}
	}
	st, err := tr.Stats()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v", st)
	if st.RunCount > 0 {
		t.Logf("cost %v per run", st.RunTime/time.Duration(st.RunCount))
	}
	if st.MapFull != 0 || st.Counted == 0 || st.Missed != 0 {
		t.Errorf("stats %+v", st)
	}
}

// Close detaches the program and frees it: no link, program or map of the
// tracer survives.
func TestCloseLeavesNothing(t *testing.T) {
	labtest.NeedRoot(t)
	tr, err := Start(Options{})
	if err != nil {
		t.Fatal(err)
	}
	info, err := tr.link.Info()
	if err != nil {
		t.Fatal(err)
	}
	minfo, err := tr.coll.Maps[stagetraceMapStages].Info()
	if err != nil {
		t.Fatal(err)
	}
	mapID, _ := minfo.ID()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.Snapshot(); err == nil {
		t.Error("Snapshot after Close returned no error")
	}
	// The kernel frees links and programs after an RCU grace period.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var alive []string
		if l, err := link.NewFromID(info.ID); err == nil {
			l.Close()
			alive = append(alive, "link")
		}
		if p, err := ebpf.NewProgramFromID(info.Program); err == nil {
			p.Close()
			alive = append(alive, "program")
		}
		if m, err := ebpf.NewMapFromID(mapID); err == nil {
			m.Close()
			alive = append(alive, "map")
		}
		it := new(link.Iterator)
		for it.Next() {
			if li, err := it.Link.Info(); err == nil && li.Program == info.Program {
				alive = append(alive, "link to the program")
			}
		}
		if len(alive) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Close still alive: %v", alive)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestStartRejectsBadOptions(t *testing.T) {
	labtest.NeedRoot(t)
	for name, o := range map[string]Options{
		"tracepoint": {Tracepoint: "sched_switch"},
		"proto":      {Proto: 1},
		"ports":      {PortMin: 2, PortMax: 1},
		"vxlan":      {VXLANPorts: []uint16{1, 2, 3, 4, 5}},
		"vxlan0":     {VXLANPorts: []uint16{0}},
		"netns":      {Netns: []string{"fct-no-such-netns"}},
		"seq dev":    {Seq: []Device{{Name: "fct-no-such-dev"}}},
		"seq netns":  {Seq: []Device{{Netns: "fct-no-such-netns", Name: "lo"}}},
		"seq no dev": {Seq: []Device{{Netns: "x"}}},
		"seq many":   {Seq: make([]Device, maxSeqDevices+1)},
		"max flows":  {MaxFlows: -1},
	} {
		if tr, err := Start(o); err == nil {
			tr.Close()
			t.Errorf("%s: no error", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
