package stagetrace

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/seqcheck"
	"github.com/falconnet/falcon/internal/testbed"
)

// On each container layout of the testbed, sequenced UDP from a container
// on h1 to one on h2 shows at h2's NIC, its overlay device and the
// container's device with one Flow key, and arrives in order.
func TestTestbedLayouts(t *testing.T) {
	requireRoot(t)
	if testing.Short() {
		t.Skip("builds three testbeds")
	}
	for _, layout := range []string{"docker", "flannel", "calico"} {
		t.Run(layout, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			name := fmt.Sprintf("st%d%s", os.Getpid(), layout)
			tb, err := testbed.Up(ctx, testbed.Spec{Name: name, Layout: layout, Containers: 1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if err := testbed.Down(name); err != nil {
					t.Error(err)
				}
			})
			h2 := tb.Hosts[1]
			cl, sv := tb.Hosts[0].Containers[0], h2.Containers[0]
			tr, err := Start(Options{Netns: []string{h2.Netns, sv.Netns}, Proto: 17,
				PortMin: portUDP4, PortMax: portUDP4, SeqNetns: sv.Netns, SeqDev: sv.Dev})
			if err != nil {
				t.Fatal(err)
			}
			defer tr.Close()

			dst := netip.MustParseAddr(sv.Addr)
			r, err := seqcheck.Listen(sv.Netns, dst, portUDP4)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			err = seqcheck.SendSeq(ctx, cl.Netns, dst, portUDP4, 4, 300, 512)
			if err != nil {
				t.Fatal(err)
			}
			got, err := r.Wait(ctx, 0)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := tr.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			stages := StagesByFlow(recs)
			order, err := tr.Reordering()
			if err != nil {
				t.Fatal(err)
			}
			seen := map[Flow]SeqRecord{}
			for _, o := range order {
				seen[o.Flow] = o
			}
			if len(got) != 4 {
				t.Fatalf("%d flows arrived, want 4", len(got))
			}
			for from, s := range got {
				f := Flow{Proto: 17, Src: from.Addr().Unmap(), Dst: dst, Sport: from.Port(), Dport: portUDP4}
				for _, st := range []string{h2.Netns + "/" + h2.NIC, h2.Netns + "/" + h2.Overlay, sv.Netns + "/" + sv.Dev} {
					n := Total(stages[f][st])
					t.Logf("%s at %s: %s", f, st, FormatCPUs(stages[f][st]))
					if n < s.Received {
						t.Errorf("%s at %s: %d packets, the receiver got %d; stages: %v", f, st, n, s.Received, stages[f])
					}
				}
				if s.Reordered != 0 || seen[f].Reordered != 0 || seen[f].Seen < s.Received {
					t.Errorf("%s: receiver %+v, tracer %+v", f, s, seen[f])
				}
			}
		})
	}
}
