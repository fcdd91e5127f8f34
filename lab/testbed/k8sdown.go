package testbed

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// What the k8s layout changes outside its namespaces, and how Down undoes
// it: the nodes' cgroup trees, and the kernel's sysctls kubelet sets
// (kubelet, not protecting the kernel's defaults, writes the values its
// containers expect; those are the machine's, not a namespace's).

// kernelSysctls are the values kubelet writes at start
// (pkg/kubelet/cm: setupKernelTunables).
var kernelSysctls = []string{"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"}

func sysctlsPath(name string) string { return filepath.Join(daemonDir(name), "kernel-sysctls") }

func sysctlPath(key string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
}

// saveKernelSysctls records kernelSysctls before any kubelet starts; while
// another k8s testbed is up, its record holds the machine's values.
func saveKernelSysctls(name string) error {
	if others := otherSysctls(name); len(others) > 0 {
		b, err := os.ReadFile(others[0])
		if err == nil {
			return os.WriteFile(sysctlsPath(name), b, 0o644)
		}
	}
	var b strings.Builder
	for _, k := range kernelSysctls {
		v, err := os.ReadFile(sysctlPath(k))
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %s\n", k, strings.TrimSpace(string(v)))
	}
	return os.WriteFile(sysctlsPath(name), []byte(b.String()), 0o644)
}

// otherSysctls are the records of the other k8s testbeds that are up.
func otherSysctls(name string) []string {
	all, _ := filepath.Glob(filepath.Join(StateDir, "*.d", "kernel-sysctls"))
	var others []string
	for _, f := range all {
		if f != sysctlsPath(name) {
			others = append(others, f)
		}
	}
	return others
}

// restoreKernelSysctls writes back what saveKernelSysctls recorded, once
// no other k8s testbed's kubelets need the values.
func restoreKernelSysctls(name string) error {
	b, err := os.ReadFile(sysctlsPath(name))
	if errors.Is(err, os.ErrNotExist) || len(otherSysctls(name)) > 0 {
		return nil
	}
	var errs []error
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, " "); ok {
			if err := os.WriteFile(sysctlPath(k), []byte(v), 0); err != nil {
				errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, v, err))
			}
		}
	}
	return errors.Join(errs...)
}

// cgroupRoots are the mounted hierarchies: cgroup v1's controllers and
// the v2 tree (unified, or the whole of /sys/fs/cgroup).
func cgroupRoots() []string {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return []string{"/sys/fs/cgroup"}
	}
	var roots []string
	ents, _ := os.ReadDir("/sys/fs/cgroup")
	for _, e := range ents {
		if e.IsDir() {
			roots = append(roots, filepath.Join("/sys/fs/cgroup", e.Name()))
		}
	}
	return roots
}

// makeCgroups makes top and top/sub in every hierarchy; a v1 cpuset
// takes its CPUs and memory nodes from its parent, as a new one has none.
func makeCgroups(top, sub string) error {
	for _, r := range cgroupRoots() {
		parent := r
		for _, d := range []string{top, filepath.Join(top, sub)} {
			p := filepath.Join(r, d)
			if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if v, err := os.ReadFile(filepath.Join(parent, f)); err == nil && filepath.Base(r) == "cpuset" {
					if err := os.WriteFile(filepath.Join(p, f), v, 0); err != nil {
						return fmt.Errorf("%s: %w", filepath.Join(p, f), err)
					}
				}
			}
			parent = p
		}
	}
	return nil
}

// cgroupPIDs lists the processes in cgroup top and below, in every
// hierarchy.
func cgroupPIDs(top string) []int {
	seen := map[int]bool{}
	for _, r := range cgroupRoots() {
		filepath.WalkDir(filepath.Join(r, top), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	var pids []int
	for pid := range seen {
		pids = append(pids, pid)
	}
	return pids
}

// killCgroup kills every process in cgroup top until none is left: a node's
// daemons, shims and pods, whatever started them.
func killCgroup(top string) error {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		pids := cgroupPIDs(top)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s: processes %v survive SIGKILL", top, pids)
		}
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// teardownK8s undoes the k8s layout of testbed name from its daemon
// directory alone: kubelets stopped first (none restarts a pod), then
// every process of each node killed by its cgroup tree (which takes the
// node's mount namespace, and with it every mount containerd and kubelet
// made, and the pods' namespaces but those attached under the testbed's
// names), the control plane stopped, the kernel's sysctls restored, the
// cgroups removed.
func teardownK8s(name string) error {
	dir := daemonDir(name)
	if _, err := os.Stat(filepath.Join(dir, "k8s")); err != nil {
		return nil
	}
	var errs []error
	for _, h := range hostNames {
		stopDaemon(filepath.Join(hostDir(name, h), "kubelet"))
	}
	for _, h := range hostNames {
		errs = append(errs, killCgroup(nodeCgroup(name, h)))
	}
	for _, d := range []string{"kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"} {
		stopDaemon(filepath.Join(dir, d))
	}
	errs = append(errs, restoreKernelSysctls(name))
	for _, h := range hostNames {
		errs = append(errs, removeCgroup(nodeCgroup(name, h)))
	}
	errs = append(errs, unmountUnder(dir))
	return errors.Join(errs...)
}
