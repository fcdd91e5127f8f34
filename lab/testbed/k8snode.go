package testbed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/falconnet/falcon/internal/netns"
)

// A k8s node: its daemons, their configuration, its cgroup tree.

// nodeCgroup is host's cgroup tree, in every hierarchy: kubelet's cgroup
// root (the pods' cgroups go under kubepods), and node for the daemons.
func nodeCgroup(name, host string) string { return "falcon-" + name + "-" + host }

func containerdSock(name, host string) string {
	return filepath.Join(hostDir(name, host), "containerd.sock")
}

// nodeMounts is the shell that gives a node its mount namespace: a private
// /run (containerd's state and shim sockets, runc's, kubelet's root, the
// pods' network namespaces), /var/log (the pods' logs) and /var/lib (what
// kubelet and the CNI library keep there whatever they are told: device
// plugins' sockets, kubelet's certificates, CNI results), with the
// testbed's daemon directory, the working directory, bound back in place.
// Like a machine, the node has its own sysfs (sysfs shows the devices of
// the namespace that mounted it: a DaemonSet's hostPath /sys must show the
// node's NIC, not the machine's), with the machine's cgroup trees moved
// onto it and its own bpffs and tracefs; and its mounts are shared, as
// systemd makes a machine's, so that pods may mount hostPaths with
// HostToContainer propagation. All of it goes when the node's last process
// does.
const nodeMounts = `mount -t tmpfs -o mode=755 falcon-node /run
mkdir -p "$DIR" /run/.cgroup
mount --no-canonicalize --bind /proc/self/cwd "$DIR"
mount -t tmpfs -o mode=755 falcon-node /var/log
mount -t tmpfs -o mode=755 falcon-node /var/lib
mount --rbind /sys/fs/cgroup /run/.cgroup
mount -t sysfs falcon-node /sys
mount --move /run/.cgroup /sys/fs/cgroup
rmdir /run/.cgroup
mount -t bpf falcon-node /sys/fs/bpf
mount -t tracefs falcon-node /sys/kernel/tracing
mount --make-rshared /
`

// enterNode is the command that runs a node daemon: in host h's network
// namespace, in its cgroup tree's node group, and in the node's mount
// namespace: a new one (first, for containerd) or that of the process
// mntPID.
func enterNode(name string, h Host, mntPID int) []string {
	// The hierarchies makeCgroups made the group in: v1's controllers, or
	// the v2 tree alone (a glob over v1's would find nothing there).
	var procs []string
	for _, r := range cgroupRoots() {
		procs = append(procs, "'"+filepath.Join(r, nodeCgroup(name, h.Name), "node", "cgroup.procs")+"'")
	}
	script := "set -e\nfor c in " + strings.Join(procs, " ") + "; do echo $$ >\"$c\"; done\n"
	cmd := []string{"nsenter", "--net=" + netns.Path(h.Netns)}
	if mntPID == 0 {
		script = "DIR=" + daemonDir(name) + "\n" + script + nodeMounts
		cmd = append(cmd, "unshare", "--mount", "--propagation", "private")
	} else {
		cmd = append(cmd, fmt.Sprintf("--mount=/proc/%d/ns/mnt", mntPID))
	}
	return append(cmd, "sh", "-c", script+`exec "$@"`, "sh")
}

// node starts host hi's containerd, imports the images, and starts its
// kubelet and kube-proxy.
func (b *builder) node(bin string, hi int, images map[string][]byte) error {
	t := b.t
	h := t.Hosts[hi]
	hd := hostDir(t.Name, h.Name)
	if err := os.MkdirAll(filepath.Join(hd, "cni"), 0o755); err != nil {
		return err
	}
	if err := makeCgroups(nodeCgroup(t.Name, h.Name), "node"); err != nil {
		return err
	}
	if err := b.sysctl(h.Netns, "net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	cniBin, err := b.cniBinDir(bin, h)
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"containerd.toml": containerdConfig(t.Name, h, cniBin),
		"kubelet.json":    kubeletConfig(t.Name, h),
	}
	if !b.cilium() { // the agent writes its own when ready
		files["cni/10-flannel.conflist"] = flannelConflist(hd)
	}
	for f, data := range files {
		if err := os.WriteFile(filepath.Join(hd, f), data, 0o644); err != nil {
			return err
		}
	}
	base := filepath.Join(hd, "containerd")
	if err := b.startIn(enterNode(t.Name, h, 0), h.Netns, base, "containerd", "--config", filepath.Join(hd, "containerd.toml")); err != nil {
		return err
	}
	if err := b.wait("containerd in "+h.Netns+": answer", base, func() (bool, error) {
		err := exec.Command("ctr", "--address", containerdSock(t.Name, h.Name), "version").Run()
		return err == nil, err
	}); err != nil {
		return err
	}
	for ref, img := range images {
		cmd := exec.CommandContext(b.ctx, "ctr", "--address", containerdSock(t.Name, h.Name), "-n", "k8s.io", "images", "import", "-")
		cmd.Stdin = bytes.NewReader(img)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("ctr images import %s (%s): %v: %s", ref, h.Name, err, strings.TrimSpace(string(out)))
		}
	}
	mnt, _ := daemonPID(base)
	return b.nodeDaemons(bin, hi, enterNode(t.Name, h, mnt))
}

// nodeDaemons starts host hi's kubelet and kube-proxy (k8s-cilium: no
// kube-proxy, Cilium replaces it). The node's address is on the
// management link, but for Cilium's on the wire: Cilium tunnels to the
// node's InternalIP, so its VXLAN takes the wire only so (the API server's
// calls to the kubelets, kubectl exec and logs, take it too).
func (b *builder) nodeDaemons(bin string, hi int, enter []string) error {
	t := b.t
	h := t.Hosts[hi]
	hd, pk := hostDir(t.Name, h.Name), pkiDir(t.Name)
	nodeIP := mgmtAddr(hi)
	if b.cilium() {
		nodeIP = h.Addr
	}
	if err := b.startIn(enter, h.Netns, filepath.Join(hd, "kubelet"), filepath.Join(bin, "bin/kubelet"),
		"--config", filepath.Join(hd, "kubelet.json"), "--kubeconfig", filepath.Join(pk, "kubelet-"+h.Name+".kubeconfig"),
		"--root-dir", "/run/kubelet", "--hostname-override", h.Name, "--node-ip", nodeIP, "--v", "1"); err != nil {
		return err
	}
	if b.cilium() {
		return nil
	}
	// No conntrack table sizes or timeouts: those are the machine's.
	return b.startIn(enter, h.Netns, filepath.Join(hd, "kube-proxy"), filepath.Join(bin, "bin/kube-proxy"),
		"--kubeconfig", filepath.Join(pk, "kube-proxy.kubeconfig"), "--hostname-override", h.Name,
		"--proxy-mode", "iptables", "--cluster-cidr", k8sNetwork, "--conntrack-max-per-core", "0",
		"--conntrack-min", "0", "--conntrack-tcp-timeout-established", "0", "--conntrack-tcp-timeout-close-wait", "0",
		"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256")
}

// startFlanneld starts host hi's flanneld, once its node has a pod CIDR
// (flanneld's Kubernetes subnet manager exits without one).
func (b *builder) startFlanneld(bin string, hi int) error {
	t := b.t
	h := t.Hosts[hi]
	hd := hostDir(t.Name, h.Name)
	netConf := filepath.Join(daemonDir(t.Name), "net-conf.json")
	conf := fmt.Sprintf(`{"Network":%q,"Backend":{"Type":"vxlan"}}`, k8sNetwork)
	if err := os.WriteFile(netConf, []byte(conf), 0o644); err != nil {
		return err
	}
	mnt, _ := daemonPID(filepath.Join(hd, "containerd"))
	return b.startIn(enterNode(t.Name, h, mnt), h.Netns, filepath.Join(hd, "flanneld"), "env", "NODE_NAME="+h.Name,
		filepath.Join(bin, "bin/flanneld"), "--kube-subnet-mgr", "--kubeconfig-file", filepath.Join(pkiDir(t.Name), "flannel.kubeconfig"),
		"--iface", h.NIC, "--ip-masq=false", "--subnet-file", filepath.Join(hd, "subnet.env"), "--net-config-path", netConf)
}

// containerdConfig keeps all containerd and its CRI plugin write in the
// node's private /run or the host's directory; plugins that would write
// elsewhere (/opt/containerd) or touch the machine (AppArmor profiles) are
// off. The pods' OOM scores go no lower than containerd's: kubelet asks
// -998 for a pod's sandbox, which would put the testbed's pods ahead of the
// machine's own processes, and needs CAP_SYS_RESOURCE, which root may lack
// (a container, some VMs: runc then fails with "can't get final child's
// PID from pipe").
func containerdConfig(name string, h Host, cniBin string) []byte {
	return []byte(fmt.Sprintf(`version = 2
root = "/run/containerd/root"
state = "/run/containerd/state"
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  disable_apparmor = true
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, containerdSock(name, h.Name), k8sPause, cniBin, filepath.Join(hostDir(name, h.Name), "cni")))
}

// flannelConflist is kube-flannel's CNI configuration (Flannel's plugin
// delegating to bridge, then portmap) with the plugins' state in the
// host's directory, as the flannel-daemon layout's (cniConf).
func flannelConflist(hd string) []byte {
	var flannel map[string]any
	json.Unmarshal(cniConf(hd), &flannel)
	delete(flannel, "cniVersion")
	delete(flannel, "name")
	c, _ := json.Marshal(map[string]any{"cniVersion": "0.3.1", "name": "cbr0", "plugins": []any{
		flannel, map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}}}})
	return c
}

// kubeletConfig: cgroupfs under the node's cgroup tree, no eviction nor
// image garbage collection on a shared machine's disk, no swap check, its
// servers on the node's management address and loopback.
func kubeletConfig(name string, h Host) []byte {
	c, _ := json.Marshal(map[string]any{
		"apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
		"authentication": map[string]any{"anonymous": map[string]bool{"enabled": false},
			"webhook": map[string]bool{"enabled": true}, "x509": map[string]string{"clientCAFile": filepath.Join(pkiDir(name), "ca.crt")}},
		"authorization": map[string]string{"mode": "Webhook"},
		"cgroupDriver":  "cgroupfs", "cgroupRoot": "/" + nodeCgroup(name, h.Name),
		"containerRuntimeEndpoint": "unix://" + containerdSock(name, h.Name),
		"failSwapOn":               false, "readOnlyPort": 0, "healthzBindAddress": "127.0.0.1",
		"clusterDomain": "cluster.local", "resolvConf": "",
		"evictionHard": map[string]string{"memory.available": "1Mi", "nodefs.available": "1%",
			"nodefs.inodesFree": "1%", "imagefs.available": "1%"},
		"imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
		"volumePluginDir": "/run/kubelet-plugins", "serializeImagePulls": false,
	})
	return c
}
