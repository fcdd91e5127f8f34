package agent

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/datapath"
	"github.com/falconnet/falcon/internal/discover"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

func needRoot(t *testing.T) {
	t.Helper()
	labtest.NeedTestbeds(t)
	if err := datapath.Supported(); err != nil {
		t.Skip(err)
	}
}

// bed builds a testbed removed when the test ends.
func bed(t *testing.T, layout string, containers int) *testbed.Testbed {
	t.Helper()
	name := fmt.Sprintf("a%d%s", os.Getpid(), strings.ReplaceAll(strings.ToLower(t.Name()), "/", ""))
	name = name[:min(len(name), 20)]
	return labtest.Testbed(t, testbed.Spec{Name: name, Layout: layout, Containers: containers})
}

// testOptions keep the test's state and pins apart from a real agent's.
func testOptions(t *testing.T, ns string) Options {
	o := DefaultOptions()
	o.Netns = ns
	o.StateRoot = filepath.Join(t.TempDir(), "run")
	o.PinRoot = filepath.Join(datapath.BPFFS, fmt.Sprintf("falcon-test-%d", os.Getpid()))
	o.Log = testLog(t)
	// A guest under emulation runs its queues many times slower than the
	// guard timeout assumes (scripts/kernels/guest.sh).
	if v := os.Getenv("FALCON_TEST_GUARD_TIMEOUT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("FALCON_TEST_GUARD_TIMEOUT: %v", err)
		}
		o.GuardTimeout = d
	}
	t.Cleanup(func() { os.Remove(o.PinRoot) })
	return o
}

// testLog writes the agent's log lines to the test's log.
func testLog(t *testing.T) *slog.Logger { return slog.New(slog.NewTextHandler(testWriter{t}, nil)) }

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// snapshot reads every RPS/RFS value of the namespaces of the overlay's
// devices, host and container side (queueValues), keyed by namespace and
// path.
func snapshot(t *testing.T, ov *discover.Overlay) map[string]string {
	t.Helper()
	var nss []string
	for _, d := range ov.Devices {
		if !slices.Contains(nss, d.Netns) {
			nss = append(nss, d.Netns)
		}
	}
	return queueValues(t, nss)
}

func read(t *testing.T, ns, path string) string {
	t.Helper()
	var v string
	err := netns.WithSysfs(ns, func(string) error {
		b, err := os.ReadFile(path)
		v = strings.TrimSpace(string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func write(t *testing.T, ns, path, v string) {
	t.Helper()
	if err := netns.WithSysfs(ns, func(string) error { return os.WriteFile(path, []byte(v), 0) }); err != nil {
		t.Fatal(err)
	}
}

// noTrace fails if falcon left a BPF program, filter, qdisc, pin or state
// anywhere on the testbed.
func noTrace(t *testing.T, tb *testbed.Testbed, o Options) {
	t.Helper()
	for _, ns := range tb.Namespaces() {
		if out := attached(t, ns); strings.Contains(out, "falcon") {
			t.Errorf("BPF program left in %s:\n%s", ns, out)
		}
		out, _ := exec.Command("tc", "-n", ns, "qdisc", "show").CombinedOutput()
		if strings.Contains(string(out), "clsact") {
			t.Errorf("clsact qdisc left in %s:\n%s", ns, out)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(o.pinRoot(), "*", "falcon_*")); len(m) > 0 {
		t.Errorf("pins left: %v", m)
	}
	if ents, err := os.ReadDir(o.stateRoot()); err == nil && len(ents) > 0 {
		out, _ := exec.Command("find", o.stateRoot()).CombinedOutput()
		t.Errorf("state left in %s: %v\n%s", o.stateRoot(), ents, out)
	}
}

// attached lists the BPF programs attached in namespace ns, by tcx or as
// cls_bpf filters (bpftool 7.1 does not show tcx).
func attached(t *testing.T, ns string) string {
	t.Helper()
	var b strings.Builder
	err := netns.Do(ns, func() error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			for _, at := range []ebpf.AttachType{ebpf.AttachTCXIngress, ebpf.AttachTCXEgress} {
				res, err := link.QueryPrograms(link.QueryOptions{Target: l.Attrs().Index, Attach: at})
				if err != nil {
					continue
				}
				for _, p := range res.Programs {
					prog, err := ebpf.NewProgramFromID(p.ID)
					if err != nil {
						continue
					}
					if info, err := prog.Info(); err == nil {
						fmt.Fprintf(&b, "%s tcx %v %s\n", l.Attrs().Name, at, info.Name)
					}
					prog.Close()
				}
			}
			// Before tcx (6.6) the programs sit in cls_bpf filters of a clsact qdisc.
			for _, parent := range []uint32{netlink.HANDLE_MIN_INGRESS, netlink.HANDLE_MIN_EGRESS} {
				fs, err := netlink.FilterList(l, parent)
				if err != nil {
					continue
				}
				for _, f := range fs {
					if bf, ok := f.(*netlink.BpfFilter); ok {
						// The filter's name is the attacher's; the program's, as tcx lists it.
						name := bf.Name
						if prog, err := ebpf.NewProgramFromID(ebpf.ProgramID(bf.Id)); err == nil {
							if info, err := prog.Info(); err == nil {
								name = info.Name
							}
							prog.Close()
						}
						fmt.Fprintf(&b, "%s clsact %#x %s\n", l.Attrs().Name, parent, name)
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command("tc", "-n", ns, "filter", "show", "ingress").CombinedOutput()
	b.Write(out)
	return b.String()
}
