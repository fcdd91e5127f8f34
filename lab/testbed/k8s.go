package testbed

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The k8s layout is a real Kubernetes cluster, built from the module proxy
// by scripts/k8s/build.sh: the control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) in h1's namespace, and both
// hosts as worker nodes, each with its own containerd (Debian's, with
// runc), kubelet, kube-proxy in iptables mode and flanneld with its
// Kubernetes subnet manager in VXLAN mode, the cluster's CNI through
// Flannel's plugin chain. A node is its host's network namespace plus a
// mount namespace of its own (a private /run and /var/log, where
// containerd, the shims, runc, kubelet and the pods' namespaces keep their
// state) and a cgroup tree of its own (falcon-<name>-<host>), so that
// killing that tree removes the whole node. The control plane's traffic
// runs over the management link (as docker-swarm's), the pods' VXLAN over
// the wire. Up creates the pods (one image made here, imported into each
// node's containerd, no registry), attaches each pod's namespace under the
// testbed's usual name and reads back what the cluster chose.

// K8sEnv names a directory of built Kubernetes programs instead of the
// checkout's .cache/k8s/current (scripts/k8s/build.sh).
const K8sEnv = "FALCON_K8S_DIR"

var k8sFiles = []string{"bin/kube-apiserver", "bin/kube-controller-manager", "bin/kube-scheduler",
	"bin/kubelet", "bin/kube-proxy", "bin/kubectl", "bin/etcd", "bin/flanneld",
	"cni/flannel", "cni/bridge", "cni/host-local", "cni/loopback", "cni/portmap"}

// k8sTools are the programs of the nodes' that come from Debian.
var k8sTools = []struct{ cmd, pkg string }{
	{"containerd", "containerd"}, {"ctr", "containerd"}, {"runc", "runc"},
	{"iptables", "iptables"}, {"nsenter", "util-linux"}, {"unshare", "util-linux"}, {"mount", "mount"},
}

// K8sDir returns the directory of the built Kubernetes programs, or an
// error that says how to build them.
func K8sDir() (string, error) {
	return builtDir(K8sEnv, "k8s", k8sFiles, "layout k8s needs Kubernetes, etcd, flanneld and the CNI plugins",
		"scripts/k8s/build.sh (scripts/setup.sh --k8s; about 7 minutes on 2 CPUs, once)")
}

// CheckK8s reports what keeps the k8s layout from being built here.
func CheckK8s() error {
	if _, err := K8sDir(); err != nil {
		return err
	}
	for _, t := range k8sTools {
		if _, err := exec.LookPath(t.cmd); err != nil {
			return fmt.Errorf("layout k8s needs %q, not found in PATH: install the %s package (scripts/setup.sh --k8s does)", t.cmd, t.pkg)
		}
	}
	return nil
}

const (
	// k8sNetwork is the pods' network (the controller manager's cluster
	// CIDR); each node gets a /24 of it, which flanneld routes.
	k8sNetwork = flannelNetwork
	// k8sServices is the service network; its first address is the API
	// server's service.
	k8sServices  = "10.96.0.0/16"
	k8sServiceIP = "10.96.0.1"
	// k8sLabel marks the testbed's pods (value: its name).
	k8sLabel = "falcon.testbed"
	// k8sUpTimeout bounds each wait for the cluster (the API server's
	// start, the nodes' readiness, the pods' start) on a busy machine.
	k8sUpTimeout = 3 * time.Minute
)

// k8sAPI is the API server's address, on the management link.
func k8sAPI() string { return "https://" + mgmtAddr(0) + ":6443" }

func pkiDir(name string) string { return filepath.Join(daemonDir(name), "pki") }

// KubeconfigPath is the cluster administrator's kubeconfig of testbed
// name; its API server is reached from the hosts' namespaces.
func KubeconfigPath(name string) string { return filepath.Join(pkiDir(name), "admin.kubeconfig") }

// k8s builds the cluster and its pods.
func (b *builder) k8s() error {
	bin, err := K8sDir()
	if err != nil {
		return err
	}
	t := b.t
	if err := os.MkdirAll(daemonDir(t.Name), 0o755); err != nil {
		return err
	}
	// The marker Down looks for, before anything runs.
	if err := os.WriteFile(filepath.Join(daemonDir(t.Name), "k8s"), []byte(bin+"\n"), 0o644); err != nil {
		return err
	}
	if err := b.mgmtLink(); err != nil {
		return err
	}
	if err := writePKI(t, b.cilium()); err != nil {
		return err
	}
	if err := b.controlPlane(bin); err != nil {
		return err
	}
	images, err := k8sImages()
	if err != nil {
		return err
	}
	if err := saveKernelSysctls(t.Name); err != nil {
		return err
	}
	for hi := range t.Hosts {
		if err := b.node(bin, hi, images); err != nil {
			return err
		}
	}
	network := b.k8sNetwork
	if b.cilium() {
		network = b.ciliumNetwork
	}
	if err := network(bin); err != nil {
		return err
	}
	if t.NetworkPolicy {
		if err := b.netpol(bin); err != nil {
			return err
		}
	}
	if err := b.k8sPods(bin); err != nil {
		return err
	}
	if b.cilium() {
		if err := b.ciliumSettled(); err != nil {
			return err
		}
	}
	t.Kubeconfig = KubeconfigPath(t.Name)
	return nil
}

// writePKI makes the cluster's CA, certificates and kubeconfigs; Cilium's
// agents and operator have theirs where they run.
func writePKI(t *Testbed, cilium bool) error {
	p, err := newPKI(pkiDir(t.Name))
	if err != nil {
		return err
	}
	if err := p.cert("apiserver", "kube-apiserver", "", []string{mgmtAddr(0), "127.0.0.1", k8sServiceIP},
		[]string{"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local", "localhost"}); err != nil {
		return err
	}
	if err := p.cert("apiserver-kubelet-client", "kube-apiserver-kubelet-client", "system:masters", nil, nil); err != nil {
		return err
	}
	if err := p.serviceAccountKey(); err != nil {
		return err
	}
	clients := []client{
		{"admin", "kubernetes-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		{"kube-proxy", "system:kube-proxy", ""},
		// flanneld patches its node and watches the others', as
		// kube-flannel's ClusterRole allows; the testbed gives it more.
		{"flannel", "flannel", "system:masters"},
	}
	if cilium {
		// As flanneld, more than Cilium's ClusterRoles would give.
		clients = append(clients, client{"cilium", "cilium", "system:masters"})
	}
	for _, h := range t.Hosts {
		clients = append(clients, client{"kubelet-" + h.Name, "system:node:" + h.Name, "system:nodes"})
	}
	for _, c := range clients {
		if err := p.kubeconfig(c, k8sAPI()); err != nil {
			return err
		}
	}
	return nil
}

// controlPlane starts etcd, the API server, the controller manager and the
// scheduler in h1's namespace, and waits for the API server.
func (b *builder) controlPlane(bin string) error {
	t := b.t
	dir, pk := daemonDir(t.Name), pkiDir(t.Name)
	h1 := t.Hosts[0].Netns
	f := func(n string) string { return filepath.Join(pk, n) }
	// etcd on h1's loopback: only the API server talks to it.
	if err := b.startDaemon(h1, filepath.Join(dir, "etcd"), filepath.Join(bin, "bin/etcd"),
		"--name", "falcon-testbed", "--data-dir", filepath.Join(dir, "etcd.data"),
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", "falcon-testbed=http://127.0.0.1:2380", "--log-level", "warn"); err != nil {
		return err
	}
	if err := b.startDaemon(h1, filepath.Join(dir, "kube-apiserver"), filepath.Join(bin, "bin/kube-apiserver"),
		"--etcd-servers", "http://127.0.0.1:2379", "--bind-address", mgmtAddr(0), "--advertise-address", mgmtAddr(0),
		"--secure-port", "6443", "--cert-dir", filepath.Join(dir, "apiserver-certs"),
		"--tls-cert-file", f("apiserver.crt"), "--tls-private-key-file", f("apiserver.key"),
		"--client-ca-file", f("ca.crt"), "--kubelet-client-certificate", f("apiserver-kubelet-client.crt"),
		"--kubelet-client-key", f("apiserver-kubelet-client.key"), "--kubelet-preferred-address-types", "InternalIP",
		"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file", f("sa.pub"), "--service-account-signing-key-file", f("sa.key"),
		"--service-cluster-ip-range", k8sServices, "--authorization-mode", "Node,RBAC",
		"--allow-privileged=true", "--profiling=false", "--v", "1"); err != nil {
		return err
	}
	if err := b.waitFor("kube-apiserver in "+h1+": ready", filepath.Join(dir, "kube-apiserver"), k8sUpTimeout,
		func() (bool, error) {
			_, err := b.kubectl(bin, nil, "get", "--raw", "/readyz")
			return err == nil, err
		}); err != nil {
		return err
	}
	if err := b.startDaemon(h1, filepath.Join(dir, "kube-controller-manager"), filepath.Join(bin, "bin/kube-controller-manager"),
		"--kubeconfig", f("controller-manager.kubeconfig"), "--authentication-kubeconfig", f("controller-manager.kubeconfig"),
		"--authorization-kubeconfig", f("controller-manager.kubeconfig"), "--bind-address", "127.0.0.1",
		"--leader-elect=false", "--use-service-account-credentials", "--root-ca-file", f("ca.crt"),
		"--service-account-private-key-file", f("sa.key"), "--allocate-node-cidrs", "--cluster-cidr", k8sNetwork,
		"--node-cidr-mask-size", "24", "--service-cluster-ip-range", k8sServices, "--profiling=false",
		// else it makes /usr/libexec/kubernetes/kubelet-plugins/volume/exec, on the machine
		"--flex-volume-plugin-dir", filepath.Join(dir, "flex-volume-plugins")); err != nil {
		return err
	}
	return b.startDaemon(h1, filepath.Join(dir, "kube-scheduler"), filepath.Join(bin, "bin/kube-scheduler"),
		"--kubeconfig", f("scheduler.kubeconfig"), "--authentication-kubeconfig", f("scheduler.kubeconfig"),
		"--authorization-kubeconfig", f("scheduler.kubeconfig"), "--bind-address", "127.0.0.1",
		"--leader-elect=false", "--profiling=false")
}

// kubectl runs the built kubectl as the administrator from h1's namespace
// (where the API server's address is), stdin given when not nil.
func (b *builder) kubectl(bin string, stdin []byte, args ...string) ([]byte, error) {
	return kubectl(b.t.Name, b.t.Hosts[0].Netns, bin, stdin, args...)
}

// Kubectl runs the built kubectl on the k8s layout's cluster as its
// administrator, stdin given when not nil.
func (t *Testbed) Kubectl(stdin []byte, args ...string) ([]byte, error) {
	bin, err := K8sDir()
	if err != nil {
		return nil, err
	}
	return kubectl(t.Name, t.Hosts[0].Netns, bin, stdin, args...)
}

func kubectl(name, ns, bin string, stdin []byte, args ...string) ([]byte, error) {
	argv := append([]string{"netns", "exec", ns, filepath.Join(bin, "bin/kubectl"),
		"--kubeconfig", KubeconfigPath(name), "--cache-dir", filepath.Join(daemonDir(name), "kubectl-cache"),
		"--request-timeout", "20s"}, args...)
	cmd := exec.Command("ip", argv...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// kubeletTails is the end of every node's kubelet log: where a node that
// does not become ready says why.
func kubeletTails(t *Testbed) string {
	var b strings.Builder
	for _, h := range t.Hosts {
		fmt.Fprintf(&b, "\n%s's kubelet.log ends:\n%s", h.Name, logTail(filepath.Join(hostDir(t.Name, h.Name), "kubelet")))
	}
	return b.String()
}

// waitNodes waits for both nodes to be ready with a pod CIDR each; tails
// says where a node that is not says why.
func (b *builder) waitNodes(bin string, tails func() string) error {
	t := b.t
	if err := b.waitFor("the nodes: ready", filepath.Join(daemonDir(t.Name), "kube-apiserver"), k8sUpTimeout, func() (bool, error) {
		out, err := b.kubectl(bin, nil, "get", "nodes", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Ready")].status}/{.spec.podCIDR} {end}`)
		if err != nil {
			return false, err
		}
		ready := strings.Count(string(out), "=True/10.")
		return ready == len(t.Hosts), fmt.Errorf("nodes (ready/pod CIDR): %s", out)
	}); err != nil {
		return fmt.Errorf("%w%s", err, tails())
	}
	return nil
}

// k8sNetwork waits for the nodes, then starts each flanneld and waits for
// it to take its node's subnet and route the other's.
func (b *builder) k8sNetwork(bin string) error {
	t := b.t
	if err := b.waitNodes(bin, func() string { return kubeletTails(t) }); err != nil {
		return err
	}
	for hi := range t.Hosts {
		if err := b.startFlanneld(bin, hi); err != nil {
			return err
		}
		subnet, err := b.waitSubnet(hi)
		if err != nil {
			return err
		}
		// flannel.1 holds the subnet's network address.
		t.Hosts[hi].OverlayAddr = subnet.IP.Mask(subnet.Mask).String()
	}
	for hi, h := range t.Hosts {
		if err := b.waitRoute(h, fmt.Sprintf("%s/%d", b.peer(hi).OverlayAddr, t.ips().subnet)); err != nil {
			return err
		}
	}
	return nil
}

// k8sPods creates the testbed's pods, each on its host's node, waits for
// them to run, and reads back their addresses and namespaces.
func (b *builder) k8sPods(bin string) error {
	t := b.t
	var items []any
	for _, h := range t.Hosts {
		for _, c := range h.Containers {
			items = append(items, map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": h.Name + "-" + c.Name, "labels": map[string]string{k8sLabel: t.Name}},
				"spec": map[string]any{
					"nodeSelector":                  map[string]string{"kubernetes.io/hostname": h.Name},
					"containers":                    []any{map[string]any{"name": "server", "image": k8sServer, "imagePullPolicy": "Never"}},
					"terminationGracePeriodSeconds": 1, "automountServiceAccountToken": false, "enableServiceLinks": false,
				},
			})
		}
	}
	list, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	base := filepath.Join(daemonDir(t.Name), "kube-apiserver")
	// The namespace's default service account, which admission wants,
	// comes from the controller manager a moment after it starts.
	if err := b.waitFor("create the pods", base, k8sUpTimeout, func() (bool, error) {
		_, err := b.kubectl(bin, list, "apply", "-f", "-")
		return err == nil, err
	}); err != nil {
		return err
	}
	var pods map[string]k8sPod
	if err := b.waitFor("the pods: run", base, k8sUpTimeout, func() (bool, error) {
		var err error
		pods, err = b.runningPods(bin)
		return err == nil, err
	}); err != nil {
		return err
	}
	for hi := range t.Hosts {
		for ci := range t.Hosts[hi].Containers {
			if err := b.attachPod(hi, ci, pods); err != nil {
				return err
			}
		}
	}
	return nil
}

// k8sPod is what Up reads back of a running pod.
type k8sPod struct{ addr, container string }

// runningPods returns the testbed's pods by name once all run.
func (b *builder) runningPods(bin string) (map[string]k8sPod, error) {
	out, err := b.kubectl(bin, nil, "get", "pods", "-l", k8sLabel+"="+b.t.Name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var l struct {
		Items []struct {
			Metadata struct{ Name string }
			Status   struct {
				Phase             string
				PodIP             string `json:"podIP"`
				ContainerStatuses []struct {
					ContainerID string `json:"containerID"`
				} `json:"containerStatuses"`
			}
		}
	}
	if err := json.Unmarshal(out, &l); err != nil {
		return nil, err
	}
	pods := map[string]k8sPod{}
	for _, p := range l.Items {
		s := p.Status
		if s.Phase != "Running" || s.PodIP == "" || len(s.ContainerStatuses) == 0 {
			return nil, fmt.Errorf("pod %s: %s, not running yet", p.Metadata.Name, s.Phase)
		}
		_, id, _ := strings.Cut(s.ContainerStatuses[0].ContainerID, "://")
		pods[p.Metadata.Name] = k8sPod{s.PodIP, id}
	}
	return pods, nil
}

// attachPod names pod ci of host hi's namespace as the testbed's container
// and reads its address and host veth.
func (b *builder) attachPod(hi, ci int, pods map[string]k8sPod) error {
	h := &b.t.Hosts[hi]
	c := &h.Containers[ci]
	p, ok := pods[h.Name+"-"+c.Name]
	if !ok {
		return fmt.Errorf("pod %s-%s: not found", h.Name, c.Name)
	}
	pid, err := taskPID(b.t.Name, h.Name, p.container)
	if err != nil {
		return err
	}
	// Not cancellable, as 'ip netns add' in build.
	if o, err := exec.Command("ip", "netns", "attach", c.Netns, pid).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns attach %s %s: %v: %s", c.Netns, pid, err, strings.TrimSpace(string(o)))
	}
	b.created = append(b.created, c.Netns)
	c.Addr = p.addr
	c.HostVeth, err = peerVeth(c.Netns, c.Dev, h.Netns)
	return err
}

// taskPID is the pid of container id in host's containerd.
func taskPID(name, host, id string) (string, error) {
	out, err := exec.Command("ctr", "--address", containerdSock(name, host), "-n", "k8s.io", "tasks", "ls").Output()
	if err != nil {
		return "", fmt.Errorf("ctr tasks ls (%s): %w", host, err)
	}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == id {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s's containerd: no task %s", host, id)
}
