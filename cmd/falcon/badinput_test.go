package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/agent/agenttest"
	"github.com/falconnet/falcon/internal/netns"
)

// TestBadInputChangesNothing gives enable, agent, disable and status the
// bad input TestEnableStatusDisableCLI does not (a CPU that does not exist
// but would fit a CPU mask, a negative threshold, the foreground agent, an
// unknown namespace for disable and status): each must exit non-zero with
// a clear message and leave every namespace of the testbed as it was —
// every RPS value of every device, every qdisc, filter and tcx program —
// and no pin or state behind.
//
// guest: the CLI's bad input must change nothing on the old kernel either
func TestBadInputChangesNothing(t *testing.T) {
	bin, tb := cliTestbed(t, "b")
	h2 := tb.Hosts[1].Netns
	plain := tb.Hosts[0].Containers[0].Netns // no overlay there
	// A port in use, for --metrics-addr: the agent binds it before it
	// attaches anything.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	inUse := busy.Addr().String()
	// The DaemonSet's ConfigMap volume with an unknown mode for node w2.
	modeDir := t.TempDir()
	for k, v := range map[string]string{"mode": "falcon", "mode.w2": "turbo"} {
		if err := os.WriteFile(filepath.Join(modeDir, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := systemState(t, tb.Namespaces())
	if _, ok := before[h2+":/sys/class/net/"+tb.Hosts[1].Overlay+"/queues/rx-0/rps_cpus"]; !ok {
		t.Fatalf("the snapshot misses %s's RPS values: %v", tb.Hosts[1].Overlay, before)
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"enable", "--netns", h2, "--cpus", "7"}, 1, "CPU 7 does not exist"},
		{[]string{"enable", "--netns", h2, "--cpus", "0,7"}, 1, "CPU 7 does not exist"},
		{[]string{"enable", "--netns", h2, "--threshold", "-1"}, 2, "outside 0..100"},
		{[]string{"agent", "--netns", h2, "--cpus", "7"}, 1, "CPU 7 does not exist"},
		{[]string{"agent", "--netns", h2, "--threshold", "101"}, 2, "outside 0..100"},
		{[]string{"agent", "--netns", "fct-no-such-netns"}, 1, `network namespace "fct-no-such-netns" not found`},
		{[]string{"agent", "--netns", plain}, 1, "no VXLAN overlay found"},
		{[]string{"agent", "--netns", h2, "--metrics-addr", "9750"}, 2, `"9750": want HOST:PORT`},
		{[]string{"agent", "--netns", h2, "--metrics-addr", "127.0.0.1:99999"}, 2, "not a number from 0 to 65535"},
		{[]string{"enable", "--netns", h2, "--metrics-addr", "localhost:http"}, 2, "not a number from 0 to 65535"},
		{[]string{"agent", "--netns", h2, "--metrics-addr", inUse}, 1, "the port is in use"},
		{[]string{"enable", "--netns", h2, "--metrics-addr", inUse}, 1, "the port is in use"},
		{[]string{"agent", "--netns", h2, "--log-format", "xml"}, 2, `"xml": want text or json`},
		{[]string{"agent", "--netns", h2, "--mode-config", modeDir, "--node-name", "w2"}, 2, "node w2: ConfigMap key mode.w2: unknown mode"},
		{[]string{"disable", "--netns", "fct-no-such-netns"}, 1, `network namespace "fct-no-such-netns" not found`},
		{[]string{"status", "--netns", "fct-no-such-netns"}, 1, `network namespace "fct-no-such-netns" not found`},
		{[]string{"status", "--netns", "fct-no-such-netns", "--json"}, 1, `network namespace "fct-no-such-netns" not found`},
	} {
		out, code := runBounded(t, bin, c.args...)
		if code != c.code || !strings.Contains(out, c.msg) {
			t.Errorf("falcon %s: exit %d, %q; want exit %d and %q", strings.Join(c.args, " "), code, out, c.code, c.msg)
		}
		if left := agenttest.LeftState("fct-no-such-netns"); len(left) > 0 {
			t.Errorf("falcon %s left %v", strings.Join(c.args, " "), left)
		}
		for _, ns := range []string{h2, plain} {
			for _, p := range []string{stateDirOf(t, ns), pinDirOf(t, ns)} {
				if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("falcon %s left %s", strings.Join(c.args, " "), p)
				}
			}
		}
	}
	after := systemState(t, tb.Namespaces())
	for k, v := range before {
		if after[k] != v {
			t.Errorf("%s changed:\n%s\nwas:\n%s", k, after[k], v)
		}
	}
	for k := range after {
		if _, ok := before[k]; !ok {
			t.Errorf("%s appeared: %s", k, after[k])
		}
	}
}

// runBounded runs the binary like falcon() does, but kills it after a
// minute: an agent that took bad input would otherwise run forever.
func runBounded(t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return runCtx(ctx, t, bin, args...)
}

// runCtx runs the binary until ctx ends.
func runCtx(ctx context.Context, t *testing.T, bin string, args ...string) (string, int) {
	t.Helper()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Errorf("falcon %v still ran at its deadline:\n%s", args, out)
		return string(out), -1
	case err == nil:
		return string(out), 0
	case errors.As(err, &ee):
		return string(out), ee.ExitCode()
	}
	t.Fatalf("falcon %v: %v", args, err)
	return "", -1
}

// systemState describes what falcon could change in the namespaces: the
// RPS values of every receive queue, the qdiscs, the tc filters and the
// tcx programs of every device.
func systemState(t *testing.T, nss []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ns := range nss {
		err := netns.WithSysfs(ns, func(root string) error {
			for _, attr := range []string{"rps_cpus", "rps_flow_cnt"} {
				ps, err := filepath.Glob(filepath.Join(root, "class/net/*/queues/rx-*", attr))
				if err != nil {
					return err
				}
				for _, p := range ps {
					b, err := os.ReadFile(p)
					if err != nil {
						return err
					}
					out[ns+":"+p] = strings.TrimSpace(string(b))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		var devs []string
		err = netns.Do(ns, func() error {
			links, err := netlink.LinkList()
			if err != nil {
				return err
			}
			for _, l := range links {
				devs = append(devs, l.Attrs().Name)
				var progs []string
				for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
					res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
					if err != nil {
						continue // no tcx on this kernel: the filters below tell
					}
					for _, p := range res.Programs {
						progs = append(progs, fmt.Sprintf("%v:%d", at, p.ID))
					}
				}
				sort.Strings(progs)
				out[ns+": tcx "+l.Attrs().Name] = strings.Join(progs, " ")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		q, err := exec.Command("tc", "-n", ns, "qdisc", "show").CombinedOutput()
		if err != nil {
			t.Fatalf("tc qdisc show in %s: %v: %s", ns, err, q)
		}
		out[ns+": qdiscs"] = string(q)
		for _, d := range devs {
			for _, dir := range []string{"ingress", "egress"} {
				f, _ := exec.Command("tc", "-n", ns, "filter", "show", "dev", d, dir).CombinedOutput()
				out[ns+": filters "+d+" "+dir] = string(f)
			}
		}
	}
	return out
}
