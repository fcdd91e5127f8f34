package probes

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/stagetrace"
	"github.com/falconnet/falcon/lab/testbed"
)

// StageCost times each receive stage's NET_RX work (--stage-cost): started
// once, before any testbed, so a kernel that cannot run it fails the bench
// before anything is built; every Sample reads it.
type StageCost struct{ t *stagetrace.CostTracer }

// StartStageCost starts the stage-cost timer.
func StartStageCost() (*StageCost, error) {
	t, err := stagetrace.StartCost()
	if err != nil {
		return nil, err
	}
	return &StageCost{t}, nil
}

// Close stops the timer.
func (c *StageCost) Close() error { return c.t.Close() }

// stageOrder sorts the named stages first, along the path.
var stageOrder = map[string]int{"nic": 1, "vxlan": 2, "container": 3, "backlog": 5, "other": 6}

// stageCosts names the stages of a window's delta d on testbed tb. Only the
// receiving host (h2) and its containers are kept: the sending host's
// devices (its TCP ACKs, the sender's own backlog) are dropped, as are
// namespaces outside the testbed. "backlog" and "other" belong to no
// namespace and count whatever ran on the CPU, the sending host's part too.
func stageCosts(tb *testbed.Testbed, d stagetrace.CostSnapshot) []schema.StageCost {
	h := tb.Hosts[1]
	containers := map[string]string{} // netns -> its device towards the host
	for _, c := range h.Containers {
		containers[c.Netns] = c.Dev
	}
	type key struct {
		stage string
		cpu   int
	}
	sums := map[key]*schema.StageCost{}
	for _, r := range d.Records {
		stage := r.Special()
		if stage == "" {
			dev, ok := containers[r.Netns]
			switch {
			case r.Netns == h.Netns && r.Dev == h.NIC:
				stage = "nic"
			case r.Netns == h.Netns && h.Overlay != "" && r.Dev == h.Overlay:
				stage = "vxlan"
			case ok && r.Dev == dev:
				stage = "container"
			case r.Netns != h.Netns && !ok:
				continue
			case r.Dev == "":
				stage = fmt.Sprintf("ifindex %d", r.Ifindex) // gone before the window closed
			default:
				stage = r.Dev
			}
		}
		k := key{stage, r.CPU}
		s := sums[k]
		if s == nil {
			s = &schema.StageCost{Stage: stage, CPU: r.CPU}
			sums[k] = s
		}
		s.Ns += r.Ns
		s.SKBs += r.SKBs
		s.Segs += r.Segs
		s.UntimedSegs += r.UntimedSegs
	}
	var out []schema.StageCost
	for _, s := range sums {
		out = append(out, *s)
	}
	rank := func(s string) int {
		if r, ok := stageOrder[s]; ok {
			return r
		}
		return 4 // the receiving host's other devices, between the path and the rest
	}
	slices.SortFunc(out, func(a, b schema.StageCost) int {
		return cmp.Or(cmp.Compare(rank(a.Stage), rank(b.Stage)), cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.CPU, b.CPU))
	})
	return out
}
