package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/agent/agenttest"
	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/schema"
)

// TestBenchStudyMode runs the study preset shrunk to one replica count, the
// baseline and RFS+, one run of 1 s, and checks the results' structure:
// which cases, on which containers, normalised to what, with per-CPU idle
// and softirq figures; and that the mode left nothing behind.
func TestBenchStudyMode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds testbeds and runs traffic")
	}
	labtest.NeedTestbeds(t)
	if _, err := os.Stat(agent.SockFlowPath); err != nil {
		t.Skip(err)
	}
	sockFlow := agenttest.SockFlowEntries(t)
	out := filepath.Join(t.TempDir(), "r.json")
	err := runBench([]string{"--preset", "k8s-rps-rfs", "--modes", "vanilla,rfs+", "--flows", "2", "--runs", "1",
		"--duration", "1s", "--quiet", "--json", out})
	if err != nil {
		t.Fatal(err)
	}
	f, err := schema.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if f.Config.Preset != "k8s-rps-rfs" || !f.Config.ContainersPerFlow || len(f.Results) != 2 {
		t.Fatalf("config %+v, %d results", f.Config, len(f.Results))
	}
	cpus, err := cpuset.Online()
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range f.Results {
		what := fmt.Sprintf("%s/%s", r.Layout, r.Mode)
		if r.Layout != "calico" || r.Mode != []string{"vanilla", "rfs+"}[i] || r.Workload != "multi-flow-tcp" ||
			r.Size != 128<<10 || r.Flows != 2 || len(r.Runs) != 1 || len(r.Errors) > 0 {
			t.Errorf("%s: %s %d B ×%d, %d runs, errors %q", what, r.Workload, r.Size, r.Flows, len(r.Runs), r.Errors)
			continue
		}
		// One client -> server pair per replica, each in its own container.
		if len(r.Endpoints) != 2 || !strings.Contains(r.Endpoints[0], "-h1-c0 ") || !strings.Contains(r.Endpoints[0], "-h2-c0 ") ||
			!strings.Contains(r.Endpoints[1], "-h1-c1 ") || !strings.Contains(r.Endpoints[1], "-h2-c1 ") {
			t.Errorf("%s: endpoints %q", what, r.Endpoints)
		}
		if r.Baseline != "calico/vanilla" || r.Normalized["gbps"].N == 0 || r.Summary["gbps"].Mean <= 0 {
			t.Errorf("%s: baseline %q, normalised %+v, gbps %+v", what, r.Baseline, r.Normalized["gbps"], r.Summary["gbps"])
		}
		for _, c := range cpus {
			for _, m := range []string{"idle", "soft"} {
				if _, ok := r.Summary[fmt.Sprintf("cpu%d_%s", c, m)]; !ok {
					t.Errorf("%s: no cpu%d_%s", what, c, m)
				}
			}
		}
	}
	if got := agenttest.SockFlowEntries(t); got != sockFlow {
		t.Errorf("rps_sock_flow_entries = %s after the bench, was %s", got, sockFlow)
	}
	nss, _ := exec.Command("ip", "netns", "list").Output()
	if prefix := fmt.Sprintf("fb-b%d-", os.Getpid()); strings.Contains(string(nss), prefix) {
		t.Errorf("namespaces left behind:\n%s", nss)
	}
	if left := agenttest.LeftState(fmt.Sprintf("fb-b%d-", os.Getpid())); len(left) > 0 {
		t.Errorf("agent state left behind: %v", left)
	}
}
