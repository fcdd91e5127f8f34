package main

import (
	"context"
	"encoding/json"
	"errors"
	"github.com/falconnet/falcon/lab/hostpaths"
	"github.com/falconnet/falcon/lab/roottest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// testName names everything the load tests create: the containerd
// namespace, the containers, the cgroups.
const testName = "falcon-image-test"

// builtImage builds falcon, stamped with a test version, and its image
// as make image does. The tool packages come from the repository's cache,
// so a second run downloads nothing.
func builtImage(t *testing.T) (tarPath, version, digest string) {
	t.Helper()
	for _, c := range []string{"apt-get", "dpkg-deb"} {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is missing: the image's nft comes from Debian's packages", c)
		}
	}
	dir := t.TempDir()
	version = "imagetest"
	bin := filepath.Join(dir, "falcon")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X main.version="+version, "-o", bin, "../../cmd/falcon")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build falcon: %v\n%s", err, out)
	}
	tarPath = filepath.Join(dir, "falcon-image.tar")
	d, err := run(bin, "localhost/falcon", "latest", tarPath, "../../.cache/image-debs", "nftables:/usr/sbin/nft", "1700000000")
	if err != nil {
		t.Fatal(err)
	}
	return tarPath, version, d.String()
}

func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	roottest.Need(t) // starts a containerd or dockerd of its own
	for _, c := range tools {
		if _, err := exec.LookPath(c); err != nil {
			t.Skipf("%s is missing (Debian: apt-get install -y containerd docker.io)", c)
		}
	}
}

// daemon starts a daemon under dir and stops it when the test ends.
func daemon(t *testing.T, dir string, wait func() error, argv ...string) {
	t.Helper()
	log, err := os.Create(filepath.Join(dir, filepath.Base(argv[0])+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		log.Close()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := wait()
		if err == nil {
			return
		}
		select {
		case <-done:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("%s exited: %s", argv[0], b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("%s does not answer: %v\n%s", argv[0], err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runOut runs a command with a deadline and returns its output.
func runOut(t *testing.T, env []string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// removeCgroup removes cgroup name and those below it from every
// hierarchy, as the runtimes leave their parents behind.
func removeCgroup(t *testing.T, name string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, r := range append(roots, "/sys/fs/cgroup") {
		var dirs []string
		filepath.WalkDir(filepath.Join(r, name), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil {
				t.Errorf("cgroup left behind: %v", err)
			}
		}
	}
}

// leaveNoTrace claims paths for the test (lab/hostpaths): what the daemons
// make outside their own directories whatever their configuration
// (containerd's shim sockets under /run/containerd/s, dockerd's
// /run/docker/plugins). When the test ends, the last of the lab's users
// removes those that did not exist before, once empty; a made path that
// still holds a file then is a trace the test leaves.
func leaveNoTrace(t *testing.T, paths ...string) {
	id := testName + "/" + t.Name()
	if err := hostpaths.Claim(id, os.Getpid(), paths); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		left, err := hostpaths.Release(id)
		if err != nil || len(left) > 0 {
			t.Errorf("left behind: %v %v", left, err)
		}
	})
}

// scratchDir is a directory for a daemon's state, removed with whatever
// the daemon left mounted in it.
func scratchDir(t *testing.T) string {
	dir, err := os.MkdirTemp("", testName+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		removeCgroup(t, testName)
		if err := os.RemoveAll(dir); err != nil {
			// A mount left by a killed daemon: detach it, then retry.
			exec.Command("sh", "-c", "grep -o ' "+dir+"[^ ]*' /proc/self/mountinfo | sort -r | xargs -r -n1 umount -l").Run()
			if err := os.RemoveAll(dir); err != nil {
				t.Errorf("state left behind: %v", err)
			}
		}
	})
	return dir
}

// A containerd of the test's own imports the tarball with ctr, and runs
// falcon and nft from it.
func TestContainerdImportsAndRuns(t *testing.T) {
	needRoot(t, "containerd", "ctr", "runc", "containerd-shim-runc-v2")
	tarPath, version, digest := builtImage(t)
	leaveNoTrace(t, "/run/containerd", "/run/containerd/s")
	dir := scratchDir(t)
	sock := filepath.Join(dir, "containerd.sock")
	// After the daemon stops (cleanups run last first): a shim still
	// exiting at the release would keep /run/containerd/s, then leave it.
	t.Cleanup(func() { hostpaths.StopShims(sock) })
	// No CRI: this containerd serves ctr alone; no opt plugin, which would
	// make /opt/containerd.
	conf := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(conf, []byte("version = 2\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.internal.v1.opt\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctr := []string{"ctr", "-a", sock, "-n", testName}
	daemon(t, dir, func() error { return exec.Command("ctr", "-a", sock, "version").Run() },
		"containerd", "--config", conf, "--root", filepath.Join(dir, "root"), "--state", filepath.Join(dir, "state"), "--address", sock)
	out := runOut(t, nil, append(ctr, "images", "import", tarPath)...)
	t.Logf("ctr images import:\n%s", out)
	list := runOut(t, nil, append(ctr, "images", "list", "-q")...)
	// The pinned DaemonSet's reference (deploy.go) is an image of its own
	// name, the one the kubelet asks containerd for.
	ref := "localhost/falcon@" + digest
	for _, tag := range []string{"localhost/falcon:" + version, "localhost/falcon:latest", ref} {
		if !strings.Contains(list, tag+"\n") {
			t.Errorf("ctr images list has no %s:\n%s", tag, list)
		}
	}
	// Each runs and exits 0 (what they print is TestDockerLoadsAndRuns's
	// to read: ctrRun says why).
	for i, argv := range []string{"/usr/local/bin/falcon version", "/usr/sbin/nft --version"} {
		out, code := ctrRun(t, ctr, dir, ref, string(rune('a'+i)), nil, strings.Fields(argv)...)
		if code != 0 {
			t.Errorf("%s in the image: exit %d, %q", argv, code, out)
		}
	}
	// The agent as the DaemonSet runs it, given an unknown mode for its
	// node: it stops with a usage error before it touches anything (it
	// holds no capability here to touch anything with).
	modes := unknownMode(t, dir)
	_, code := ctrRun(t, ctr, dir, ref, "agent", []string{"--mount", "type=bind,src=" + modes + ",dst=/etc/falcon/config,options=rbind:ro"},
		binPath, "agent", "--mode-config=/etc/falcon/config", "--node-name=node-1")
	if code != 2 {
		t.Errorf("the image's agent with an unknown mode: exit %d, want 2", code)
	}
}

// unknownMode writes a ConfigMap volume under dir that gives node-1 a mode
// falcon does not have.
func unknownMode(t *testing.T, dir string) string {
	t.Helper()
	modes := filepath.Join(dir, "modes")
	if err := os.MkdirAll(modes, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(modes, "mode.node-1"), []byte("turbo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return modes
}

// wantUnknownMode checks the agent's refusal of unknownMode's mode.
func wantUnknownMode(t *testing.T, out string, code int) {
	t.Helper()
	if code != 2 || !strings.Contains(out, "node node-1: ConfigMap key mode.node-1: unknown mode") {
		t.Errorf("the image's agent with an unknown mode: exit %d, %q; want exit 2 naming the node and the key", code, out)
	}
}

// ctrRun runs argv in a container of image ref and returns its output and
// exit status; runc's state goes under dir, not /run/containerd. The shim
// writes the task's output to a file (--log-uri). ctr deletes the task as
// soon as it exits, and its output can be lost with it, through FIFOs or a
// log file alike (a few runs in ten of a task that exits at once, on a
// loaded machine): callers check its exit status, docker run the output.
func ctrRun(t *testing.T, ctr []string, dir, ref, name string, opts []string, argv ...string) (string, int) {
	t.Helper()
	id := testName + "-" + name
	logFile := filepath.Join(dir, id+".log")
	args := append(append(ctr[1:], "run", "--rm", "--cgroup", "/"+testName+"/"+id, "--log-uri", "file://"+logFile,
		"--runc-root", filepath.Join(dir, "runc")), opts...)
	args = append(append(args, ref, id), argv...)
	msg, err := exec.Command(ctr[0], args...).CombinedOutput()
	code := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("ctr %s: %v\n%s", strings.Join(args, " "), err, msg)
	}
	out, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatalf("ctr run %s (exit %d, %s): %v", strings.Join(argv, " "), code, msg, err)
	}
	return string(msg) + string(out), code
}

// A dockerd of the test's own, set up as the docker-swarm layout runs its
// daemons but in the host's namespace with no network of its own (no
// bridge, no iptables, no forwarding change), loads the tarball and runs
// falcon from it.
func TestDockerLoadsAndRuns(t *testing.T) {
	needRoot(t, "dockerd", "docker", "containerd", "runc")
	tarPath, version, _ := builtImage(t)
	// dockerd's containerd runs its opt plugin, which makes /opt/containerd.
	leaveNoTrace(t, "/run/docker", "/run/docker/plugins", "/etc/docker", "/etc/docker/key.json",
		"/opt/containerd", "/opt/containerd/bin", "/opt/containerd/lib", "/run/containerd", "/run/containerd/s")
	dir := scratchDir(t)
	t.Cleanup(func() { hostpaths.StopShims(filepath.Join(dir, "exec", "containerd", "containerd.sock")) })
	sock := filepath.Join(dir, "docker.sock")
	conf, _ := json.Marshal(map[string]any{
		"data-root": filepath.Join(dir, "data"), "exec-root": filepath.Join(dir, "exec"),
		"pidfile": filepath.Join(dir, "docker.pid"), "hosts": []string{"unix://" + sock},
		"deprecated-key-path": filepath.Join(dir, "key.json"), // else /etc/docker/key.json
		"cgroup-parent":       "/" + testName, "bridge": "none",
		"iptables": false, "ip6tables": false, "ip-forward": false,
	})
	cf := filepath.Join(dir, "daemon.json")
	if err := os.WriteFile(cf, conf, 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DOCKER_HOST=unix://" + sock, "DOCKER_CONFIG=" + filepath.Join(dir, "cli")}
	daemon(t, dir, func() error {
		cmd := exec.Command("docker", "version")
		cmd.Env = append(os.Environ(), env...)
		return cmd.Run()
	}, "dockerd", "--config-file", cf)
	out := runOut(t, env, "docker", "load", "-i", tarPath)
	if !strings.Contains(out, "localhost/falcon:"+version) {
		t.Errorf("docker load did not tag localhost/falcon:%s:\n%s", version, out)
	}
	got := runOut(t, env, "docker", "run", "--rm", "--network", "none", "localhost/falcon:latest", "version")
	if nft := runOut(t, env, "docker", "run", "--rm", "--network", "none", "--entrypoint", "/usr/sbin/nft", "localhost/falcon:latest", "--version"); !strings.Contains(nft, "nftables v") {
		t.Errorf("docker run nft --version printed %q", nft)
	}
	if !strings.Contains(got, "falcon "+version) {
		t.Errorf("docker run falcon version printed %q", got)
	}
	// docker run attaches before the task starts: every byte arrives.
	agent := exec.Command("docker", "run", "--rm", "--network", "none", "-v", unknownMode(t, dir)+":/etc/falcon/config:ro",
		"localhost/falcon:latest", "agent", "--mode-config=/etc/falcon/config", "--node-name=node-1")
	agent.Env = append(os.Environ(), env...)
	msg, err := agent.CombinedOutput()
	code := 0
	if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
		code = ee.ExitCode()
	}
	wantUnknownMode(t, string(msg), code)
	if _, err := os.Stat(filepath.Join(dir, "docker.pid")); errors.Is(err, os.ErrNotExist) {
		t.Errorf("dockerd wrote no pid file under %s: it may use the system's paths", dir)
	}
}
