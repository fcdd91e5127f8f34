package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
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
