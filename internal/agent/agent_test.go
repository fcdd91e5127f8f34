package agent

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/lab/testbed"
)

// guest: the agent end to end on the old kernel's attach path
func TestEnableStatusDisable(t *testing.T) {
	needRoot(t)
	for _, layout := range []string{"docker", "flannel", "calico", "vxlan"} {
		t.Run(layout, func(t *testing.T) {
			tb := bed(t, layout, 2)
			h := tb.Hosts[1]
			ov, err := discover.Discover(h.Netns)
			if err != nil {
				t.Fatal(err)
			}
			// Values that are not the defaults, so that a restore to the
			// defaults would be caught.
			if len(h.Containers) > 0 {
				c0 := h.Containers[0]
				write(t, c0.Netns, "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt", "32")
			}
			write(t, h.Netns, "/sys/class/net/"+h.NIC+"/queues/rx-0/rps_cpus", "1")
			before := snapshot(t, ov)

			o := testOptions(t, h.Netns)
			// No engagement test that stands down on this idle machine while
			// the test reads what enable set (standdown_test.go covers that).
			o.Policy = datapath.PolicyPaper
			a, err := Start(context.Background(), o)
			if err != nil {
				t.Fatal(err)
			}
			stopped := false
			defer func() {
				if !stopped {
					a.Stop()
				}
			}()
			checkEnabled(t, h, a, o)

			stopped = true
			if err := a.Stop(); err != nil {
				t.Fatal(err)
			}
			after := snapshot(t, ov)
			for k, v := range before {
				if after[k] != v {
					t.Errorf("%s = %q after disable, was %q", k, after[k], v)
				}
			}
			noTrace(t, tb, o)
			if r, err := Status(o); err != nil || r.Enabled {
				t.Errorf("status after stop: %+v %v", r, err)
			}
		})
	}
}

// checkEnabled: the running agent a set RPS on the overlay and the
// containers, left the NIC alone, reports itself ready in Status and
// attached its hooks.
func checkEnabled(t *testing.T, h testbed.Host, a *Agent, o Options) {
	t.Helper()
	mask := cpuset.Mask(a.Host().Opts.CPUs)
	if got := read(t, h.Netns, "/sys/class/net/"+h.Overlay+"/queues/rx-0/rps_cpus"); got != mask {
		t.Errorf("%s rps_cpus = %s, want %s", h.Overlay, got, mask)
	}
	for _, c := range h.Containers {
		if got := read(t, c.Netns, "/sys/class/net/eth0/queues/rx-0/rps_cpus"); got != mask {
			t.Errorf("%s eth0 rps_cpus = %s, want %s", c.Netns, got, mask)
		}
		if got := read(t, c.Netns, "/sys/class/net/eth0/queues/rx-0/rps_flow_cnt"); got != "0" {
			t.Errorf("%s eth0 rps_flow_cnt = %s, want 0", c.Netns, got)
		}
	}
	if got := read(t, h.Netns, "/sys/class/net/"+h.NIC+"/queues/rx-0/rps_cpus"); got != "1" {
		t.Errorf("NIC rps_cpus changed to %s", got)
	}

	r, err := Status(o)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Enabled || !r.Running || !r.Ready || r.Problem != "" {
		t.Errorf("status %+v", r)
	}
	roles := map[string]string{}
	for _, s := range r.Stages {
		roles[s.Device] = string(s.Role)
	}
	// No containers (vxlan layout): nothing behind the VXLAN device
	// to steer, so no hook there.
	hooks := 1
	if len(h.Containers) > 0 {
		hooks = 2
		if roles[h.Overlay] != "overlay" {
			t.Errorf("stages %+v, want %s as overlay", r.Stages, h.Overlay)
		}
	}
	if roles[h.NIC] != "nic" || len(r.Stages) != hooks {
		t.Errorf("stages %+v, want %s as nic and %d hooks", r.Stages, h.NIC, hooks)
	}
	if r.Load == nil || r.Load.Stale || len(r.Load.PerCPU) == 0 {
		t.Errorf("load %+v", r.Load)
	}
	if out := attached(t, h.Netns); strings.Count(out, "falcon_steer") != hooks {
		t.Errorf("want %d falcon_steer attachments in %s:\n%s", hooks, h.Netns, out)
	}
}

func TestBadInput(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	h := tb.Hosts[1]
	plain := tb.Hosts[0].Containers[0].Netns // a namespace with no overlay
	ov, err := discover.Discover(h.Netns)
	if err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, ov)
	startRejects(t, h.Netns, []badStart{
		{"cpu", func(o *Options) { o.CPUs = []int{0, 4095} }, "CPU 4095 does not exist"},
		{"threshold", func(o *Options) { o.Threshold = 101 }, "outside 0..100"},
		{"netns", func(o *Options) { o.Netns = "fct-no-such-netns" }, "not found"},
		{"overlay", func(o *Options) { o.Netns = plain }, "no VXLAN overlay found"},
		{"devices", func(o *Options) { o.Devices = []string{"nosuchdev"} }, "nosuchdev"},
		{"mode", func(o *Options) { o.Mode = "warp" }, "mode \"warp\""},
	})
	unchanged(t, ov, before)
}

func TestAlreadyEnabled(t *testing.T) {
	needRoot(t)
	tb := bed(t, "docker", 1)
	o := testOptions(t, tb.Hosts[1].Netns)
	a, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if b, err := Start(context.Background(), o); !errors.Is(err, ErrRunning) {
		if err == nil {
			b.Stop()
		}
		t.Fatalf("second Start: %v, want ErrRunning", err)
	}
	if r, err := Status(o); err != nil || !r.Ready {
		t.Errorf("the first agent suffered: %+v %v", r, err)
	}
}

// badStart is bad input to Start: how it changes the options, and what
// the error must say.
type badStart struct {
	name string
	mod  func(*Options)
	want string
}

// startRejects checks that Start refuses each bad input on ns with an
// error that says why, and creates no state.
func startRejects(t *testing.T, ns string, cases []badStart) {
	t.Helper()
	for _, c := range cases {
		o := testOptions(t, ns)
		c.mod(&o)
		a, err := Start(context.Background(), o)
		if err == nil {
			a.Stop()
			t.Errorf("%s: no error", c.name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %q, want it to say %q", c.name, err, c.want)
		} else {
			t.Logf("%s: %v", c.name, err)
		}
		if _, err := os.Stat(o.stateRoot()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: state directory created", c.name)
		}
	}
}

// unchanged: every value of ov's devices snapshot took is still before's.
func unchanged(t *testing.T, ov *discover.Overlay, before map[string]string) {
	t.Helper()
	after := snapshot(t, ov)
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed to %q, was %q", k, after[k], v)
		}
	}
}
