package measure

import (
	"context"
	"slices"
	"sync/atomic"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
	"github.com/falconnet/falcon/lab/xdpsend"
)

// KernelSent is what the kernel sender reports of a run, as a tool would.
type KernelSent struct {
	Frames       uint64 `json:"frames"`
	FrameBytes   int    `json:"frame_bytes"`
	Flows        int    `json:"flows"`
	Encapsulated bool   `json:"encapsulated"`
}

// kernelUDP drives the UDP workloads from the kernel sender on the sending
// host's wire device instead of clients in a container: one flow (udp),
// --clients flows into one sockperf server (udp-stress), or one flow to
// each of --flows servers (multi-flow). Packets/s are the receivers' UDP
// datagrams over the window; loss compares them with the frames the sender
// handed to the wire in the window.
func (e *env) kernelUDP(ctx context.Context) (schema.Run, error) {
	dst, flows := e.servers[:1], 1
	switch e.w.Pairs {
	case workload.ClientsToOne:
		flows = e.cfg.Clients
	case workload.PairPerFlow:
		dst = nil
		for i := 0; i < e.cs.Flows; i++ {
			dst = append(dst, e.servers[i%len(e.servers)])
		}
	}
	var t traffic
	for i, srv := range dst {
		port, i := e.port(11111, i), i
		if !slices.Contains(t.rx, srv.Netns) {
			t.rx = append(t.rx, srv.Netns)
		}
		t.servers = append(t.servers, func(ctx context.Context) (workload.Server, error) {
			return workload.StartSockperfServer(ctx, srv.Netns, srv.Addr, port, e.receiverCPU(i), false)
		})
	}
	var live atomic.Pointer[xdpsend.Sender]
	t.sent = func() (int64, error) {
		if s := live.Load(); s != nil {
			n, err := s.Sent()
			return int64(n), err
		}
		return 0, nil
	}
	cl, from, to := e.clients[0], e.tb.Hosts[0], e.tb.Hosts[1]
	t.clients = append(t.clients, func(ctx context.Context) (any, error) {
		var tpls []xdpsend.Template
		for i, srv := range dst {
			tpl, err := xdpsend.Learn(ctx, from.Netns, from.NIC, cl.Netns, srv.Addr, e.port(11111, i), e.cs.Size)
			if err != nil {
				return nil, err
			}
			tpls = append(tpls, tpl)
		}
		undo, err := xdpsend.ReceiverNAPI(to.Netns, to.NIC)
		if err != nil {
			return nil, err
		}
		defer undo()
		s, err := xdpsend.Load(xdpsend.Options{Netns: from.Netns, Dev: from.NIC, CPU: e.senderCPU(0)[0],
			Templates: tpls, Flows: flows, Duration: e.clientTime()})
		if err != nil {
			return nil, err
		}
		live.Store(s)
		defer func() {
			live.Store(nil)
			s.Close()
		}()
		n, err := s.Run(ctx)
		return KernelSent{Frames: n, FrameBytes: len(tpls[0].Frame), Flows: flows * len(tpls),
			Encapsulated: tpls[0].Encapsulated()}, err
	})
	run, _, err := e.window(ctx, t)
	if err != nil {
		return run, err
	}
	udpReceived(&run, run.Counters["tx.kernel.frames"])
	run.Gbps = run.PPS * float64(e.cs.Size) * 8 / 1e9
	return run, nil
}
