package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

func seqCPUs(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// TestScalePlacement: the roles' arithmetic, and the refusal below 8 CPUs
// with the number needed.
func TestScalePlacement(t *testing.T) {
	for _, c := range []struct {
		online                   []int
		sender, receiver, falcon []int
		nic                      int
	}{
		{seqCPUs(8), []int{0, 1, 2}, []int{4, 5}, []int{6, 7}, 3},
		{seqCPUs(12), []int{0, 1, 2}, []int{4, 5, 6, 7}, []int{8, 9, 10, 11}, 3},
		{seqCPUs(16), []int{0, 1, 2, 3}, []int{5, 6, 7, 8, 9}, []int{10, 11, 12, 13, 14, 15}, 4},
		{seqCPUs(64), seqCPUs(16), seqFrom(17, 23), seqFrom(40, 24), 16},
		// Holes in the online set are skipped, not filled.
		{[]int{0, 2, 4, 6, 8, 10, 12, 14, 16}, []int{0, 2, 4}, []int{8, 10}, []int{12, 14, 16}, 6},
	} {
		p, err := scalePlacement(c.online)
		if err != nil {
			t.Fatalf("%d CPUs: %v", len(c.online), err)
		}
		want := schema.Placement{Sender: c.sender, Receiver: c.receiver, Falcon: c.falcon, NIC: c.nic}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("%d CPUs: %+v, want %+v", len(c.online), p, want)
		}
		if err := checkPlacement(p); err != nil {
			t.Errorf("%d CPUs: its own placement fails the check: %v", len(c.online), err)
		}
	}
	for _, n := range []int{1, 2, 7} {
		_, err := scalePlacement(seqCPUs(n))
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), "need at least 8 online CPUs") ||
			!strings.Contains(err.Error(), fmt.Sprintf("has %d", n)) {
			t.Errorf("%d CPUs: %v, want a config error saying 8 are needed and %d are here", n, err, n)
		}
	}
}

func seqFrom(start, n int) []int {
	s := seqCPUs(n)
	for i := range s {
		s[i] += start
	}
	return s
}

// TestScalePreset: on 8 CPUs the preset places every role and sizes the
// matrix; flags given win, and are still checked against each other.
func TestScalePreset(t *testing.T) {
	c, err := resolve(t, seqCPUs(8), "--preset", "scale")
	if err != nil {
		t.Fatal(err)
	}
	if c.NICCPU == nil || *c.NICCPU != 3 || !reflect.DeepEqual(c.SenderCPUs, []int{0, 1, 2}) ||
		!reflect.DeepEqual(c.ReceiverCPUs, []int{4, 5}) || !reflect.DeepEqual(c.FalconCPUs, []int{6, 7}) || c.Clients != 3 {
		t.Errorf("placement: nic %v sender %v receiver %v falcon %v clients %d", c.NICCPU, c.SenderCPUs, c.ReceiverCPUs, c.FalconCPUs, c.Clients)
	}
	if !reflect.DeepEqual(c.Modes, []string{"vanilla", "rps", "rfs", "falcon", "falcon+split"}) ||
		!reflect.DeepEqual(c.Flows, []int{1, 2, 4, 8, 16}) || len(c.Sizes) != 8 || c.Sizes[7] != workload.MaxUDPSize {
		t.Errorf("matrix: %+v", c)
	}
	plan, skipped, err := Plan(c)
	if err != nil {
		t.Fatal(err)
	}
	// host runs vanilla and falcon+split (Host+); docker every mode: 7
	// testbeds of 8 sizes of UDP stress, 5 + 5 flow counts, one TCP flow
	// and ping-pong.
	if len(plan) != 7 || len(skipped) != 3 || len(plan[0].Cases) != 20 {
		t.Errorf("%d testbeds (%d cases on the first), %d skipped", len(plan), len(plan[0].Cases), len(skipped))
	}

	c, err = resolve(t, seqCPUs(16), "--preset", "scale", "--nic-cpu", "15", "--falcon-cpus", "8-14")
	if err != nil || *c.NICCPU != 15 || !reflect.DeepEqual(c.FalconCPUs, seqFrom(8, 7)) || !reflect.DeepEqual(c.SenderCPUs, []int{0, 1, 2, 3}) {
		t.Errorf("overrides: %v, %+v", err, c)
	}
	// The preset's receivers are 5-9: a Falcon set over the senders is refused.
	if _, err := resolve(t, seqCPUs(16), "--preset", "scale", "--falcon-cpus", "2-7"); err == nil ||
		!strings.Contains(err.Error(), "share CPU 2") {
		t.Errorf("falcon set over the senders: %v", err)
	}
	if _, err := resolve(t, seqCPUs(4), "--preset", "scale", "--nic-cpu", "3"); err == nil ||
		!strings.Contains(err.Error(), "at least 8") {
		t.Errorf("4 CPUs with flags: %v, want the preset's refusal", err)
	}
}

// TestPlacementFlagsRejected: every placement flag is checked before
// anything is touched.
func TestPlacementFlagsRejected(t *testing.T) {
	on8 := seqCPUs(8)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--nic-cpu", "8"}, "--nic-cpu: CPU 8 is not online"},
		{[]string{"--nic-cpu", "3-4"}, "--nic-cpu 3-4: one CPU"},
		{[]string{"--nic-cpu", "x"}, "--nic-cpu"},
		{[]string{"--falcon-cpus", "9"}, "--falcon-cpus: CPU 9 is not online"},
		{[]string{"--falcon-cpus", ""}, "--falcon-cpus"},
		{[]string{"--sender-cpus", "0-2", "--receiver-cpus", "4", "--nic-cpu", "2"}, "--sender-cpus 0-2 and --nic-cpu share CPU 2"},
		{[]string{"--sender-cpus", "0-2", "--receiver-cpus", "1", "--nic-cpu", "3"}, "--sender-cpus 0-2 and --receiver-cpus share CPU 1"},
		{[]string{"--sender-cpus", "0-2", "--receiver-cpus", "4", "--falcon-cpus", "2-7"}, "--sender-cpus 0-2 and --falcon-cpus share CPU 2"},
		{[]string{"--sender-cpus", "0-2", "--receiver-cpus", "3-4", "--nic-cpu", "3"}, "--nic-cpu 3 is also a receiver CPU"},
		{[]string{"--client-host-rps", "0-2"}, `--client-host-rps "0-2": want sender or off`},
	} {
		_, err := resolve(t, on8, c.args...)
		var ce *ConfigError
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v, want a config error with %q", c.args, err, c.msg)
		}
	}
	// Without a NIC CPU or a Falcon set the old sharing stays allowed (one
	// CPU runs everything on a 1-CPU machine).
	if c, err := resolve(t, []int{0}, "--sender-cpus", "0", "--receiver-cpus", "0"); err != nil || c.NICCPU != nil || c.FalconCPUs != nil {
		t.Errorf("1 CPU: %v %+v", err, c)
	}
	// The sending host's receive work: on the sender CPUs unless off.
	for args, want := range map[string]string{"sender": "", "off": schema.ClientHostRPSOff} {
		if c, err := resolve(t, on8, "--client-host-rps", args); err != nil || c.ClientHostRPS != want {
			t.Errorf("--client-host-rps %s: %q, %v; want %q", args, c.ClientHostRPS, err, want)
		}
	}
	// The NIC CPU may be in the Falcon set: falcon chooses by load.
	if c, err := resolve(t, on8, "--sender-cpus", "0", "--receiver-cpus", "1", "--nic-cpu", "2", "--falcon-cpus", "2-7"); err != nil || *c.NICCPU != 2 {
		t.Errorf("NIC inside the Falcon set: %v", err)
	}
}

// TestBenchNICCPU: a bench with a NIC CPU and a Falcon set runs through
// (the pin before the mode, again before each run). A 2-CPU machine has no
// placement that passes the flags' check, so the config is made here.
func TestBenchNICCPU(t *testing.T) {
	online, name := integration(t, "p")
	c, err := resolve(t, online, "--layouts", "docker", "--modes", "vanilla,falcon", "--workloads", "udp-stress:1400",
		"--runs", "2", "--duration", "1s")
	if err != nil {
		t.Fatal(err)
	}
	nic := online[len(online)-1]
	c.NICCPU, c.FalconCPUs = &nic, online
	f, err := Execute(context.Background(), c, RunOptions{Version: "test", Command: "go test", TestbedName: name,
		Progress: NewProgress(io.Discard, false, true, 4, 0)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Results {
		if len(r.Runs) != 2 || len(r.Errors) > 0 || r.Runs[0].PPS <= 0 {
			t.Errorf("%s: %d runs, errors %v", r.Mode, len(r.Runs), r.Errors)
		}
	}
}
