package testbed

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The k8s layout's NetworkPolicy engine (Spec.NetworkPolicy):
// kube-network-policies, built by scripts/k8s/netpol.sh, on each node as
// its DaemonSet would run it (host network, the node's namespaces), but as
// a node daemon beside kubelet: no registry serves its image here. It
// writes a table of its own (inet kube-network-policies) whose rules send
// the first packets of connections to or from pods that policies select to
// it through nfqueue, and judges them in user space.
//
// Optional rather than always on: a cluster without it is the plain
// kube-proxy and Flannel one the benches measure, and nfqueue puts a trip
// to user space in every new connection of a selected pod.

// NetpolEnv names a directory of the built kube-network-policies instead
// of the checkout's .cache/netpol/current.
const NetpolEnv = "FALCON_NETPOL_DIR"

// NetpolTable is the nftables table kube-network-policies writes in each
// node's namespace (its default name).
const NetpolTable = "inet kube-network-policies"

// netpolSA is the service account its install.yaml makes, in kube-system.
const netpolSA = "kube-network-policies"

// netpolSecrets is where client-go's in-cluster configuration reads the
// service account's token and the cluster's CA: kube-network-policies has
// no kubeconfig flag. /var/run is /run, the node's own (nodeMounts).
const netpolSecrets = "/var/run/secrets/kubernetes.io/serviceaccount"

// NetpolDir returns the directory of the built kube-network-policies, or
// an error that says how to build it.
func NetpolDir() (string, error) {
	return builtDir(NetpolEnv, "netpol", []string{"bin/kube-network-policies"},
		"--netpol needs kube-network-policies", "scripts/k8s/netpol.sh (scripts/setup.sh --k8s; about 7 minutes on 2 busy CPUs, once)")
}

// CheckNetpol reports what keeps --netpol from running here: the build,
// and the kernel's queue.
func CheckNetpol() error {
	if _, err := NetpolDir(); err != nil {
		return err
	}
	return CheckNftQueue()
}

// CheckNftQueue says whether the kernel's nftables has the queue statement
// (CONFIG_NFT_QUEUE), which every rule kube-network-policies judges by
// ends in. Without it its rules fail to load and it runs on, enforcing
// nothing. nft's check mode asks the kernel, in a namespace of its own
// that ends with it.
func CheckNftQueue() error {
	cmd := exec.Command("unshare", "--net", "nft", "-c", "-f", "-")
	cmd.Stdin = strings.NewReader("table inet falcon-probe {\nchain c {\ntype filter hook postrouting priority 0;\nqueue num 100\n}\n}\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("--netpol: this kernel's nftables refuses the queue statement kube-network-policies' rules end in (CONFIG_NFT_QUEUE): nft -c: %v: %s",
			err, strings.Join(strings.Fields(string(out)), " "))
	}
	return nil
}

// netpol gives kube-network-policies its RBAC and a token, starts it on
// every node and waits for each to write its table.
func (b *builder) netpol(bin string) error {
	dir, err := NetpolDir()
	if err != nil {
		return err
	}
	rbac, err := os.ReadFile(filepath.Join(dir, "rbac.yaml"))
	if err != nil {
		return err
	}
	if _, err := b.kubectl(bin, rbac, "apply", "-f", "-"); err != nil {
		return err
	}
	// A year: the testbed renews no token, and lives for hours.
	token, err := b.kubectl(bin, nil, "create", "token", netpolSA, "-n", "kube-system", "--duration", "8760h")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(filepath.Join(pkiDir(b.t.Name), "ca.crt"))
	if err != nil {
		return err
	}
	for hi := range b.t.Hosts {
		if err := b.startNetpol(dir, hi, token, ca); err != nil {
			return err
		}
	}
	return nil
}

// startNetpol starts host hi's kube-network-policies with the token and
// CA put where it reads them, in the node's mount namespace.
func (b *builder) startNetpol(dir string, hi int, token, ca []byte) error {
	t := b.t
	h := t.Hosts[hi]
	sa := filepath.Join(hostDir(t.Name, h.Name), "serviceaccount")
	if err := os.MkdirAll(sa, 0o700); err != nil {
		return err
	}
	for f, data := range map[string][]byte{"token": token, "ca.crt": ca} {
		if err := os.WriteFile(filepath.Join(sa, f), data, 0o600); err != nil {
			return err
		}
	}
	hd := hostDir(t.Name, h.Name)
	mnt, _ := daemonPID(filepath.Join(hd, "containerd"))
	base := filepath.Join(hd, "kube-network-policies")
	install := fmt.Sprintf(`mkdir -p %[1]s && cp %[2]s/token %[2]s/ca.crt %[1]s/ && exec "$@"`, netpolSecrets, sa)
	// The DNS workaround (--netfilter-bug-1766-fix, on by default) queues
	// every packet to UDP port 53, not a connection's first alone; the
	// kernel bug it works around is fixed from Linux 6.12, and the testbed
	// runs no DNS service.
	if err := b.startIn(enterNode(t.Name, h, mnt), h.Netns, base, "env",
		"KUBERNETES_SERVICE_HOST="+mgmtAddr(0), "KUBERNETES_SERVICE_PORT=6443",
		"sh", "-c", install, "sh", filepath.Join(dir, "bin/kube-network-policies"),
		"--hostname-override", h.Name, "--metrics-bind-address", "127.0.0.1:9080",
		"--netfilter-bug-1766-fix=false", "--v", "2"); err != nil {
		return err
	}
	return b.waitFor("kube-network-policies in "+h.Netns+": its table", base, k8sUpTimeout, func() (bool, error) {
		out, err := exec.Command("ip", "netns", "exec", h.Netns, "nft", "list", "table", NetpolTable).CombinedOutput()
		if err != nil {
			return false, fmt.Errorf("nft list table %s: %v: %s", NetpolTable, err, strings.TrimSpace(string(out)))
		}
		return strings.Contains(string(out), "queue"), nil
	})
}
