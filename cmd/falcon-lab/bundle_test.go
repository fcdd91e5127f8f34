package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/lab/labtest"
)

// TestBundleQuick builds the benchmark bundle and runs its run.sh --quick
// in a mount namespace where the host's iperf3, sockperf, ethtool, memcached, memcaslap, nginx, wrk, ip
// and bridge are unusable (an empty, non-executable file is bind-mounted over each), as
// on a machine that has none: the run must use the bundle's own copies.
// It needs root, Debian's packaging tools, and the .debs: cached in
// .cache/bundle-debs or downloadable (package lists present); without
// them it skips. Then it stops a second run with TERM mid-run: nothing may
// stay behind. About a minute and a half on 2 CPUs.
func TestBundleQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test")
	}
	labtest.NeedRoot(t)
	repo, cache := bundleCanBuild(t)
	work := buildBundle(t, repo, cache)
	hidden := hideHostTools(t, work)
	// A private mount namespace: the bind mounts vanish with it, and 'ip
	// netns exec' (which the bench runs the tools through) inherits them.
	inside := func(s string) *exec.Cmd {
		return exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", hidden+s)
	}
	out, err := inside("cd " + work + " && exec ./falcon-bench/run.sh --quick --out results\n").CombinedOutput()
	if err != nil {
		t.Fatalf("run.sh --quick: %v\n%s", err, out)
	}
	checkQuickRun(t, work, out)

	// Stopped mid-run as a job scheduler or a lease would stop it: timeout
	// sends TERM to run.sh, falcon and tee at once. Found on a borrowed
	// 16-CPU machine: tee died first, falcon's next note hit the broken
	// pipe, and its testbeds stayed behind.
	before := netnsList(t)
	out, err = inside("cd " + work + " && exec timeout -k 60 -s TERM 15 ./falcon-bench/run.sh --quick --out stopped\n").CombinedOutput()
	if err == nil {
		t.Fatalf("run.sh under a 15 s timeout finished: the test no longer stops it mid-run\n%s", out)
	}
	if after := netnsList(t); after != before {
		t.Errorf("namespaces before the stopped run:\n%s\nafter:\n%s\nrun.sh:\n%s", before, after, out)
	}
	log, err := os.ReadFile(filepath.Join(work, "stopped", "bench.log"))
	if err != nil || !strings.Contains(string(log), "interrupted") {
		t.Errorf("bench.log of the stopped run (%v) does not say falcon was interrupted:\n%s\nrun.sh:\n%s", err, log, out)
	}
}

// bundleCanBuild skips unless the bundle can be built here; it returns the
// repository and the cache of the bundle's .debs.
func bundleCanBuild(t *testing.T) (repo, cache string) {
	for _, c := range []string{"apt-get", "dpkg-deb", "unshare", "mount"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("no %s to build or run the bundle with", c)
		}
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// The kernel test guest (scripts/kernels) mounts the checkout read-only
	// and runs under emulation: the bundle is user space, built and run
	// here on the host's kernel.
	if err := unix.Access(repo, unix.W_OK); err != nil {
		t.Skipf("the checkout is not writable (%v): no cache for the bundle's packages", err)
	}
	cache = filepath.Join(repo, ".cache", "bundle-debs")
	if debs, _ := filepath.Glob(filepath.Join(cache, "iperf3_*.deb")); len(debs) == 0 {
		if out, err := exec.Command("apt-cache", "show", "iperf3", "sockperf", "ethtool").CombinedOutput(); err != nil {
			t.Skipf("the bundle's packages cannot be had: no cached .debs and no package lists (%v: %s)", err, firstLines(out))
		}
	}
	return repo, cache
}

// buildBundle builds the bundle and unpacks it; it returns where.
func buildBundle(t *testing.T, repo, cache string) string {
	// Build puts every binary in one folder, which the bundle takes.
	labtest.Build(t, "cmd/falcon")
	bin := labtest.Build(t, "cmd/falcon-lab")
	dist := t.TempDir()
	build := exec.Command(filepath.Join(repo, "scripts/bundle/build.sh"), filepath.Dir(bin))
	build.Env = append(os.Environ(), "BUNDLE_CACHE="+cache, "BUNDLE_OUT="+dist)
	if out, err := build.CombinedOutput(); err != nil {
		if strings.Contains(string(out), "apt-get download") {
			t.Skipf("the bundle's packages cannot be downloaded here:\n%s", out)
		}
		t.Fatalf("build the bundle: %v\n%s", err, out)
	}
	work := t.TempDir()
	if out, err := exec.Command("tar", "-C", work, "-xzf", filepath.Join(dist, "falcon-bench-linux-amd64.tar.gz")).CombinedOutput(); err != nil {
		t.Fatalf("unpack: %v\n%s", err, out)
	}
	return work
}

// hideHostTools is the shell script that hides every host copy of a
// bundled tool that this machine has, and proves it hidden.
func hideHostTools(t *testing.T, work string) string {
	empty := filepath.Join(work, "empty")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	script.WriteString("set -e\n")
	for _, tool := range []string{"iperf3", "sockperf", "ethtool", "memcached", "memcaslap", "nginx", "wrk", "ip", "bridge"} {
		if p, err := exec.LookPath(tool); err == nil {
			if p, err = filepath.EvalSymlinks(p); err == nil {
				script.WriteString("mount --bind " + empty + " " + p + "\n")
			}
		}
		// Proof that the host's copy, if any, cannot run in here.
		script.WriteString("if " + tool + " -V >/dev/null 2>&1 || " + tool + " --version >/dev/null 2>&1; then echo HOST-" + tool + "-RUNS; exit 3; fi\n")
	}
	return script.String()
}

// checkQuickRun checks run.sh --quick's output and results.
func checkQuickRun(t *testing.T, work string, out []byte) {
	for _, want := range []string{"bundle: iperf 3", "bundle: sockperf", "bundle: ethtool", "bundle: ip utility", "run.sh: done"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	res := filepath.Join(work, "results")
	for _, f := range []string{"results.json", "report.md", "chart.svg", "bench.log", "probe.txt", "VERSIONS"} {
		if st, err := os.Stat(filepath.Join(res, f)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, err := os.ReadFile(filepath.Join(res, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Machine struct {
			Tools    map[string]string `json:"tools"`
			ToolsDir string            `json:"tools_dir"`
		} `json:"machine"`
		Results []struct {
			Mode, Workload string
			Runs           []json.RawMessage
			Errors         []string
		} `json:"results"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	if f.Machine.ToolsDir != filepath.Join(work, "falcon-bench", "tools") || f.Machine.Tools["iperf3"] == "" || f.Machine.Tools["sockperf"] == "" {
		t.Errorf("results do not record the bundle's tools: dir %q, tools %v", f.Machine.ToolsDir, f.Machine.Tools)
	}
	if len(f.Results) != 6 {
		t.Errorf("%d results, want 6 (vanilla and falcon × 3 workloads)", len(f.Results))
	}
	for _, r := range f.Results {
		if len(r.Runs) != 1 || len(r.Errors) > 0 {
			t.Errorf("%s %s: %d runs, errors %v", r.Mode, r.Workload, len(r.Runs), r.Errors)
		}
	}
}

// netnsList is the host's named network namespaces.
// benchNetns matches the namespaces of the testbeds falcon-lab bench names
// (b<pid>-<n>): the stopped run's, and no other test's or session's.
var benchNetns = regexp.MustCompile(`^fb-b[0-9]+-[0-9]+(-|$)`)

// netnsList lists the bench testbeds' namespaces.
func netnsList(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v\n%s", err, out)
	}
	var ours []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 && benchNetns.MatchString(f[0]) {
			ours = append(ours, f[0])
		}
	}
	return strings.Join(ours, "\n")
}

func firstLines(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + " …"
	}
	return s
}
