package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/falconnet/falcon/lab/seqcheck"
	"github.com/falconnet/falcon/lab/testbed"
)

// The drills' traffic runs in a process of its own, so that the test's
// process, in which the agent runs, holds nothing but the agent and the
// checks: a receiver's memory grows with every datagram it records, which
// would hide (or fake) an agent's growth.

// trafficSpec is what a traffic helper process runs.
type trafficSpec struct {
	Testbed string
	Groups  []trafficGroupSpec
	Idle    time.Duration
}

type trafficGroupSpec struct {
	Name string
	Port uint16
	So   seqcheck.SendOptions
}

// trafficResult is what it saw, as it reports it.
type trafficResult struct {
	Flows                                 int
	Sent, Received, Reordered, Duplicated uint64
	ReorderedAt                           []time.Time
	Err                                   string
}

// trafficProc is a running traffic helper.
type trafficProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	done  bool
}

// startTrafficProc starts startTraffic's traffic in a helper process and
// returns once every receiver listens and every sender has started.
func startTrafficProc(tb *testbed.Testbed, groups []trafficGroup, idle time.Duration) (*trafficProc, error) {
	spec := trafficSpec{Testbed: tb.Name, Idle: idle}
	for _, g := range groups {
		spec.Groups = append(spec.Groups, trafficGroupSpec{g.name, g.port, g.so})
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperTraffic$", "-test.count=1")
	cmd.Env = append(os.Environ(), "FALCON_TEST_TRAFFIC="+string(b))
	cmd.Stderr = os.Stderr
	p := &trafficProc{cmd: cmd}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.out = bufio.NewReader(stdout)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for {
		l, err := p.out.ReadString('\n')
		if strings.TrimSpace(l) == "ready" {
			return p, nil
		}
		if err != nil {
			p.stdin.Close()
			cmd.Wait()
			return nil, fmt.Errorf("traffic helper: %w before it was ready (%s)", err, strings.TrimSpace(l))
		}
	}
}

// finish stops the senders and returns what the receivers saw (as
// traffic.finish). It may be called more than once; later calls return
// nothing.
func (p *trafficProc) finish() (seqTotals, error) {
	if p.done {
		return seqTotals{}, nil
	}
	p.done = true
	p.stdin.Close()
	var res *trafficResult
	for {
		l, err := p.out.ReadString('\n')
		if strings.HasPrefix(l, "{") {
			res = new(trafficResult)
			if jerr := json.Unmarshal([]byte(l), res); jerr != nil {
				return seqTotals{}, jerr
			}
		}
		if err != nil {
			break
		}
	}
	werr := p.cmd.Wait()
	if res == nil {
		return seqTotals{}, fmt.Errorf("traffic helper reported nothing (%v)", werr)
	}
	s := seqTotals{flows: res.Flows, sent: res.Sent, received: res.Received, reordered: res.Reordered,
		duplicated: res.Duplicated, reorderedAt: res.ReorderedAt}
	if res.Err != "" {
		return s, errors.New(res.Err)
	}
	return s, nil
}

// TestHelperTraffic is the traffic helper process (startTrafficProc): it
// runs the traffic until its standard input closes, then prints what
// arrived as one line of JSON.
func TestHelperTraffic(t *testing.T) {
	env := os.Getenv("FALCON_TEST_TRAFFIC")
	if env == "" {
		t.Skip("helper process of the drills")
	}
	var spec trafficSpec
	if err := json.Unmarshal([]byte(env), &spec); err != nil {
		t.Fatal(err)
	}
	tb, err := testbed.Get(spec.Testbed)
	if err != nil {
		t.Fatal(err)
	}
	var groups []trafficGroup
	for _, g := range spec.Groups {
		groups = append(groups, trafficGroup{g.Name, g.Port, g.So})
	}
	tr, err := startTraffic(context.Background(), tb, groups, spec.Idle)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	s, err := tr.finish()
	res := trafficResult{Flows: s.flows, Sent: s.sent, Received: s.received, Reordered: s.reordered,
		Duplicated: s.duplicated, ReorderedAt: s.reorderedAt}
	if err != nil {
		res.Err = err.Error()
	}
	b, _ := json.Marshal(res)
	fmt.Println(string(b))
}

// traffic is sequenced UDP from each client container to its server
// container, in groups of flows that differ in how they pause, running
// until stopped.
type traffic struct {
	stop   context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	errs   []error
	got    []map[netip.AddrPort]seqcheck.Stats
	groups []string
	ended  []string // senders that finished before they were stopped
}

// trafficGroup is one group of flows on its own port.
type trafficGroup struct {
	name string
	port uint16
	so   seqcheck.SendOptions // Flows, PktsPerFlow, Size, Pause, PauseEvery
}

// startTraffic starts every group on every container pair of tb, each
// sender pinned to CPU 0; receivers end after idle without a datagram.
func startTraffic(ctx context.Context, tb *testbed.Testbed, groups []trafficGroup, idle time.Duration) (*traffic, error) {
	clients, servers := tb.Endpoints()
	sendCtx, stop := context.WithCancel(ctx)
	tr := &traffic{stop: stop}
	for i := range min(len(clients), len(servers)) {
		dst := netip.MustParseAddr(servers[i].Addr)
		for _, g := range groups {
			r, err := seqcheck.Listen(servers[i].Netns, dst, g.port)
			if err != nil {
				tr.finish()
				return nil, err
			}
			slot := len(tr.got)
			tr.got = append(tr.got, nil)
			tr.groups = append(tr.groups, fmt.Sprintf("%s pair %d", g.name, i))
			tr.wg.Add(2)
			go func() {
				defer tr.wg.Done()
				defer r.Close()
				got, err := r.Wait(ctx, idle)
				tr.mu.Lock()
				defer tr.mu.Unlock()
				tr.got[slot] = got
				if err != nil {
					tr.errs = append(tr.errs, fmt.Errorf("%s: %w", tr.groups[slot], err))
				}
			}()
			go func() {
				defer tr.wg.Done()
				o := g.so
				o.Netns, o.Dst, o.Port, o.CPU = clients[i].Netns, dst, g.port, 0
				err := seqcheck.Send(sendCtx, o)
				tr.mu.Lock()
				defer tr.mu.Unlock()
				switch {
				case err == nil:
					tr.ended = append(tr.ended, tr.groups[slot])
				case sendCtx.Err() == nil:
					tr.errs = append(tr.errs, fmt.Errorf("%s: send: %w", tr.groups[slot], err))
				}
			}()
		}
	}
	return tr, nil
}

// seqTotals sums what the receivers saw.
type seqTotals struct {
	flows                                 int
	sent, received, reordered, duplicated uint64
	reorderedAt                           []time.Time
}

// finish stops the senders, waits for the receivers and sums what they
// saw. The datagrams the stopped senders never sent count as lost, so
// sent is what the receivers' flows announced.
func (tr *traffic) finish() (seqTotals, error) {
	tr.stop()
	tr.wg.Wait()
	var s seqTotals
	for _, got := range tr.got {
		for _, st := range got {
			s.flows++
			s.sent += st.Total
			s.received += st.Received
			s.reordered += st.Reordered
			s.duplicated += st.Duplicates
			s.reorderedAt = append(s.reorderedAt, st.ReorderedAt...)
		}
	}
	errs := slices.Clone(tr.errs)
	if len(tr.ended) > 0 {
		errs = append(errs, fmt.Errorf("senders ran out of datagrams before the drill ended (%s): raise PktsPerFlow",
			strings.Join(tr.ended, ", ")))
	}
	return s, errors.Join(errs...)
}

// hogSwing moves a busy loop between CPU 1 and CPU 0 every period until
// stop is called, as the ordering tests do: the loads cross the threshold
// both ways all the time.
func hogSwing(period time.Duration) (stop func() error) {
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		for i := 0; ; i++ {
			halt, err := burn(1 - i%2)
			if err != nil {
				errc <- err
				return
			}
			select {
			case <-done:
				halt()
				errc <- nil
				return
			case <-time.After(period):
			}
			halt()
		}
	}()
	return func() error {
		close(done)
		return <-errc
	}
}

// drillLoad is the drills' load: sequenced traffic from a process of its
// own and a busy loop swinging between the CPUs.
type drillLoad struct {
	tr                   *trafficProc
	stopHog              func() error
	hogDone, trafficDone bool
}

func startDrillLoad(t *testing.T, tb *testbed.Testbed, groups []trafficGroup) *drillLoad {
	t.Helper()
	tr, err := startTrafficProc(tb, groups, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return &drillLoad{tr: tr, stopHog: hogSwing(300 * time.Millisecond)}
}

// stop ends the load and returns the traffic's totals.
func (l *drillLoad) stop(t *testing.T) seqTotals {
	t.Helper()
	l.hogDone = true
	if err := l.stopHog(); err != nil {
		t.Fatal(err)
	}
	l.trafficDone = true
	s, err := l.tr.finish()
	if err != nil {
		t.Error(err)
	}
	return s
}

// abandon ends what stop has not, on the way out of a failed drill.
func (l *drillLoad) abandon() {
	if !l.hogDone {
		l.stopHog()
	}
	if !l.trafficDone {
		l.tr.finish()
	}
}
