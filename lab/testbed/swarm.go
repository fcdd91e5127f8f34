package testbed

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/hostpaths"
)

// The docker-swarm layout is Docker's own overlay driver, not an imitation:
// a dockerd (Debian's docker.io) in each host namespace, with its own data
// root, exec root, socket and configuration file, joined as a swarm over
// the wire; an attachable overlay network made by the manager (h1); and
// containers on it, run from an image imported from a root file system
// made here (no registry). Docker makes the VXLAN device and the bridge in
// a sandbox namespace of its own (EXEC_ROOT/netns/1-<network>), names the
// veths, picks the VNI and the addresses, and writes the neighbour and FDB
// entries once the nodes' gossip has told it where each container is. Up
// only reads back what it made; each container's namespace is attached
// under the testbed's usual name, so everything else runs unchanged.

// swarmTools are the programs the layout runs, and the Debian package of
// each.
var swarmTools = []struct{ cmd, pkg string }{
	{"dockerd", "docker.io"}, {"docker", "docker.io"}, {"containerd", "containerd"},
	{"runc", "runc"}, {"iptables", "iptables"}, {"nsenter", "util-linux"},
}

// imageTools go into the containers' image: something to keep a container
// running, and the benchmark's tools, for 'docker exec'. The benchmark runs
// its own copies in the containers' namespaces, as on every layout.
var imageTools = []string{"sleep", "iperf3", "sockperf"}

const (
	swarmNetwork = "falcon"
	swarmImage   = "falcon-testbed"
	// swarmLabel marks the containers of a testbed (value: its name).
	swarmLabel = "falcon.testbed"
)

// hostPaths are directories the daemons make outside their roots whatever
// they are told (the plugin directory, containerd's shim sockets and its
// opt plugin's directory, which dockerd's containerd runs with, the load
// balancer's sandbox files); Up claims them and Down releases them
// (lab/hostpaths): the last of the lab's users to go removes those that did
// not exist before any of them, once empty.
var hostPaths = []string{"/run/docker", "/run/docker/plugins", "/run/containerd", "/run/containerd/s",
	"/opt/containerd", "/opt/containerd/bin", "/opt/containerd/lib",
	"/var/lib/docker", "/var/lib/docker/network", "/var/lib/docker/network/files"}

// DockerdEnv names the dockerd the docker-swarm layout runs, instead of
// the one in PATH.
const DockerdEnv = "FALCON_DOCKERD"

func dockerd() string {
	if d := os.Getenv(DockerdEnv); d != "" {
		return d
	}
	return "dockerd"
}

// CheckSwarm reports what keeps the docker-swarm layout from being built
// here.
func CheckSwarm() error {
	if d := os.Getenv(DockerdEnv); d != "" {
		if st, err := os.Stat(d); err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("layout docker-swarm: %s=%s is not an executable dockerd", DockerdEnv, d)
		}
	}
	for _, t := range swarmTools {
		if t.cmd == "dockerd" && os.Getenv(DockerdEnv) != "" {
			continue
		}
		if _, err := exec.LookPath(t.cmd); err != nil {
			return fmt.Errorf("layout docker-swarm needs %q, not found in PATH: install the %s package (scripts/setup.sh --daemons does)", t.cmd, t.pkg)
		}
	}
	for _, t := range imageTools {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("layout docker-swarm puts %q into its image, not found in PATH (scripts/setup.sh --daemons installs it)", t)
		}
	}
	return nil
}

// dockerDir is host h's daemon's: data and exec roots, configuration,
// socket.
func dockerDir(name, host string) string { return filepath.Join(hostDir(name, host), "docker") }

// cgroupParent is where the containers of host h go: a cgroup of the
// testbed's own, removed by Down.
func cgroupParent(name, host string) string { return "falcon-" + name + "-" + host }

// dockerCLI runs the docker client against host h's daemon; its configuration
// directory is the testbed's, so nothing lands in ~/.docker.
func dockerCLI(ctx context.Context, name, host string, stdin []byte, args ...string) ([]byte, error) {
	d := dockerDir(name, host)
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = append(os.Environ(), "DOCKER_HOST=unix://"+filepath.Join(d, "docker.sock"), "DOCKER_CONFIG="+filepath.Join(d, "cli"))
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("docker %s (%s): %v: %s", strings.Join(args, " "), host, err, strings.TrimSpace(stderr.String()))
	}
	return bytes.TrimSpace(out), nil
}

func (b *builder) dockerCLI(hi int, stdin []byte, args ...string) ([]byte, error) {
	return dockerCLI(b.ctx, b.t.Name, b.t.Hosts[hi].Name, stdin, args...)
}

// dockerSwarm starts the daemons, forms the swarm, and runs the containers.
func (b *builder) dockerSwarm() error {
	t := b.t
	if err := os.MkdirAll(daemonDir(t.Name), 0o755); err != nil {
		return err
	}
	if err := hostpaths.Claim(hostClaim(t.Name), 0, hostPaths); err != nil {
		return err
	}
	if err := b.mgmtLink(); err != nil {
		return err
	}
	for hi := range t.Hosts {
		if err := b.startDockerd(hi); err != nil {
			return err
		}
	}
	for hi := range t.Hosts {
		base := filepath.Join(hostDir(t.Name, t.Hosts[hi].Name), "dockerd")
		if err := b.wait("dockerd in "+t.Hosts[hi].Netns+": answer", base, func() (bool, error) {
			_, err := b.dockerCLI(hi, nil, "version")
			return err == nil, err
		}); err != nil {
			return err
		}
	}
	h1, h2 := t.Hosts[0], t.Hosts[1]
	m1, m2 := mgmtAddr(0), mgmtAddr(1)
	if _, err := b.dockerCLI(0, nil, "swarm", "init", "--advertise-addr", m1, "--listen-addr", m1+":2377",
		"--data-path-addr", h1.Addr); err != nil {
		return err
	}
	token, err := b.dockerCLI(0, nil, "swarm", "join-token", "-q", "worker")
	if err != nil {
		return err
	}
	if _, err := b.dockerCLI(1, nil, "swarm", "join", "--token", string(token),
		"--advertise-addr", m2, "--listen-addr", m2+":2377", "--data-path-addr", h2.Addr, m1+":2377"); err != nil {
		return err
	}
	rootfs, sleep, err := imageTar()
	if err != nil {
		return err
	}
	cmd, _ := json.Marshal([]string{sleep, "infinity"})
	for hi := range t.Hosts {
		if _, err := b.dockerCLI(hi, rootfs, "import", "--change", "CMD "+string(cmd), "-", swarmImage); err != nil {
			return err
		}
	}
	netID, err := b.dockerCLI(0, nil, "network", "create", "--driver", "overlay", "--attachable", swarmNetwork)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(daemonDir(t.Name), "network"), netID, 0o644); err != nil {
		return err
	}
	for hi := range t.Hosts {
		for ci := range t.Hosts[hi].Containers {
			if err := b.runContainer(hi, ci, string(netID)); err != nil {
				return err
			}
		}
	}
	// The other node's containers become reachable once its gossip has
	// told this one where they are: a permanent neighbour entry each.
	for hi := range t.Hosts {
		if err := b.waitNeighbours(hi); err != nil {
			return err
		}
	}
	return nil
}

// The swarm's control plane (raft, gossip) runs over a link of its own, as
// on nodes with a management network, and only VXLAN crosses the wire:
// the wire's rule (see wire). The gossip's probes, sent from the daemons'
// threads on any CPU, would otherwise move the wire's NAPI poll there
// mid-run.
const mgmtDev = "mgmt0"

func mgmtAddr(hi int) string { return fmt.Sprintf("10.10.1.%d", hi+1) }

// mgmtLink joins the hosts by the management link.
func (b *builder) mgmtLink() error {
	h1, h2 := b.t.Hosts[0], b.t.Hosts[1]
	if err := b.ip(h1.Netns, fmt.Sprintf("link add %s type veth peer name %s netns %s", mgmtDev, mgmtDev, h2.Netns)); err != nil {
		return err
	}
	for hi, h := range b.t.Hosts {
		if err := b.ip(h.Netns, fmt.Sprintf("addr add %s/24 dev %s", mgmtAddr(hi), mgmtDev),
			fmt.Sprintf("link set %s up", mgmtDev)); err != nil {
			return err
		}
	}
	return nil
}

// startDockerd starts host hi's dockerd with a configuration file that
// keeps all it writes, but for hostPaths, under its directory.
func (b *builder) startDockerd(hi int) error {
	t := b.t
	h := t.Hosts[hi]
	d := dockerDir(t.Name, h.Name)
	if err := os.MkdirAll(filepath.Join(d, "cli"), 0o700); err != nil {
		return err
	}
	conf, _ := json.Marshal(map[string]any{
		"data-root":           filepath.Join(d, "data"),
		"exec-root":           filepath.Join(d, "exec"),
		"pidfile":             filepath.Join(d, "exec", "docker.pid"),
		"hosts":               []string{"unix://" + filepath.Join(d, "docker.sock")},
		"deprecated-key-path": filepath.Join(d, "key.json"), // else /etc/docker/key.json
		"cgroup-parent":       "/" + cgroupParent(t.Name, h.Name),
		"bridge":              "none", // no docker0: the overlay is the network under test
	})
	cf := filepath.Join(d, "daemon.json")
	if err := os.WriteFile(cf, conf, 0o600); err != nil {
		return err
	}
	// nsenter, not 'ip netns exec': that one runs the daemon in a mount
	// namespace of its own with sysfs mounted again, where the cgroup
	// hierarchies are missing ("Devices cgroup isn't mounted"), and the
	// sandboxes the daemon bind-mounts there would be out of everyone
	// else's reach.
	return b.startIn([]string{"nsenter", "--net=" + netns.Path(h.Netns)}, h.Netns,
		filepath.Join(hostDir(t.Name, h.Name), "dockerd"), dockerd(), "--config-file", cf)
}

// runContainer runs container ci of host hi, attaches its namespace under
// the testbed's name for it, and reads back what Docker chose.
func (b *builder) runContainer(hi, ci int, netID string) error {
	t := b.t
	h := &t.Hosts[hi]
	c := &h.Containers[ci]
	cname := t.Name + "-" + h.Name + "-" + c.Name
	if _, err := b.dockerCLI(hi, nil, "run", "--detach", "--name", cname, "--hostname", c.Name,
		"--network", swarmNetwork, "--label", swarmLabel+"="+t.Name, swarmImage); err != nil {
		return err
	}
	out, err := b.dockerCLI(hi, nil, "inspect", "--format",
		`{{.State.Pid}} {{(index .NetworkSettings.Networks "`+swarmNetwork+`").IPAddress}}`, cname)
	if err != nil {
		return err
	}
	f := strings.Fields(string(out))
	if len(f) != 2 {
		return fmt.Errorf("docker inspect %s: %q: no pid or no address on %s", cname, out, swarmNetwork)
	}
	c.Addr = f[1]
	// Not cancellable, as 'ip netns add' in build.
	if o, err := exec.Command("ip", "netns", "attach", c.Netns, f[0]).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns attach %s %s: %v: %s", c.Netns, f[0], err, strings.TrimSpace(string(o)))
	}
	b.created = append(b.created, c.Netns)
	sandbox := filepath.Join(dockerDir(t.Name, h.Name), "exec", "netns", "1-"+netID[:min(10, len(netID))])
	if !netns.Exists(sandbox) {
		return fmt.Errorf("docker-swarm: the overlay network's sandbox %s is missing", sandbox)
	}
	h.Sandbox = sandbox
	if c.HostVeth, err = peerVeth(c.Netns, c.Dev, sandbox); err != nil {
		return err
	}
	return netns.Do(sandbox, func() error {
		vx, err := netlink.LinkByName(h.Overlay)
		if err != nil {
			return fmt.Errorf("%s: %s: %w", sandbox, h.Overlay, err)
		}
		if v, ok := vx.(*netlink.Vxlan); ok {
			h.VNI, h.Port = v.VxlanId, v.Port
		}
		return nil
	})
}

// peerVeth is the name of the other end, in namespace hostNS, of the veth
// dev of namespace podNS.
func peerVeth(podNS, dev, hostNS string) (string, error) {
	var peer int
	err := netns.Do(podNS, func() error {
		l, err := netlink.LinkByName(dev)
		if err == nil {
			peer = l.Attrs().ParentIndex
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", podNS, dev, err)
	}
	name := ""
	err = netns.Do(hostNS, func() error {
		l, err := netlink.LinkByIndex(peer)
		if err != nil {
			return fmt.Errorf("%s: the peer of %s's %s (ifindex %d): %w", hostNS, podNS, dev, peer, err)
		}
		name = l.Attrs().Name
		return nil
	})
	return name, err
}

// waitNeighbours waits until host hi's overlay knows every container of
// the other host.
func (b *builder) waitNeighbours(hi int) error {
	h, p := b.t.Hosts[hi], b.peer(hi)
	base := filepath.Join(hostDir(b.t.Name, h.Name), "dockerd")
	return b.wait(fmt.Sprintf("dockerd in %s: learn %s's containers", h.Netns, p.Name), base, func() (bool, error) {
		known := map[string]bool{}
		err := netns.Do(h.Sandbox, func() error {
			vx, err := netlink.LinkByName(h.Overlay)
			if err != nil {
				return err
			}
			ns, err := netlink.NeighList(vx.Attrs().Index, netlink.FAMILY_ALL)
			for _, n := range ns {
				if n.IP != nil {
					known[n.IP.String()] = true
				}
			}
			return err
		})
		if err != nil {
			return false, err
		}
		for _, c := range p.Containers {
			if !known[c.Addr] {
				return false, fmt.Errorf("no neighbour entry for %s (%s)", c.Addr, c.Name)
			}
		}
		return true, nil
	})
}

// imageTar is a root file system holding imageTools and every library they
// load, as a tar stream for 'docker import', and the path of sleep in it.
func imageTar() ([]byte, string, error) {
	files, paths, err := toolFiles(imageTools)
	if err != nil {
		return nil, "", err
	}
	b, err := tarFiles(files)
	return b, paths["sleep"], err
}

// toolFiles finds programs in PATH and the libraries each loads: every
// file to copy, and where each program is.
func toolFiles(tools []string) (files map[string]bool, paths map[string]string, err error) {
	files, paths = map[string]bool{}, map[string]string{}
	for _, t := range tools {
		p, err := exec.LookPath(t)
		if err != nil {
			return nil, nil, err
		}
		if p, err = filepath.EvalSymlinks(p); err != nil {
			return nil, nil, err
		}
		paths[t] = p
		files[p] = true
		// ldd prints "lib => /path (addr)" and the loader as "/path (addr)";
		// a static program has none.
		out, _ := exec.Command("ldd", p).Output()
		for _, f := range strings.Fields(string(out)) {
			if strings.HasPrefix(f, "/") {
				files[f] = true
			}
		}
	}
	return files, paths, nil
}

// tarFiles packs files (their contents, symbolic links followed) with their
// directories, and a /tmp for the tools' temporary files.
func tarFiles(files map[string]bool) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{"/": true}
	var adddir func(d string) error
	adddir = func(d string) error {
		if dirs[d] {
			return nil
		}
		if err := adddir(filepath.Dir(d)); err != nil {
			return err
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755})
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "tmp/", Mode: 0o1777}); err != nil {
		return nil, err
	}
	for _, f := range slices.Sorted(maps.Keys(files)) {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if err := adddir(filepath.Dir(f)); err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(f, "/"), Mode: 0o755, Size: int64(len(b))}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
