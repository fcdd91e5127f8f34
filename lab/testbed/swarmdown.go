package testbed

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/falconnet/falcon/lab/hostpaths"
)

// hostClaim names a testbed's claim on hostPaths (lab/hostpaths), held
// from up to down.
func hostClaim(name string) string { return "testbed/" + name }

// teardownSwarm undoes what the Docker daemons of testbed name made, from
// the daemon directory alone: the containers are removed and the daemons
// stopped (which unmounts their sandboxes and file systems); after a kill,
// whatever still runs in the testbed's namespaces is killed and what is
// still mounted under the directory unmounted. Then the containers'
// cgroups, the load balancer's files and the empty host paths the daemons
// made go.
func teardownSwarm(name string) error {
	dir := daemonDir(name)
	bases, _ := filepath.Glob(filepath.Join(dir, "*", "dockerd.pid"))
	if len(bases) == 0 {
		// An up that failed before its daemons started still holds its claim.
		_, err := hostpaths.Release(hostClaim(name))
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, p := range bases {
		base := strings.TrimSuffix(p, ".pid")
		host := filepath.Base(filepath.Dir(base))
		if alive(base) {
			if ids, err := dockerCLI(ctx, name, host, nil, "ps", "--all", "--quiet", "--filter", "label="+swarmLabel+"="+name); err == nil && len(ids) > 0 {
				dockerCLI(ctx, name, host, nil, append([]string{"rm", "--force"}, strings.Fields(string(ids))...)...)
			}
		}
		stopDaemon(base)
		hostpaths.StopShims(shimAddress(filepath.Join(filepath.Dir(p), "docker")))
	}
	var errs []error
	if nss, err := owned(name); err == nil {
		for _, ns := range nss {
			killIn(ns)
		}
	}
	for _, p := range bases {
		removeShimSockets(filepath.Join(filepath.Dir(p), "docker"))
	}
	errs = append(errs, unmountUnder(dir))
	for _, p := range bases {
		errs = append(errs, removeCgroup(cgroupParent(name, filepath.Base(filepath.Dir(p)))))
	}
	if id, err := os.ReadFile(filepath.Join(dir, "network")); err == nil && len(id) > 0 {
		// The load balancer's sandbox files ignore the data root.
		os.RemoveAll(filepath.Join("/var/lib/docker/network/files", "lb_"+strings.TrimSpace(string(id))))
	}
	if _, err := hostpaths.Release(hostClaim(name)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeShimSockets removes the sockets of the containers of the daemon
// in dir that their shims, killed, left in containerd's fixed directory.
func removeShimSockets(dir string) {
	ids, _ := os.ReadDir(filepath.Join(dir, "data", "containers"))
	for _, id := range ids {
		os.Remove(hostpaths.ShimSocket(shimAddress(dir), "moby", id.Name()))
	}
}

// shimAddress is the socket of the containerd of the daemon in dir.
func shimAddress(dir string) string {
	return filepath.Join(dir, "exec", "containerd", "containerd.sock")
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(dir string) error {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	var mps []string
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			mps = append(mps, f[4])
		}
	}
	var errs []error
	for i := len(mps) - 1; i >= 0; i-- { // mountinfo lists parents first
		if err := unmount(mps[i]); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeCgroup removes cgroup name, and the containers' below it, from
// every hierarchy (cgroup v1 controllers, the v2 tree).
func removeCgroup(name string) error {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	var errs []error
	for _, r := range roots {
		top := filepath.Join(r, name)
		if st, err := os.Stat(top); err != nil || !st.IsDir() {
			continue
		}
		dirs := hostpaths.DirsUnder(top)
		for i := len(dirs) - 1; i >= 0; i-- {
			drainCgroup(dirs[i])
			if err := os.Remove(dirs[i]); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// drainCgroup kills what is left in cgroup dir and waits, up to 5 s, until
// the kernel has taken every task out: a container's processes, killed
// with it, can still be exiting when its daemon has stopped, and a cgroup
// that holds a task cannot be removed (EBUSY).
func drainCgroup(dir string) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		pids := strings.Fields(string(b))
		if err != nil || len(pids) == 0 || time.Now().After(deadline) {
			return
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
}
