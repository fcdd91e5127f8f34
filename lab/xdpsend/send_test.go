package xdpsend

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// TestSendOnLayouts: on each layout the frames learned for two receiving
// containers, sent from the kernel for 2 s over 4 flows each, reach both
// containers' UDP about evenly, about as many as were sent.
func TestSendOnLayouts(t *testing.T) {
	labtest.NeedTestbeds(t)
	if err := LiveFrames(); err != nil {
		t.Skip(err)
	}
	for _, layout := range []string{"host", "docker", "flannel", "calico"} {
		t.Run(layout, func(t *testing.T) {
			name := fmt.Sprintf("xs%s%d", layout[:3], os.Getpid()%100000)
			tb := labtest.Testbed(t, testbed.Spec{Name: name, Layout: layout, Containers: 2})
			clients, servers := tb.Endpoints()
			tx, rx := tb.Hosts[0], tb.Hosts[1]
			var tpls []Template
			for _, srv := range servers {
				tpl, err := Learn(context.Background(), tx.Netns, tx.NIC, clients[0].Netns, srv.Addr, 9, 200)
				if err != nil {
					t.Fatal(err)
				}
				if want := layout != "host"; tpl.Encapsulated() != want {
					t.Errorf("encapsulated %v, want %v", tpl.Encapsulated(), want)
				}
				tpls = append(tpls, tpl)
			}
			undo, err := ReceiverNAPI(rx.Netns, rx.NIC)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Load(Options{Netns: tx.Netns, Dev: tx.NIC, CPU: 0, Templates: tpls, Flows: 4, Duration: 2 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// A port nobody listens on: the kernel counts such datagrams
			// (NoPorts) where it would deliver them.
			got := func() (n []int64) {
				for _, srv := range servers {
					c, err := procfs.ReadSNMP(srv.Netns)
					if err != nil {
						t.Fatal(err)
					}
					n = append(n, c["Udp"]["NoPorts"]+c["Udp"]["InDatagrams"])
				}
				return n
			}
			before := got()
			n, err := s.Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(200 * time.Millisecond)
			after := got()
			if err := undo(); err != nil {
				t.Fatal(err)
			}
			var sum int64
			for i := range after {
				d := after[i] - before[i]
				sum += d
				if d < int64(n)/int64(2*len(after)) {
					t.Errorf("server %d of %d got %d of %d frames", i, len(after), d, n)
				}
			}
			t.Logf("%s: sent %d frames of %d B in 2 s to %d servers, %d reached their UDP", layout, n, len(tpls[0].Frame), len(tpls), sum)
			if n < FirstBatch || sum < int64(n)/2 {
				for _, ns := range []string{rx.Netns, servers[0].Netns} {
					o1, _ := exec.Command("ip", "netns", "exec", ns, "nstat", "-a").CombinedOutput()
					o2, _ := exec.Command("ip", "-n", ns, "-s", "link").CombinedOutput()
					t.Logf("%s\n%s\n%s", ns, o1, o2)
				}
				t.Errorf("sent %d, the containers' UDP saw %d", n, sum)
			}
		})
	}
}
