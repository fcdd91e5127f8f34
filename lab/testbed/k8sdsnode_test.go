package testbed

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/metrics"
	"github.com/falconnet/falcon/internal/netns"
)

// falconImage builds falcon and its image as 'make image' does (without
// nft, which the agent's modes here do not run: no download), and returns
// the image archive's path and deploy/kubernetes pinned to it.
func falconImage(t *testing.T) (img, manifests string) {
	t.Helper()
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(runtime.GOROOT(), "bin/go")
	}
	dir := t.TempDir()
	bin, img, manifests := filepath.Join(dir, "falcon"), filepath.Join(dir, "falcon-image.tar"), filepath.Join(dir, "kubernetes")
	start := time.Now()
	for _, args := range [][]string{
		{"build", "-trimpath", "-ldflags", "-s -w -X main.version=k8s-test", "-o", bin, "./cmd/falcon"},
		{"run", "./scripts/image", "-falcon", bin, "-out", img, "-tool", "", "-epoch", "0", "-deploy", "deploy/kubernetes", "-deploy-out", manifests},
	} {
		cmd := exec.Command(gobin, args...)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Skipf("go %s (the image): %v\n%s", args[0], err, out)
		}
	}
	t.Logf("falcon and its image built in %s", time.Since(start).Round(time.Millisecond))
	return img, manifests
}

// importImage imports the image archive into every node's containerd, as
// the layout imports its pod images.
func importImage(t *testing.T, tb *Testbed, img string) {
	t.Helper()
	for _, h := range tb.Hosts {
		out, err := exec.Command("ctr", "--address", containerdSock(tb.Name, h.Name), "-n", "k8s.io", "images", "import", img).CombinedOutput()
		if err != nil {
			t.Fatalf("ctr images import on %s: %v\n%s", h.Name, err, out)
		}
	}
}

// nodeSnapshot is what falcon may change on host i: every receive queue's
// RPS/RFS value and every link's qdiscs, tc filters and tcx programs in
// the node's and its pods' namespaces, the global RFS table, and the files
// in the node's bpffs and /run/falcon (its own mount namespace's).
func nodeSnapshot(t *testing.T, tb *Testbed, i int) map[string]string {
	t.Helper()
	h := tb.Hosts[i]
	nss := []string{h.Netns}
	for _, c := range h.Containers {
		nss = append(nss, c.Netns)
	}
	out := map[string]string{}
	for _, ns := range nss {
		if err := queueSnapshot(ns, out); err != nil {
			t.Fatal(err)
		}
		if err := netns.Do(ns, func() error { return linkSnapshot(ns, out) }); err != nil {
			t.Fatal(err)
		}
	}
	v, err := os.ReadFile("/proc/sys/net/core/rps_sock_flow_entries")
	if err != nil {
		t.Fatal(err)
	}
	out["rps_sock_flow_entries"] = strings.TrimSpace(string(v))
	pid, ok := daemonPID(filepath.Join(hostDir(tb.Name, h.Name), "containerd"))
	if !ok {
		t.Fatalf("%s: no containerd", h.Name)
	}
	for _, dir := range []string{"/sys/fs/bpf", "/run/falcon"} {
		root := fmt.Sprintf("/proc/%d/root%s", pid, dir)
		filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			// The layout binds its own directory under the node's /run/falcon.
			if err == nil && d.IsDir() && d.Name() == "testbeds" {
				return filepath.SkipDir
			}
			if err == nil && p != root {
				out["file "+dir+strings.TrimPrefix(p, root)] = d.Type().String()
			}
			return nil
		})
	}
	return out
}

// queueSnapshot adds the RPS/RFS values of namespace ns's receive queues.
func queueSnapshot(ns string, out map[string]string) error {
	return netns.WithSysfs(ns, func(root string) error {
		for _, attr := range []string{"rps_cpus", "rps_flow_cnt"} {
			ps, _ := filepath.Glob(filepath.Join(root, "class/net/*/queues/rx-*", attr))
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
}

// linkSnapshot adds the qdiscs, tc filters and tcx programs of the links
// of the namespace the thread is in, ns.
func linkSnapshot(ns string, out map[string]string) error {
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	for _, l := range links {
		var b strings.Builder
		qs, err := netlink.QdiscList(l)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		for _, q := range qs {
			fmt.Fprintf(&b, "qdisc %s %x; ", q.Type(), q.Attrs().Parent)
		}
		for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
			fl, _ := netlink.FilterList(l, parent)
			for _, f := range fl {
				fmt.Fprintf(&b, "filter %s %x; ", f.Type(), parent)
			}
		}
		for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
			if res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at}); err == nil {
				fmt.Fprintf(&b, "tcx %v: %d programs; ", at, len(res.Programs))
			}
		}
		if x := l.Attrs().Xdp; x != nil && x.Attached {
			fmt.Fprintf(&b, "xdp %d; ", x.ProgId)
		}
		out[ns+":"+l.Attrs().Name] = b.String()
	}
	return nil
}

// sameSnapshot fails for every value that differs from before.
func sameSnapshot(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	for k, v := range after {
		if w, ok := before[k]; !ok || w != v {
			t.Errorf("%s: %s is %q, was %q (present %v)", what, k, v, w, ok)
		}
	}
	for k, w := range before {
		if _, ok := after[k]; !ok {
			t.Errorf("%s: %s gone, was %q", what, k, w)
		}
	}
}

// agentMetrics are the series of the agent's metrics (name{labels} to
// value), read from its address in namespace ns (the node's, the
// ConfigMap's metrics-addr), which must serve them.
func agentMetrics(t *testing.T, ns string) map[string]float64 {
	t.Helper()
	var body []byte
	// The agent serves a snapshot of its counters up to this old.
	time.Sleep(metrics.SnapshotTTL)
	err := netns.Do(ns, func() error {
		c, err := net.DialTimeout("tcp", "127.0.0.1:9750", 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n"); err != nil {
			return err
		}
		body, err = io.ReadAll(c)
		return err
	})
	if err != nil || !bytes.HasPrefix(body, []byte("HTTP/1.0 200")) && !bytes.HasPrefix(body, []byte("HTTP/1.1 200")) {
		t.Fatalf("%s: the agent's metrics at 127.0.0.1:9750: %v\n%.300s", ns, err, body)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && strings.HasPrefix(f[0], "falcon_") {
			m[f[0]], _ = strconv.ParseFloat(f[1], 64)
		}
	}
	return m
}

// steering is what the hooks did between two readings of the metrics:
// packets they decided on, and of those the ones given to another CPU than
// the one their stage ran on (per hook and CPU, steered beyond seen:
// docs/METRICS.md).
func steering(before, after map[string]float64) (decided, moved float64) {
	const steered, stage = "falcon_steered_packets_total{", "falcon_stage_packets_total{"
	for k, v := range after {
		labels, ok := strings.CutPrefix(k, steered)
		if !ok {
			continue
		}
		d := v - before[k]
		decided += d
		seen := after[stage+labels] - before[stage+labels]
		moved += max(0, d-seen)
	}
	return decided, moved
}
