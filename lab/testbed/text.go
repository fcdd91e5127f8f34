package testbed

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
)

// WriteText writes the testbed as falcon-lab testbed up prints it: each host
// and its containers, then how to try it and how to remove it.
func (t *Testbed) WriteText(w io.Writer) {
	fmt.Fprintf(w, "testbed %s (%s) is up\n", t.Name, t.Layout)
	for _, h := range t.Hosts {
		fmt.Fprintf(w, "  %s  %-28s %s %s", h.Name, h.Netns, h.NIC, h.Addr)
		if h.Overlay != "" {
			fmt.Fprintf(w, "  %s", h.Overlay)
			if h.VNI != 0 { // Cilium's is the sender's identity, not one number
				fmt.Fprintf(w, " vni %d", h.VNI)
			}
			fmt.Fprintf(w, " port %d", h.Port)
			if h.OverlayAddr != "" {
				fmt.Fprintf(w, " %s", h.OverlayAddr)
			}
		}
		if h.Bridge != "" {
			fmt.Fprintf(w, "  bridge %s", h.Bridge)
		}
		fmt.Fprintln(w)
		for _, c := range h.Containers {
			fmt.Fprintf(w, "      %-3s %-28s %s %s  (host side %s)\n", c.Name, c.Netns, c.Dev, c.Addr, c.HostVeth)
		}
	}
	clients, servers := t.Endpoints()
	if len(clients) > 0 && len(servers) > 0 {
		fmt.Fprintf(w, "try:    ip netns exec %s iperf3 -s -D; ip netns exec %s iperf3 -c %s\n",
			servers[0].Netns, clients[0].Netns, servers[0].Addr)
	}
	if t.Kubeconfig != "" {
		kubectl := "kubectl"
		if dir, err := K8sDir(); err == nil {
			kubectl = filepath.Join(dir, "bin", "kubectl") // the server's release
		}
		fmt.Fprintf(w, "kubectl: ip netns exec %s %s --kubeconfig %s get pods -o wide\n", t.Hosts[0].Netns, kubectl, t.Kubeconfig)
	}
	fmt.Fprintf(w, "remove: falcon-lab testbed down --name %s\n", t.Name)
}

// WriteList writes testbeds as falcon-lab testbed list prints them: one line
// each, with what is broken.
func WriteList(w io.Writer, list []Testbed) {
	if len(list) == 0 {
		fmt.Fprintln(w, "no testbeds")
		return
	}
	fmt.Fprintf(w, "%-24s %-8s %-10s %s\n", "NAME", "LAYOUT", "CONTAINERS", "STATUS")
	for _, t := range list {
		status := "up"
		if len(t.Problems) > 0 {
			status = "broken: " + strings.Join(t.Problems, "; ")
		}
		layout := t.Layout
		if layout == "" {
			layout = "?"
		}
		fmt.Fprintf(w, "%-24s %-8s %-10d %s\n", t.Name, layout, len(t.Hosts[0].Containers), status)
	}
}
