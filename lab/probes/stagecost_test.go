package probes

import (
	"fmt"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
)

func TestStageCostsNamesReceivingHost(t *testing.T) {
	tb := &testbed.Testbed{Layout: "docker", Hosts: [2]testbed.Host{
		{Netns: "fb-x-h1", NIC: "eth0", Overlay: "vxlan0", Containers: []testbed.Container{{Netns: "fb-x-h1-c0", Dev: "eth0"}}},
		{Netns: "fb-x-h2", NIC: "eth0", Overlay: "vxlan0", Containers: []testbed.Container{
			{Netns: "fb-x-h2-c0", Dev: "eth0"}, {Netns: "fb-x-h2-c1", Dev: "eth0"}}},
	}}
	rec := func(netns, dev string, ifindex uint32, cpu int, ns, segs uint64) stagetrace.CostRecord {
		return stagetrace.CostRecord{CostKey: stagetrace.CostKey{NetnsInode: 1, Ifindex: ifindex, CPU: cpu},
			Netns: netns, Dev: dev, Cost: stagetrace.Cost{Ns: ns, SKBs: segs, Segs: segs}}
	}
	other := stagetrace.CostRecord{CostKey: stagetrace.CostKey{Ifindex: stagetrace.CostOther, CPU: 0}, Cost: stagetrace.Cost{Ns: 7}}
	backlog := stagetrace.CostRecord{CostKey: stagetrace.CostKey{Ifindex: stagetrace.CostBacklog, CPU: 1}, Cost: stagetrace.Cost{Ns: 3}}
	d := stagetrace.CostSnapshot{Records: []stagetrace.CostRecord{
		other, backlog,
		rec("fb-x-h2-c0", "eth0", 2, 0, 100, 10),
		rec("fb-x-h2-c1", "eth0", 2, 0, 50, 5), // both containers: one stage
		rec("fb-x-h2", "vxlan0", 3, 0, 80, 10),
		rec("fb-x-h2", "eth0", 2, 1, 90, 10),
		rec("fb-x-h2", "br0", 4, 0, 9, 1),
		rec("fb-x-h2", "", 9, 0, 1, 1),         // gone before the window closed
		rec("fb-x-h2-c0", "lo", 1, 0, 2, 1),    // a container's other device
		rec("fb-x-h1", "eth0", 2, 0, 70, 10),   // the sending host: dropped
		rec("fb-x-h1-c0", "eth0", 2, 0, 60, 6), // its container: dropped
		rec("", "eth0", 2, 0, 50, 5),           // outside the testbed: dropped
	}}
	got := fmt.Sprint(stageCosts(tb, d))
	want := fmt.Sprint([]schema.StageCost{
		{Stage: "nic", CPU: 1, Ns: 90, SKBs: 10, Segs: 10},
		{Stage: "vxlan", CPU: 0, Ns: 80, SKBs: 10, Segs: 10},
		{Stage: "container", CPU: 0, Ns: 150, SKBs: 15, Segs: 15},
		{Stage: "br0", CPU: 0, Ns: 9, SKBs: 1, Segs: 1},
		{Stage: "ifindex 9", CPU: 0, Ns: 1, SKBs: 1, Segs: 1},
		{Stage: "lo", CPU: 0, Ns: 2, SKBs: 1, Segs: 1},
		{Stage: "backlog", CPU: 1, Ns: 3},
		{Stage: "other", CPU: 0, Ns: 7},
	})
	if got != want {
		t.Errorf("stages\n got %s\nwant %s", got, want)
	}

	host := &testbed.Testbed{Layout: "host", Hosts: [2]testbed.Host{{Netns: "h1", NIC: "eth0"}, {Netns: "h2", NIC: "eth0"}}}
	if got := stageCosts(host, stagetrace.CostSnapshot{Records: []stagetrace.CostRecord{rec("h2", "eth0", 2, 0, 5, 1)}}); len(got) != 1 || got[0].Stage != "nic" {
		t.Errorf("host layout: %+v, want the nic only", got)
	}
}
