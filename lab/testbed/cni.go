package testbed

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/falconnet/falcon/internal/netns"
)

// pod is what Down needs to undo one CNI ADD; it is written before the
// ADD runs, so a pod half made by a killed Up is deleted too.
type pod struct {
	ContainerID string          `json:"container_id"`
	Netns       string          `json:"netns"`
	Ifname      string          `json:"ifname"`
	HostNetns   string          `json:"host_netns"`
	Conf        json.RawMessage `json:"conf"`
}

func podPath(name, host, container string) string {
	return filepath.Join(hostDir(name, host), "pods", container+".json")
}

// cniConf is the network configuration kube-flannel installs
// (cni-conf.json: Flannel's plugin delegating to bridge with hairpin mode
// and the default route), with the plugins' state under the testbed's
// host directory instead of /var/lib/cni, and no masquerading by the bridge
// plugin (flanneld runs with --ip-masq=false; masquerading is for traffic
// leaving the overlay, which the testbed has none of).
func cniConf(hd string) json.RawMessage {
	c, _ := json.Marshal(map[string]any{
		"cniVersion": "0.4.0",
		"name":       "cbr0",
		"type":       "flannel",
		"subnetFile": filepath.Join(hd, "subnet.env"),
		"dataDir":    filepath.Join(hd, "flannel-cni"),
		"delegate":   map[string]any{"hairpinMode": true, "isDefaultGateway": true, "ipMasq": false},
		"ipam":       map[string]any{"type": "host-local", "dataDir": filepath.Join(hd, "ipam")},
	})
	return c
}

// cniAdd makes pod c on host hi the CNI way and fills in what the plugins
// chose: its address and the name of its host veth.
func (b *builder) cniAdd(bin string, hi int, c *Container) error {
	h := b.t.Hosts[hi]
	p := pod{ContainerID: b.t.Name + "-" + h.Name + "-" + c.Name, Netns: c.Netns, Ifname: c.Dev,
		HostNetns: h.Netns, Conf: cniConf(hostDir(b.t.Name, h.Name))}
	if err := writePod(podPath(b.t.Name, h.Name, c.Name), p); err != nil {
		return err
	}
	out, err := runCNI(b.ctx, bin, "ADD", p)
	if err != nil {
		return err
	}
	var res struct {
		Interfaces []struct{ Name, Sandbox string } `json:"interfaces"`
		IPs        []struct{ Address string }       `json:"ips"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("CNI ADD of %s: result: %v: %s", c.Netns, err, out)
	}
	c.HostVeth = ""
	for _, i := range res.Interfaces {
		if i.Sandbox == "" && i.Name != h.Bridge {
			c.HostVeth = i.Name
		}
	}
	if len(res.IPs) == 0 || c.HostVeth == "" {
		return fmt.Errorf("CNI ADD of %s: no address or no host veth in the result: %s", c.Netns, out)
	}
	c.Addr = ""
	for _, a := range res.IPs { // dual stack over IPv6: the testbed's family's
		ip, _, err := net.ParseCIDR(a.Address)
		if err != nil {
			return fmt.Errorf("CNI ADD of %s: %v", c.Netns, err)
		}
		if (ip.To4() == nil) == b.t.IPv6 {
			c.Addr = ip.String()
			break
		}
	}
	if c.Addr == "" {
		return fmt.Errorf("CNI ADD of %s: no address of the testbed's IP version in the result: %s", c.Netns, out)
	}
	return nil
}

// cniDel deletes the pod recorded in file the CNI way, then the record.
func cniDel(bin, file string) error {
	b, err := os.ReadFile(file)
	var p pod
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		return fmt.Errorf("pod record %s: %w", file, err)
	}
	// Without its host namespace there is nothing left to delete.
	if netns.Exists(p.HostNetns) {
		if _, err := runCNI(context.Background(), bin, "DEL", p); err != nil {
			return err
		}
	}
	return os.Remove(file)
}

func writePod(path string, p pod) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// runCNI runs Flannel's CNI plugin in the pod's host namespace, as a
// runtime does: the command and the pod in the environment, the network
// configuration on stdin, the result (or the plugin's error) on stdout.
func runCNI(ctx context.Context, bin, command string, p pod) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", p.HostNetns, filepath.Join(bin, "cni", "flannel"))
	cmd.Env = []string{
		"CNI_COMMAND=" + command,
		"CNI_CONTAINERID=" + p.ContainerID,
		"CNI_NETNS=" + netns.Path(p.Netns),
		"CNI_IFNAME=" + p.Ifname,
		"CNI_PATH=" + filepath.Join(bin, "cni"),
		"PATH=" + os.Getenv("PATH"),
	}
	cmd.Stdin = bytes.NewReader(p.Conf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("CNI %s of %s: %v: %s", command, p.Netns, err,
			strings.TrimSpace(string(out)+" "+stderr.String()))
	}
	return out, nil
}
