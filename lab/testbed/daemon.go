package testbed

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/falconnet/falcon/lab/hostpaths"
)

// The flannel-daemon layout is Flannel itself, not an imitation: etcd (its
// store) in h1, flanneld with the VXLAN backend in both hosts, and pods made
// by the CNI plugins (Flannel's, delegating to bridge and host-local) in
// their own namespaces. flanneld picks each host's subnet, creates
// flannel.1 and writes the routes, neighbour and FDB entries; the bridge
// plugin creates cni0 and names the host veths; host-local hands out the
// addresses. Up only reads back what they made. Every file they write
// lives under the testbed's daemon directory, and every process runs inside
// a host namespace, so removing both removes all of it.

// DaemonsEnv names a directory of built daemons (bin/flanneld, bin/etcd,
// cni/bridge, cni/host-local, cni/flannel) to use instead of the one
// scripts/setup.sh --daemons builds (the checkout's .cache/daemons/current).
const DaemonsEnv = "FALCON_DAEMONS_DIR"

var daemonFiles = []string{"bin/flanneld", "bin/etcd", "cni/flannel", "cni/bridge", "cni/host-local"}

// flanneld's nftables mode runs nft; its start-up clean-up of the iptables
// mode's rules runs iptables and ip6tables whatever the mode.
var daemonTools = []struct{ cmd, pkg string }{{"nft", "nftables"}, {"iptables", "iptables"}, {"ip6tables", "iptables"}}

// flannelNetwork is Flannel's default network; each host leases a /24 of it.
const flannelNetwork = "10.244.0.0/16"

// flannelNetwork6 is the IPv6 network of an --ipv6 testbed: each host
// leases a /64 of it, as the address plan's flannel layout has.
const flannelNetwork6 = "fd00:244::/48"

// flannelConfig is the network configuration flanneld reads from etcd.
// nftables, not iptables: the iptables mode needs br_netfilter, a module
// whose loading would change how every bridge of the machine filters.
// Over IPv6 Flannel runs dual stack (flannel.1 and flannel-v6.1, each
// over its own family's underlay), not IPv6 only: its etcd manager reuses
// any lease whose public IPv4 address is its own, 0.0.0.0 for every
// IPv6-only host, so h2 took h1's /64 (v0.28.10, tryAcquireLease; its
// --public-ip does not reach the lease). The testbed's traffic is IPv6.
func flannelConfig(v6 bool) string {
	extra := ""
	if v6 {
		extra = fmt.Sprintf(`"EnableIPv6":true,"IPv6Network":%q,"IPv6SubnetLen":64,`, flannelNetwork6)
	}
	return fmt.Sprintf(`{"Network":%q,"SubnetLen":24,%s"EnableNFTables":true,"Backend":{"Type":"vxlan"}}`, flannelNetwork, extra)
}

// DaemonsDir returns the directory of the flannel-daemon layout's built
// programs, or an error that says how to build them.
func DaemonsDir() (string, error) {
	return builtDir(DaemonsEnv, "daemons", daemonFiles,
		"layout flannel-daemon needs flanneld, etcd and the CNI plugins", "scripts/setup.sh --daemons (about 3 minutes, once)")
}

// builtDir finds a directory of programs a script builds: the one env
// names, else .cache/<sub>/current of the checkout falcon runs from
// (bin/falcon) or is tested in. need and how complete the error.
func builtDir(env, sub string, files []string, need, how string) (string, error) {
	var dirs []string
	if d := os.Getenv(env); d != "" {
		dirs = []string{d}
	} else {
		var starts []string
		if exe, err := os.Executable(); err == nil {
			starts = append(starts, filepath.Dir(exe))
		}
		if wd, err := os.Getwd(); err == nil {
			starts = append(starts, wd)
		}
		for _, s := range starts {
			for d := s; ; d = filepath.Dir(d) {
				dirs = append(dirs, filepath.Join(d, ".cache", sub, "current"))
				if d == filepath.Dir(d) {
					break
				}
			}
		}
	}
	var missing []string
	for _, d := range dirs {
		missing = missing[:0]
		for _, f := range files {
			if st, err := os.Stat(filepath.Join(d, f)); err != nil || st.Mode()&0o111 == 0 {
				missing = append(missing, f)
			}
		}
		if len(missing) == 0 {
			return filepath.Abs(d)
		}
		if len(missing) < len(files) {
			break // the right directory, half built
		}
	}
	where := ".cache/" + sub + "/current of this checkout"
	if os.Getenv(env) != "" {
		where = env + "=" + dirs[0]
	}
	return "", fmt.Errorf("%s built in %s (%s missing): run %s",
		need, where, strings.Join(missingOr(missing, files), ", "), how)
}

func missingOr(missing, all []string) []string {
	if len(missing) == 0 {
		return all
	}
	return missing
}

// CheckDaemons reports what keeps the flannel-daemon layout from being
// built here: its programs not built, or a tool flanneld runs missing.
func CheckDaemons() error {
	if _, err := DaemonsDir(); err != nil {
		return err
	}
	for _, t := range daemonTools {
		if _, err := exec.LookPath(t.cmd); err != nil {
			return fmt.Errorf("layout flannel-daemon: flanneld runs %q, not found in PATH: install the %s package (scripts/setup.sh --daemons does)", t.cmd, t.pkg)
		}
	}
	return nil
}

// CheckLayout reports what keeps a layout from being built here beyond
// CheckSystem: the daemons of flannel-daemon and docker-swarm.
func CheckLayout(layout string) error {
	switch layout {
	case "flannel-daemon":
		return CheckDaemons()
	case "docker-swarm":
		return CheckSwarm()
	case "k8s":
		return CheckK8s()
	case "k8s-cilium":
		return CheckCilium()
	}
	return nil
}

// daemonDir holds everything the daemons of testbed name write.
func daemonDir(name string) string { return filepath.Join(StateDir, name+".d") }

// hostDir is host h's part of it: flanneld's subnet file and log, the CNI
// plugins' data, a record of each pod made.
func hostDir(name, host string) string { return filepath.Join(daemonDir(name), host) }

// etcdSock is etcd's client socket, relative to the daemon directory (the
// daemons' working directory): a Unix socket both hosts reach through the
// file system, so the store's traffic never crosses the testbed's wire,
// which carries nothing but the tests' own (see wire).
const etcdSock = "etcd.sock"

// flannelDaemon starts the daemons and makes the pods.
func (b *builder) flannelDaemon() error {
	bin, err := DaemonsDir()
	if err != nil {
		return err
	}
	t := b.t
	dir := daemonDir(t.Name)
	for _, h := range t.Hosts {
		if err := os.MkdirAll(filepath.Join(hostDir(t.Name, h.Name), "pods"), 0o755); err != nil {
			return err
		}
	}
	h1 := t.Hosts[0]
	if err := b.startDaemon(h1.Netns, filepath.Join(dir, "etcd"), filepath.Join(bin, "bin/etcd"),
		"--name", "falcon-testbed", "--data-dir", filepath.Join(dir, "etcd.data"),
		"--listen-client-urls", "unix://"+etcdSock, "--advertise-client-urls", "unix://"+etcdSock,
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "falcon-testbed=http://127.0.0.1:2380", "--log-level", "warn"); err != nil {
		return err
	}
	if err := b.putConfig(dir); err != nil {
		return err
	}
	// One flanneld at a time: started together, both may pick the same
	// subnet, and the one that loses etcd's race exits ("subnet already
	// exists") rather than pick another (twice this session: in the 6.1
	// guest and in a run of the host suite).
	for hi := range t.Hosts {
		h := &t.Hosts[hi]
		hd := hostDir(t.Name, h.Name)
		if err := b.startDaemon(h.Netns, filepath.Join(hd, "flanneld"), filepath.Join(bin, "bin/flanneld"),
			"--etcd-endpoints", "unix://"+etcdSock, "--iface", h.NIC, "--ip-masq=false",
			"--subnet-file", filepath.Join(hd, "subnet.env")); err != nil {
			return err
		}
		subnet, err := b.waitSubnet(hi)
		if err != nil {
			return err
		}
		// flannel.1 holds the subnet's network address.
		h.OverlayAddr = subnet.IP.Mask(subnet.Mask).String()
	}
	for hi := range t.Hosts {
		for ci := range t.Hosts[hi].Containers {
			if err := b.cniAdd(bin, hi, &t.Hosts[hi].Containers[ci]); err != nil {
				return err
			}
		}
	}
	// Each flanneld learns the other's lease from etcd's watch and routes it.
	for hi, h := range t.Hosts {
		if err := b.waitRoute(h, fmt.Sprintf("%s/%d", b.peer(hi).OverlayAddr, t.ips().subnet)); err != nil {
			return err
		}
	}
	return nil
}

// startDaemon starts a daemon in namespace ns, in the daemon directory,
// logging to base.log; its pid goes to base.pid before anything waits on
// it, so that a Down after a kill of this process finds it. It runs in a
// session of its own: a Ctrl-C of 'testbed up' does not reach it.
func (b *builder) startDaemon(ns, base, prog string, args ...string) error {
	return b.startIn([]string{"ip", "netns", "exec", ns}, ns, base, prog, args...)
}

// startIn is startDaemon with the command that enters namespace ns and
// execs prog in place.
func (b *builder) startIn(enter []string, ns, base, prog string, args ...string) error {
	log, err := os.OpenFile(base+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	// What a daemon writes to its temporary directory (containerd's
	// goroutine dump, to TMPDIR or /tmp) goes with the testbed.
	tmp := base + ".tmp"
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return err
	}
	argv := append(append(enter[1:len(enter):len(enter)], prog), args...)
	cmd := exec.Command(enter[0], argv...)
	cmd.Dir = daemonDir(b.t.Name)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s in %s: %w", filepath.Base(prog), ns, err)
	}
	// ip netns exec and nsenter exec the daemon in place: the pid and its
	// start time are the daemon's.
	pid := cmd.Process.Pid
	start, werr := startTime(pid)
	if werr == nil {
		werr = os.WriteFile(base+".pid", []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644)
	}
	go cmd.Wait() // reaps it should it die while this process lives
	if werr != nil {
		cmd.Process.Kill()
		return werr
	}
	return nil
}

// logTail is the end of a daemon's log, for errors.
func logTail(base string) string {
	b, _ := os.ReadFile(base + ".log")
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, "\n")
}

// alive reports whether the daemon of base.pid still runs (and is ours).
func alive(base string) bool {
	pid, ok := daemonPID(base)
	return ok && syscall.Kill(pid, 0) == nil
}

// daemonTimeout bounds each wait for a daemon; a 2-CPU machine busy with
// other work starts them in about a second.
const daemonTimeout = 30 * time.Second

// wait polls ready until it reports true, the daemon of base dies, or the
// time is up.
func (b *builder) wait(what, base string, ready func() (bool, error)) error {
	return b.waitFor(what, base, daemonTimeout, ready)
}

// waitFor is wait with a time limit of its own.
func (b *builder) waitFor(what, base string, timeout time.Duration, ready func() (bool, error)) error {
	timeout = slowed(timeout)
	deadline := time.Now().Add(timeout)
	for {
		ok, err := ready()
		if ok {
			return nil
		}
		if cerr := b.ctx.Err(); cerr != nil {
			return cerr
		}
		if !alive(base) {
			return fmt.Errorf("%s: %s exited: %s", what, filepath.Base(base), logTail(base))
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = errors.New("timed out")
			}
			return fmt.Errorf("%s after %s: %v; %s.log ends:\n%s", what, timeout, err, base, logTail(base))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// putConfig writes flanneld's network configuration into etcd once it
// answers, through etcd's JSON gateway on its socket.
func (b *builder) putConfig(dir string) error {
	c := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", filepath.Join(dir, etcdSock))
		}}}
	defer c.CloseIdleConnections()
	body, _ := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte("/coreos.com/network/config")),
		"value": base64.StdEncoding.EncodeToString([]byte(flannelConfig(b.t.IPv6))),
	})
	return b.wait("etcd: write flannel's network configuration", filepath.Join(dir, "etcd"), func() (bool, error) {
		resp, err := c.Post("http://etcd/v3/kv/put", "application/json", bytes.NewReader(body))
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("etcd answered %s", resp.Status)
		}
		return true, nil
	})
}

// waitSubnet waits for host hi's flanneld to write its subnet file and
// returns the subnet it leased (FLANNEL_SUBNET, or FLANNEL_IPV6_SUBNET on
// an IPv6 testbed: the bridge's address).
func (b *builder) waitSubnet(hi int) (*net.IPNet, error) {
	hd := hostDir(b.t.Name, b.t.Hosts[hi].Name)
	var subnet *net.IPNet
	key := "FLANNEL_SUBNET="
	if b.t.IPv6 {
		key = "FLANNEL_IPV6_SUBNET="
	}
	err := b.wait("flanneld in "+b.t.Hosts[hi].Netns+": lease a subnet", filepath.Join(hd, "flanneld"), func() (bool, error) {
		env, err := os.ReadFile(filepath.Join(hd, "subnet.env"))
		if err != nil {
			return false, nil
		}
		for _, l := range strings.Split(string(env), "\n") {
			if v, ok := strings.CutPrefix(l, key); ok {
				ip, n, err := net.ParseCIDR(strings.TrimSpace(v))
				if err != nil {
					return false, fmt.Errorf("subnet.env: %v", err)
				}
				n.IP = ip
				subnet = n
				return true, nil
			}
		}
		return false, nil
	})
	return subnet, err
}

// waitRoute waits until host h routes dst through its VXLAN device.
func (b *builder) waitRoute(h Host, dst string) error {
	base := filepath.Join(hostDir(b.t.Name, h.Name), "flanneld")
	return b.wait(fmt.Sprintf("flanneld in %s: route %s", h.Netns, dst), base, func() (bool, error) {
		out, err := exec.Command("ip", "-n", h.Netns, b.t.ips().family, "route", "show", dst, "dev", h.Overlay).Output()
		return err == nil && strings.TrimSpace(string(out)) != "", nil
	})
}

// daemonPID reads base.pid and reports whether that process is still the
// daemon started there: a process that took a recycled pid started later.
// Not its command line: that reads empty while 'ip netns exec' execs the
// daemon (the new image has no argument area until the ELF loader sets it
// up), which once made a live flanneld look dead within a second of start.
func daemonPID(base string) (int, bool) {
	b, err := os.ReadFile(base + ".pid")
	if err != nil {
		return 0, false
	}
	var pid int
	var start uint64
	if n, _ := fmt.Sscanf(string(b), "%d %d", &pid, &start); n != 2 || pid <= 0 {
		return 0, false
	}
	now, err := startTime(pid)
	if err != nil || now != start {
		return 0, false
	}
	return pid, true
}

// startTime is field 22 of /proc/PID/stat: when the process started, in
// clock ticks since boot; an exec keeps it.
func startTime(pid int) (uint64, error) {
	f, err := statFields(pid)
	if err != nil {
		return 0, err
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// statFields are the fields of /proc/PID/stat after the command name (so
// f[0] is field 3, the state), at least 20 of them.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	// The command name in parentheses may hold spaces: count after it.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 {
		return nil, fmt.Errorf("/proc/%d/stat: %d fields after the name", pid, len(f))
	}
	return f, nil
}

// stopDaemon stops the daemon of base.pid: SIGTERM, then SIGKILL after 5 s.
func stopDaemon(base string) {
	pid, ok := daemonPID(base)
	if !ok {
		return
	}
	syscall.Kill(pid, syscall.SIGTERM)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, ok := daemonPID(base); !ok || hostpaths.Gone(pid) {
			return
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
}

// teardownDaemons undoes what the daemons of testbed name made outside its
// namespaces, and what they made inside that the namespaces' removal would
// not undo the CNI way: each pod is deleted by the plugins (DEL), the
// daemons are stopped, and the daemon directory is removed. It works from
// the directory alone, after a killed Up, killed daemons or a lost state
// file; a testbed without one is not an error.
func teardownDaemons(name string) error {
	dir := daemonDir(name)
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	errs := []error{teardownSwarm(name), teardownK8s(name)}
	if bin, err := DaemonsDir(); err == nil {
		pods, _ := filepath.Glob(filepath.Join(dir, "*", "pods", "*.json"))
		for _, f := range pods {
			errs = append(errs, cniDel(bin, f))
		}
	}
	bases, _ := filepath.Glob(filepath.Join(dir, "*", "flanneld.pid"))
	bases = append(bases, filepath.Join(dir, "etcd.pid"))
	for _, p := range bases {
		stopDaemon(strings.TrimSuffix(p, ".pid"))
	}
	if err := os.RemoveAll(dir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
