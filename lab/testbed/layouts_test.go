package testbed

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestLayoutsCarryTraffic builds each layout and sends ping, TCP and UDP
// through the kernel between every client and its server, then takes it
// down and checks nothing is left.
func TestLayoutsCarryTraffic(t *testing.T) {
	needRoot(t)
	for _, tool := range []string{"ping", "iperf3"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (scripts/setup.sh --test installs it): %v", tool, err)
		}
	}
	var specs []Spec
	for _, layout := range Layouts {
		specs = append(specs, Spec{Name: tbName(layout), Layout: layout})
		if CheckIPv6(layout) == nil {
			specs = append(specs, Spec{Name: tbName(layout + "6"), Layout: layout, IPv6: true})
		}
	}
	for _, s := range specs {
		layout := s.Layout
		name := layout
		if s.IPv6 {
			name += "-ipv6"
		}
		t.Run(name, func(t *testing.T) {
			needDaemons(t, layout)
			s.Containers = 1
			if layout == "calico" || layout == "docker" {
				s.Containers = 2 // routes, neighbours and FDB entries per container
			}
			tb := up(t, s)
			clients, servers := tb.Endpoints()
			if len(clients) == 0 || len(clients) != len(servers) {
				t.Fatalf("endpoints: %d clients, %d servers", len(clients), len(servers))
			}
			// The largest unfragmented ping proves the MTU plan: 1450 on
			// the overlay leaves room for VXLAN's 50 bytes on the wire
			// (70 over IPv6, whose wire is 1520).
			size, hdr := 1450, 28
			if s.IPv6 {
				hdr = 48
			}
			if layout == "host" {
				size = 1500
				if s.IPv6 {
					size = 1520
				}
			}
			size -= hdr
			for i := range clients {
				c, s := clients[i], servers[i]
				ping(t, c, s, size)
				iperf(t, c, s, false)
				iperf(t, c, s, true)
			}
			checkWire(t, tb)
			if err := Down(tb.Name); err != nil {
				t.Fatal(err)
			}
			assertGone(t, tb.Name)
		})
	}
}

func ping(t *testing.T, c, s Endpoint, size int) {
	t.Helper()
	out, err := inNS(c.Netns, "ping", "-c", "2", "-i", "0.2", "-W", "3", "-M", "do", "-s", fmt.Sprint(size), s.Addr).CombinedOutput()
	if err != nil {
		t.Fatalf("ping %s -> %s: %v\n%s", c.Netns, s.Addr, err, out)
	}
}

// iperf runs a short iperf3 TCP or UDP transfer from c to s and checks the
// server received data.
func iperf(t *testing.T, c, s Endpoint, udp bool, extra ...string) {
	t.Helper()
	srv := inNS(s.Netns, "iperf3", "-s", "-1", "-B", s.Addr, "-p", "5201")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()

	args := []string{"iperf3", "-c", s.Addr, "-p", "5201", "-J", "-n", "2M"}
	if udp {
		args = append(args, "-u", "-b", "200M", "-l", "1400")
	}
	args = append(args, extra...)
	var out []byte
	var err error
	// The server may not listen yet; iperf3 then fails at once (with -J
	// it may still exit 0).
	for try := 0; try < 50; try++ {
		out, err = inNS(c.Netns, args...).Output()
		if !strings.Contains(string(out), "Connection refused") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("iperf3 %s -> %s (udp %v): %v\n%s", c.Netns, s.Addr, udp, err, out)
	}
	var r struct {
		End struct {
			SumReceived struct{ Bytes int64 } `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("iperf3 JSON: %v\n%s", err, out)
	}
	if r.End.SumReceived.Bytes <= 0 {
		t.Fatalf("%s -> %s (udp %v): server received nothing\n%s", c.Netns, s.Addr, udp, out)
	}
}

// checkWire checks the wire's offloads and, for overlays, that the traffic
// really crossed the VXLAN device of the server's host.
func checkWire(t *testing.T, tb *Testbed) {
	t.Helper()
	for _, h := range tb.Hosts {
		out, err := inNS(h.Netns, "ethtool", "-k", h.NIC).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"tx-checksumming: off", "generic-receive-offload: on"} {
			if !strings.Contains(string(out), "\n"+want) {
				t.Errorf("%s %s: want %q in ethtool -k:\n%s", h.Netns, h.NIC, want, out)
			}
		}
	}
	h := tb.Hosts[1]
	if h.Overlay == "" {
		return
	}
	out, err := inNS(h.OverlayNS(), "ip", "-s", "-j", "link", "show", "dev", h.Overlay).Output()
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		Stats struct{ RX struct{ Packets int64 } } `json:"stats64"`
	}
	if err := json.Unmarshal(out, &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -j link show: %v\n%s", err, out)
	}
	t.Logf("%s rx packets %d", h.Overlay, links[0].Stats.RX.Packets)
	// GRO on the wire may merge many VXLAN packets into one before the
	// device counts them, so this is only a floor.
	if got := links[0].Stats.RX.Packets; got < 100 {
		t.Errorf("%s %s received %d packets; the traffic did not take the overlay", h.Netns, h.Overlay, got)
	}
}
