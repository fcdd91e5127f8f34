package metrics

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/netns"
)

// However many scrapes come, concurrent or one after another, the agent's
// state is read at most once per SnapshotTTL.
func TestScrapesShareOneSnapshot(t *testing.T) {
	r := reports(t)[0]
	var reads atomic.Int32
	c := newCollector("v", func() (*agent.Report, error) { reads.Add(1); return r, nil })
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				scrape(t, c)
			}
		}()
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("40 scrapes within %v read the state %d times, want once", SnapshotTTL, n)
	}
}

// A hook's namespace found through a process (/proc/PID/ns/net) is
// labelled by its inode, never by the PID.
func TestLabelsCarryNoPIDs(t *testing.T) {
	r := *reports(t)[0]
	if len(r.Stages) == 0 {
		t.Fatal("no stages in the test report")
	}
	pid := fmt.Sprint(os.Getpid())
	r.Stages = append([]agent.StageReport(nil), r.Stages...)
	for i := range r.Stages {
		r.Stages[i].Netns = "/proc/" + pid + "/ns/net"
	}
	ino, err := netns.Inode("")
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("net:[%d]", ino)
	fams := scrape(t, newCollector("v", func() (*agent.Report, error) { return &r, nil }))
	n := 0
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() != "netns" {
					continue
				}
				n++
				if l.GetValue() != want {
					t.Fatalf("%s: netns=%q, want %q", f.GetName(), l.GetValue(), want)
				}
			}
		}
	}
	if n == 0 {
		t.Error("no netns labels scraped")
	}
}
