package testbed

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDockerSwarm builds the docker-swarm layout with Debian's Docker and
// checks what it made: a swarm of two nodes, each daemon and its
// containerd in its host namespace, the overlay network's VXLAN device and
// bridge in Docker's sandbox with the containers' veths on it, containers
// reaching each other across the hosts at the overlay's MTU, and their
// sysfs read-only as Docker mounts it. Nothing lands outside the testbed:
// the root namespace's ruleset stays as it was, none of the paths outside
// the testbed (testdata/host-paths) is left, and a containerd's goroutine
// dump lands in the testbed's directory, not /tmp. Then h2's dockerd is
// killed (its containers live on in their shims) and the state file lost,
// and Down still removes every process, mount, cgroup, namespace and file.
func TestDockerSwarm(t *testing.T) {
	needRoot(t)
	needDaemons(t, "docker-swarm")
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("nft is needed (scripts/setup.sh --test installs it): %v", err)
	}
	rootRules := ruleset(t, "")
	out := freshOutside(t)
	start := time.Now()
	tb := up(t, Spec{Name: tbName("sw"), Layout: "docker-swarm", Containers: 2})
	t.Logf("up in %s", time.Since(start).Round(time.Millisecond))

	nodes, err := dockerCLI(context.Background(), tb.Name, "h1", nil, "node", "ls", "--format", "{{.Status}} {{.ManagerStatus}}")
	if err != nil || strings.Count(string(nodes), "Ready") != 2 || !strings.Contains(string(nodes), "Leader") {
		t.Fatalf("docker node ls: %v: %s", err, nodes)
	}
	checkSwarmNetwork(t, tb)
	for _, a := range tb.Hosts[0].Containers {
		for _, b := range tb.Hosts[1].Containers {
			ping(t, Endpoint{a.Netns, a.Addr, a.Dev}, Endpoint{b.Netns, b.Addr, b.Dev}, 1450-28)
			ping(t, Endpoint{b.Netns, b.Addr, b.Dev}, Endpoint{a.Netns, a.Addr, a.Dev}, 64)
		}
	}
	pids := checkSwarmDaemons(t, tb)
	if len(pids) < 6 { // dockerd, containerd, a shim per container
		t.Errorf("processes in the host namespaces: %v, want dockerd, containerd and the shims", pids)
	}
	if r := ruleset(t, ""); r != rootRules {
		t.Errorf("the root namespace's ruleset changed:\n%s\nwas:\n%s", r, rootRules)
	}
	dump := checkStackDump(t, pids)

	// A crash: h2's dockerd killed, the state file gone.
	crashAndDown(t, tb.Name, []string{filepath.Join(hostDir(tb.Name, "h2"), "dockerd")}, slices.Collect(maps.Keys(pids)))
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), daemonDir(tb.Name)) {
		t.Errorf("mounts left under %s:\n%s", daemonDir(tb.Name), mi)
	}
	for _, h := range hostNames {
		if m, _ := filepath.Glob("/sys/fs/cgroup/*/" + cgroupParent(tb.Name, h)); len(m) > 0 {
			t.Errorf("cgroups left: %v", m)
		}
	}
	out.check(t)
	if _, err := os.Stat(dump); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("containerd's goroutine dump %s outlived the testbed: %v", dump, err)
	}
}

// checkStackDump asks a containerd of the testbed for its goroutine dump
// (SIGUSR1, as dockerd does before it kills one that stopped answering):
// it must land in the testbed's directory, not in /tmp. It returns where.
func checkStackDump(t *testing.T, pids map[int]string) string {
	t.Helper()
	for pid := range pids {
		if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.TrimSpace(string(comm)) != "containerd" {
			continue
		}
		name := fmt.Sprintf("containerd.%d.stacks.log", pid)
		tmpdir := environ(t, pid)["TMPDIR"]
		if !strings.HasPrefix(tmpdir, StateDir+"/") {
			t.Fatalf("containerd (pid %d) has TMPDIR %q, not a directory of the testbed's", pid, tmpdir)
		}
		syscall.Kill(pid, syscall.SIGUSR1)
		for deadline := time.Now().Add(slowed(5 * time.Second)); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			if _, err := os.Stat(filepath.Join(tmpdir, name)); err == nil {
				break
			}
		}
		if _, err := os.Stat(filepath.Join(tmpdir, name)); err != nil {
			t.Errorf("no goroutine dump in containerd's TMPDIR after SIGUSR1: %v", err)
		}
		if _, err := os.Stat(filepath.Join(os.TempDir(), name)); err == nil {
			t.Errorf("containerd dumped its goroutines into %s", os.TempDir())
		}
		return filepath.Join(tmpdir, name)
	}
	t.Fatalf("no containerd among the host namespaces' processes %v", pids)
	return ""
}

// environ reads the environment process pid started with.
func environ(t *testing.T, pid int) map[string]string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// checkSwarmNetwork: the swarm's overlay network is Docker's overlay
// driver's, each host's VXLAN device and the containers' veths sit on its
// bridge in the network's sandbox, each container has an address of its
// subnet and a read-only /sys.
func checkSwarmNetwork(t *testing.T, tb *Testbed) {
	t.Helper()
	netJSON, err := dockerCLI(context.Background(), tb.Name, "h1", nil, "network", "inspect", swarmNetwork)
	var nets []struct {
		Driver string
		IPAM   struct{ Config []struct{ Subnet string } }
	}
	if err == nil {
		err = json.Unmarshal(netJSON, &nets)
	}
	if err != nil || len(nets) != 1 || nets[0].Driver != "overlay" || len(nets[0].IPAM.Config) == 0 {
		t.Fatalf("docker network inspect %s: %v: %s", swarmNetwork, err, netJSON)
	}
	_, subnet, err := net.ParseCIDR(nets[0].IPAM.Config[0].Subnet)
	if err != nil {
		t.Fatal(err)
	}
	vethRE := regexp.MustCompile(`^veth[0-9]+$`)
	for _, h := range tb.Hosts {
		if !strings.HasPrefix(h.Sandbox, dockerDir(tb.Name, h.Name)+"/exec/netns/1-") {
			t.Errorf("%s: sandbox %q is not the network's under the daemon's exec root", h.Name, h.Sandbox)
		}
		out, err := exec.Command("nsenter", "--net="+h.Sandbox, "ip", "-d", "-o", "link", "show", h.Overlay).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "master "+h.Bridge) || !strings.Contains(string(out), "dstport 4789") {
			t.Errorf("%s: %s in the sandbox: %v %s", h.Name, h.Overlay, err, out)
		}
		for _, c := range h.Containers {
			if !subnet.Contains(net.ParseIP(c.Addr)) {
				t.Errorf("%s %s: address %q not in the network's %s", h.Name, c.Name, c.Addr, subnet)
			}
			out, err := exec.Command("nsenter", "--net="+h.Sandbox, "ip", "-o", "link", "show", c.HostVeth).CombinedOutput()
			if !vethRE.MatchString(c.HostVeth) || err != nil || !strings.Contains(string(out), "master "+h.Bridge) {
				t.Errorf("%s %s: host veth %q not on %s in the sandbox: %v %s", h.Name, c.Name, c.HostVeth, h.Bridge, err, out)
			}
			pids, err := exec.Command("ip", "netns", "pids", c.Netns).Output()
			if err != nil || len(strings.Fields(string(pids))) == 0 {
				t.Fatalf("%s: no process: %v", c.Netns, err)
			}
			mi, _ := os.ReadFile("/proc/" + strings.Fields(string(pids))[0] + "/mountinfo")
			if !regexp.MustCompile(`(?m) /sys ro,.* - sysfs `).Match(mi) {
				t.Errorf("%s: the container's /sys is not read-only:\n%s", c.Netns, mi)
			}
		}
	}
}

// checkSwarmDaemons: each host's dockerd runs in its namespace, with Docker's
// rules there; it returns the processes of the host namespaces.
func checkSwarmDaemons(t *testing.T, tb *Testbed) map[int]string {
	t.Helper()
	pids := map[int]string{}
	for _, h := range tb.Hosts {
		base := filepath.Join(hostDir(tb.Name, h.Name), "dockerd")
		pid, ok := daemonPID(base)
		if !ok {
			t.Fatalf("%s: dockerd not running", h.Name)
		}
		if got, want := pidNetns(t, pid), nsInode(t, h.Netns); got != want {
			t.Errorf("%s: dockerd (pid %d) runs in namespace inode %d, not %s's (%d)", h.Name, pid, got, h.Netns, want)
		}
		out, _ := exec.Command("ip", "netns", "pids", h.Netns).Output()
		for _, p := range strings.Fields(string(out)) {
			if n, err := strconv.Atoi(p); err == nil {
				pids[n] = h.Netns
			}
		}
		if r := ruleset(t, h.Netns); !strings.Contains(r, "DOCKER") {
			t.Errorf("%s: no Docker rules in its ruleset:\n%s", h.Netns, r)
		}
	}
	return pids
}
