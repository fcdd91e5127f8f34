package agent

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/journal"
	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/testbed"
	"github.com/falconnet/falcon/lab/workload"
)

// TestFastPathSenderOrder: one TCP flow on the fast path while both hosts'
// caches are flushed every 100 ms, the sender's ACKs NOT pinned to its CPU
// (so TCP sends from the application's CPU and from the ACKs'): with
// sender-rps (the default: RPS on the client container's host-side veth,
// each flow's data on its home CPU's backlog) no segment reaches the server
// after one sent later, and the veth's RPS is restored when the agents stop.
// The same flow without it runs first, as the control: it shows what the
// kernel's two backlogs do (logged; 700-3800 segments in 6-15 s runs here),
// and that the check sees reordering where there is some.
func TestFastPathSenderOrder(t *testing.T) {
	needFastPath(t)
	if err := workload.CheckTools("iperf3", "taskset"); err != nil {
		t.Skip(err)
	}
	for i, layout := range []string{"docker", "calico"} {
		t.Run(layout, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			tb := ibed(t, fmt.Sprintf("so%d", i), layout, 1)
			warm(t, tb)
			without := senderOrderRun(ctx, t, tb, 5321, "fastpath:sender-rps=false")
			with := senderOrderRun(ctx, t, tb, 5322, "fastpath")
			t.Logf("segments reached the server after one sent later: %d of %d without the sender's RPS, %d of %d with it (%.0f and %.0f Mbit/s, %d and %d retransmits, %d and %d rehashes)",
				without.reordered, without.segs, with.reordered, with.segs, without.BitsPerSecond/1e6, with.BitsPerSecond/1e6,
				without.Retransmits, with.Retransmits, without.rehash, with.rehash)
			// The bursts once seen here (1 run in 5) were the receiver's GRO
			// holding the two paths' packets apart: fast ones went without
			// the outer UDP checksum the slow path sends (bpf/fastpath_gso.h).
			if with.reordered > 0 {
				t.Errorf("%d of %d segments reordered with the sender's RPS (%d without); the first %s",
					with.reordered, with.segs, without.reordered, describeInversion(with.first, nil))
			}
		})
	}
}

// senderOrderRun runs the flow under flushes with the fast path of mode on
// both hosts, checking the client's host-side veth's RPS while it runs and
// after the agents stopped.
func senderOrderRun(ctx context.Context, t *testing.T, tb *testbed.Testbed, port int, mode string) tcpResult {
	t.Helper()
	h := tb.Hosts[0]
	ns := h.Netns
	if h.Sandbox != "" {
		ns = h.Sandbox
	}
	path := "/sys/class/net/" + h.Containers[0].HostVeth + "/queues/rx-0/rps_cpus"
	before := read(t, ns, path)
	as := fastAgents(ctx, t, tb, mode)
	want := before
	if as[0].host.Opts.SenderRPS {
		want = cpuset.Mask(as[0].host.Opts.CPUs)
	}
	if got := read(t, ns, path); got != want {
		t.Errorf("%s: %s rps_cpus = %s, want %s", mode, h.Containers[0].HostVeth, got, want)
	}
	if listed := fastReportOf(t, as[0]).SenderRPS; slices.Contains(listed, h.Containers[0].HostVeth) != as[0].host.Opts.SenderRPS {
		t.Errorf("%s: status lists RPS set on %v", mode, listed)
	}
	flush, stopFlush := context.WithCancel(ctx)
	done := []<-chan int{announce(flush, tb.Hosts[0].Netns, 100*time.Millisecond), announce(flush, tb.Hosts[1].Netns, 100*time.Millisecond)}
	r := tcpFlow(ctx, t, tb, port, 6*time.Second, []int{1}, func(run func()) { run() })
	stopFlush()
	for _, d := range done {
		<-d
	}
	if eg := fastReportOf(t, as[0]); eg.Counters["egress_hit"] == 0 {
		t.Errorf("%s: the fast path carried nothing of the flow: %v", mode, eg.Counters)
	}
	for _, a := range as {
		if err := a.Stop(); err != nil {
			t.Error(err)
		}
	}
	if got := read(t, ns, path); got != before {
		t.Errorf("%s: %s rps_cpus = %s after the agents stopped, want %s", mode, h.Containers[0].HostVeth, got, before)
	}
	return r
}

// TestNotSenderRPS: a stand-down restores steering's values but not the
// fast path's sender RPS, in its namespace alone.
func TestNotSenderRPS(t *testing.T) {
	f := &fastPath{ns: "h1", rps: map[string]string{"h1/7": "cali1"}}
	keep := f.notSenderRPS()
	q := func(dev string) string { return "/sys/class/net/" + dev + "/queues/rx-0/rps_cpus" }
	for _, c := range []struct {
		e    journal.Entry
		want bool
	}{
		{journal.Entry{Netns: "h1", Path: q("cali1")}, false},
		{journal.Entry{Netns: "h1", Path: q("vxlan.calico")}, true},
		{journal.Entry{Netns: "h1-c0", Path: q("cali1")}, true},
		{journal.Entry{Netns: "h1-c0", Path: q("eth0")}, true},
	} {
		if got := keep(c.e); got != c.want {
			t.Errorf("%+v: restored %v, want %v", c.e, got, c.want)
		}
	}
}

// TestFastPathSenderHomeAfterARP: a UDP flow whose first datagrams wait
// for the neighbour's answer gets its home on the CPU that sends it, with
// sender-rps: the ARP request stays on the sender's CPU, so the answer
// the host gives (docker: the VXLAN device's proxy; calico: the veth's
// proxy_arp) releases the queued datagrams there. By the kernel's hash,
// the same for every ARP frame of a boot, it went to one CPU, and a flow
// sent from the other was homed on it: each of its datagrams moved to
// that CPU's backlog, on 2 vCPUs the receiver's. Senders pinned to each
// CPU in turn, the neighbour flushed before each, so one of the two would
// meet that CPU whichever it is.
func TestFastPathSenderHomeAfterARP(t *testing.T) {
	needFastPath(t)
	if runtime.NumCPU() < 2 {
		t.Skip("needs two CPUs")
	}
	for i, layout := range []string{"docker", "calico"} {
		t.Run(layout, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			tb := ibed(t, fmt.Sprintf("arp%d", i), layout, 1)
			as := fastAgents(ctx, t, tb, "fastpath")
			client := tb.Hosts[0].Containers[0].Netns
			for cpu := range 2 {
				if out, err := exec.Command("ip", "-n", client, "neigh", "flush", "all").CombinedOutput(); err != nil {
					t.Fatalf("ip neigh flush in %s: %v\n%s", client, err, out)
				}
				sendPairs(ctx, t, tb, uint16(7400+cpu), seqcheck.SendOptions{Flows: 4, PktsPerFlow: 200, Size: 64, CPU: cpu})
			}
			if moved := fastReportOf(t, as[0]).Counters["send_moved"]; moved != 0 {
				t.Errorf("%d datagrams moved off their sender's CPU: a flow was homed where the ARP answer came", moved)
			}
		})
	}
}
