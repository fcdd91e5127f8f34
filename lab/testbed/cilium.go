package testbed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The k8s-cilium layout is the k8s layout's cluster with Cilium as its
// CNI instead of Flannel and kube-proxy, built from the module proxy by
// scripts/cilium/build.sh: Cilium's CRDs, and a cilium-agent in each
// node, in the node's mount namespace and cgroup tree like its kubelet, in
// VXLAN tunnel mode with its kube-proxy replacement and BPF host routing.
// The agent compiles its datapath with clang (>= 18.1) and keeps
// its state where a node keeps it all: /run/cilium in the node's private
// mounts, with a bpffs of its own there, /run/cilium/cgroupv2 a bind of the node's own
// cgroup v2 tree (where its socket programs attach, not to the machine's
// root cgroup). Its CNI configuration, written once it serves its API,
// makes the node Ready.

// CiliumEnv names a directory of built Cilium programs instead of the
// checkout's .cache/cilium/current (scripts/cilium/build.sh).
const CiliumEnv = "FALCON_CILIUM_DIR"

var ciliumFiles = []string{"bin/cilium-agent", "cni/cilium-cni"}

// ciliumClangMajor is the oldest clang the agent compiles its datapath
// with (Cilium's Documentation/operations/system_requirements.rst: >= 18.1).
const ciliumClangMajor = 18

// CiliumDir returns the directory of the built Cilium programs, or an
// error that says how to build them.
func CiliumDir() (string, error) {
	const how = "scripts/cilium/build.sh (scripts/setup.sh --cilium; once)"
	d, err := builtDir(CiliumEnv, "cilium", ciliumFiles, "layout k8s-cilium needs Cilium's agent and CNI plugin", how)
	if err != nil {
		return "", err
	}
	for _, f := range []string{"lib/bpf/bpf_lxc.c", "crds/ciliumendpoints.yaml"} {
		if _, err := os.Stat(filepath.Join(d, f)); err != nil {
			return "", fmt.Errorf("layout k8s-cilium needs Cilium's datapath source and CRDs in %s (%s missing): run %s", d, f, how)
		}
	}
	return d, nil
}

// clangDir is the directory of the newest Debian LLVM whose clang is new
// enough for the agent, which runs "clang" from its PATH.
func clangDir() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/llvm-*/bin/clang")
	best := 0
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(filepath.Dir(d))), "llvm-"))
		if err == nil && n > best {
			best = n
		}
	}
	if best < ciliumClangMajor {
		return "", fmt.Errorf("layout k8s-cilium: cilium-agent compiles its datapath with clang >= %d.1, not found in /usr/lib/llvm-*: install clang-19 (scripts/setup.sh --cilium does)", ciliumClangMajor)
	}
	return fmt.Sprintf("/usr/lib/llvm-%d/bin", best), nil
}

// cgroup2Root is where the machine's cgroup v2 tree is mounted: the whole
// of /sys/fs/cgroup, or its unified part beside the v1 controllers.
func cgroup2Root() (string, error) {
	for _, r := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		if _, err := os.Stat(filepath.Join(r, "cgroup.controllers")); err == nil {
			return r, nil
		}
	}
	return "", fmt.Errorf("layout k8s-cilium: no cgroup v2 tree in /sys/fs/cgroup or /sys/fs/cgroup/unified (Cilium attaches its socket programs there)")
}

// CheckCilium reports what keeps the k8s-cilium layout from being built
// here: the k8s layout's needs, Cilium's build, clang, cgroup v2.
func CheckCilium() error {
	if err := CheckK8s(); err != nil {
		return fmt.Errorf("layout k8s-cilium runs the k8s layout's cluster: %w", err)
	}
	if _, err := CiliumDir(); err != nil {
		return err
	}
	if _, err := clangDir(); err != nil {
		return err
	}
	_, err := cgroup2Root()
	return err
}

func (b *builder) cilium() bool { return b.t.Layout == "k8s-cilium" }

// ciliumConflist is the CNI configuration the agent writes once it is
// ready; kubelet reports the node Ready when it appears.
const ciliumConflist = "05-cilium.conflist"

// cniBinDir is the directory of CNI plugins host's containerd runs: the
// k8s build's, or for k8s-cilium one of the host's own holding Cilium's
// plugin and the loopback plugin containerd runs for every pod.
func (b *builder) cniBinDir(bin string, h Host) (string, error) {
	if !b.cilium() {
		return filepath.Join(bin, "cni"), nil
	}
	cil, err := CiliumDir()
	if err != nil {
		return "", err
	}
	d := filepath.Join(hostDir(b.t.Name, h.Name), "cni-bin")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	for _, p := range []string{filepath.Join(cil, "cni/cilium-cni"), filepath.Join(bin, "cni/loopback")} {
		if err := os.Symlink(p, filepath.Join(d, filepath.Base(p))); err != nil {
			return "", err
		}
	}
	return d, nil
}

// ciliumSysctls are the machine-wide sysctls the agent sets at start
// (pkg/datapath/loader/base.go), not a network namespace's; it ignores a
// failure to write them, so the node's mount namespace holds them read
// only. (kernel.unprivileged_bpf_disabled=1 could not even be undone: the
// kernel takes no other value after it.) The third, net.core.bpf_jit_enable,
// does not exist outside the initial network namespace.
var ciliumSysctls = []string{"kernel.unprivileged_bpf_disabled", "kernel.timer_migration"}

// agentMounts is the shell that readies the node's mount namespace for
// the agent: its cgroup root a bind of the node's cgroup v2 tree (a
// mount point, which the agent checks for; else it mounts the machine's
// whole tree there), and ciliumSysctls read only.
func agentMounts(cgroup string) string {
	var s strings.Builder
	fmt.Fprintf(&s, "set -e\nmkdir -p /run/cilium/cgroupv2\nmount --bind %s /run/cilium/cgroupv2\n", cgroup)
	for _, k := range ciliumSysctls {
		fmt.Fprintf(&s, "mount --bind -o ro %[1]s %[1]s\n", sysctlPath(k))
	}
	return s.String() + `exec "$@"` + "\n"
}

// startAgent starts host hi's cilium-agent in its node.
func (b *builder) startAgent(cil string, hi int) error {
	t := b.t
	h := t.Hosts[hi]
	hd := hostDir(t.Name, h.Name)
	clang, err := clangDir()
	if err != nil {
		return err
	}
	cg, err := cgroup2Root()
	if err != nil {
		return err
	}
	mnt, _ := daemonPID(filepath.Join(hd, "containerd"))
	return b.startIn(enterNode(t.Name, h, mnt), h.Netns, filepath.Join(hd, "cilium-agent"),
		"sh", "-c", agentMounts(filepath.Join(cg, nodeCgroup(t.Name, h.Name))), "sh",
		"env", "K8S_NODE_NAME="+h.Name, "CILIUM_K8S_NAMESPACE=kube-system", "PATH="+clang+":"+os.Getenv("PATH"),
		filepath.Join(cil, "bin/cilium-agent"),
		"--k8s-kubeconfig-path", filepath.Join(pkiDir(t.Name), "cilium.kubeconfig"),
		"--lib-dir", filepath.Join(cil, "lib"), "--cluster-name", "default",
		// A bpffs of its own, which it mounts: it refuses /sys/fs/bpf,
		// listed twice in the node's mount table (the machine's, beneath
		// the node's sysfs, and the node's): "multiple mount points".
		"--bpf-root", "/run/cilium/bpffs",
		"--routing-mode", "tunnel", "--tunnel-protocol", "vxlan", "--ipam", "kubernetes",
		"--enable-ipv4", "--enable-ipv6=false", "--devices", h.NIC,
		// BPF host routing needs the kube-proxy replacement and BPF
		// masquerading (pkg/kpr/initializer), else the agent falls back
		// to the kernel's routing.
		"--kube-proxy-replacement", "--enable-bpf-masquerade", "--enable-host-legacy-routing=false",
		"--enable-health-checking=false", "--enable-endpoint-health-checking=false",
		"--enable-l7-proxy=false", "--enable-hubble=false",
		"--write-cni-conf-when-ready", filepath.Join(hd, "cni", ciliumConflist))
}

// ciliumNetwork creates Cilium's CRDs, which the agents wait for (the
// operator would create them; with Kubernetes' IPAM it has nothing else
// to do here), starts each node's agent, and waits for both nodes to be
// ready: their agents serving. Each compiles its datapath after that; a
// pod's CNI ADD waits for its endpoint's programs.
func (b *builder) ciliumNetwork(bin string) error {
	cil, err := CiliumDir()
	if err != nil {
		return err
	}
	// create, not apply: apply's annotation of the last applied object
	// would exceed the API server's limit for the largest CRDs.
	if _, err := b.kubectl(bin, nil, "create", "-f", filepath.Join(cil, "crds")); err != nil {
		return err
	}
	for hi := range b.t.Hosts {
		if err := b.startAgent(cil, hi); err != nil {
			return err
		}
	}
	for _, h := range b.t.Hosts {
		hd := hostDir(b.t.Name, h.Name)
		conf := filepath.Join(hd, "cni", ciliumConflist)
		if err := b.waitFor("cilium-agent in "+h.Netns+": ready (its CNI configuration written)", filepath.Join(hd, "cilium-agent"),
			k8sUpTimeout, func() (bool, error) {
				_, err := os.Stat(conf)
				return err == nil, nil
			}); err != nil {
			return err
		}
	}
	return b.waitNodes(bin, func() string { return kubeletTails(b.t) + b.agentTails() })
}

// agentTails is the end of every agent's log.
func (b *builder) agentTails() string {
	var s strings.Builder
	for _, h := range b.t.Hosts {
		fmt.Fprintf(&s, "\n%s's cilium-agent.log ends:\n%s", h.Name, logTail(filepath.Join(hostDir(b.t.Name, h.Name), "cilium-agent")))
	}
	return s.String()
}

// CiliumEndpoints is the state of each of the testbed's pods' Cilium
// endpoints (ready once its datapath is loaded), by pod name.
func CiliumEndpoints(t *Testbed) (map[string]string, error) {
	bin, err := K8sDir()
	if err != nil {
		return nil, err
	}
	out, err := kubectl(t.Name, t.Hosts[0].Netns, bin, nil, "get", "ciliumendpoints", "-o", "json")
	if err != nil {
		return nil, err
	}
	var l struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct{ State string }
		}
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, fmt.Errorf("kubectl get ciliumendpoints: %v", err)
	}
	states := map[string]string{}
	for _, e := range l.Items {
		states[e.Metadata.Name] = e.Status.State
	}
	return states, nil
}

// ciliumQuiet is how long no compiler may run in any node before the
// layout counts as up.
const ciliumQuiet = 3 * time.Second

// ciliumSettled waits until no agent compiles its datapath: the pods'
// endpoints are ready before the agents have done compiling (the host's
// and the overlay's programs, regenerations), and a bench's first
// minute would otherwise measure clang on both CPUs (1.5 k of ~90 k
// datagrams/s in the first window seen).
func (b *builder) ciliumSettled() error {
	cg, err := cgroup2Root()
	if err != nil {
		return err
	}
	var quietSince time.Time
	return b.waitFor("cilium-agents: done compiling their datapath", filepath.Join(hostDir(b.t.Name, b.t.Hosts[0].Name), "cilium-agent"),
		k8sUpTimeout, func() (bool, error) {
			for _, h := range b.t.Hosts {
				if compiling(filepath.Join(cg, nodeCgroup(b.t.Name, h.Name))) {
					quietSince = time.Time{}
					return false, nil
				}
			}
			if quietSince.IsZero() {
				quietSince = time.Now()
			}
			return time.Since(quietSince) >= ciliumQuiet, nil
		})
}

// compiling says whether a process of the cgroup tree at dir runs clang
// or llc.
func compiling(dir string) bool {
	found := false
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || found || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		procs, _ := os.ReadFile(p)
		for _, pid := range strings.Fields(string(procs)) {
			comm, _ := os.ReadFile("/proc/" + pid + "/comm")
			c := strings.TrimSpace(string(comm))
			if strings.HasPrefix(c, "clang") || strings.HasPrefix(c, "llc") {
				found = true
			}
		}
		return nil
	})
	return found
}
