package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// What kube-network-policies decided, with falcon and without: whether a
// new connection from the client pod to the server pod opened, at each
// step of the scenarios, and whether a live connection still carried
// data after the policy stopped allowing it.
type policyOutcome struct {
	DenyAll          bool // (a) new connection under a deny-all ingress policy
	AllowUnlabelled  bool // (a) an allow policy added, the client without its label
	AllowLabelled    bool // (a) the client labelled
	LiveAfterUnlabel bool // (b) the live connection carries data after the label goes
	NewAfterUnlabel  bool // (b) new connection once the label is gone
	AfterDelete      bool // (c) new connection once the policies are deleted
}

// kube-network-policies judges a connection by its first packets only
// (controller.go: "network policies are applied ONLY at the time the
// connection is initiated"): a live connection outlives the label that let
// it open.
var wantPolicy = policyOutcome{AllowLabelled: true, LiveAfterUnlabel: true, AfterDelete: true}

const (
	policyRole = "falcon-netpol-role"
	policyPort = 7470
)

// TestFastPathNetworkPolicy runs NetworkPolicy scenarios on the k8s layout
// with kube-network-policies, first without falcon, then with the fast
// path on both hosts, and wants the same outcomes from both, and those
// kube-network-policies defines: (a) a deny-all ingress policy refuses new
// connections, an allow policy by label lets them open once the client
// has the label; (b) a live connection keeps flowing after the client
// loses its label, new ones are refused; (c) with the policies deleted
// new connections open again. With falcon the fast path must be on
// (its queue rules passed the judge) and carry the live connection.
func TestFastPathNetworkPolicy(t *testing.T) {
	needFastPath(t)
	if err := testbed.CheckNetpol(); err != nil {
		t.Skip(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	tb := labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("i%dnp", os.Getpid()), Layout: "k8s", Containers: 1, NetworkPolicy: true})
	warm(t, tb)
	var recv atomic.Int64
	_, servers := tb.Endpoints()
	sinkTCP(t, servers[0].Netns, servers[0].Addr, policyPort, &recv)

	vanilla := policyScenarios(t, tb, &recv, nil)
	t.Logf("without falcon: %+v", vanilla)
	as := fastAgents(ctx, t, tb, "fastpath")
	fast := policyScenarios(t, tb, &recv, func() {
		for i, a := range as {
			r := fastReportOf(t, a)
			if r.Off != "" || !r.Conntrack.Established {
				t.Errorf("h%d: fast path off (%q) or not holding flows to established connections (%+v)", i+1, r.Off, *r.Conntrack)
			}
		}
	})
	t.Logf("with the fast path: %+v", fast)
	if vanilla != fast {
		t.Errorf("outcomes differ: without falcon %+v, with the fast path %+v", vanilla, fast)
	}
	if vanilla != wantPolicy {
		t.Errorf("without falcon %+v, want kube-network-policies' %+v", vanilla, wantPolicy)
	}
	snd, rcv := fastReportOf(t, as[0]), fastReportOf(t, as[1])
	t.Logf("sender: %v, conntrack %+v; receiver: %v, conntrack %+v", snd.Counters, *snd.Conntrack, rcv.Counters, *rcv.Conntrack)
	if snd.Counters["egress_hit"] == 0 || snd.Conntrack.Kept == 0 {
		t.Errorf("the fast path carried nothing of the live connection: %v, conntrack %+v", snd.Counters, *snd.Conntrack)
	}
}

// policyScenarios runs (a), (b) and (c) from no policy and no labels,
// and leaves it so; during calls check while the live connection flows.
func policyScenarios(t *testing.T, tb *testbed.Testbed, recv *atomic.Int64, during func()) policyOutcome {
	t.Helper()
	clients, servers := tb.Endpoints()
	cns, dst := clients[0].Netns, net.JoinHostPort(servers[0].Addr, fmt.Sprint(policyPort))
	client := tb.Hosts[0].Name + "-" + tb.Hosts[0].Containers[0].Name
	server := tb.Hosts[1].Name + "-" + tb.Hosts[1].Containers[0].Name
	var o policyOutcome
	kube(t, tb, nil, "label", "pod", server, policyRole+"=server")
	kube(t, tb, netPolicy("falcon-deny", nil), "apply", "-f", "-")
	o.DenyAll = reaches(cns, dst, false, time.Minute)
	kube(t, tb, netPolicy("falcon-allow", map[string]string{policyRole: "client"}), "apply", "-f", "-")
	o.AllowUnlabelled = reaches(cns, dst, true, 10*time.Second)
	kube(t, tb, nil, "label", "pod", client, policyRole+"=client")
	o.AllowLabelled = reaches(cns, dst, true, time.Minute)

	live, err := dialFrom(cns, dst)
	if err != nil {
		t.Fatalf("the live connection: %v", err)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() { done <- stream(live, stop) }()
	time.Sleep(3 * time.Second) // on the fast path, where falcon runs
	kube(t, tb, nil, "label", "pod", client, policyRole+"-")
	o.NewAfterUnlabel = reaches(cns, dst, false, time.Minute)
	n := recv.Load()
	time.Sleep(3 * time.Second)
	o.LiveAfterUnlabel = recv.Load() > n
	if during != nil {
		during()
	}
	close(stop)
	if err := <-done; err != nil {
		o.LiveAfterUnlabel = false
		t.Logf("the live connection: %v", err)
	}
	live.Close()

	kube(t, tb, nil, "delete", "networkpolicy", "falcon-deny", "falcon-allow")
	o.AfterDelete = reaches(cns, dst, true, time.Minute)
	kube(t, tb, nil, "label", "pod", server, policyRole+"-")
	return o
}

// policy is a NetworkPolicy on the server pod's ingress: from pods with
// labels from, or (nil) from none, on every pod.
func netPolicy(name string, from map[string]string) []byte {
	spec := map[string]any{"podSelector": map[string]any{}, "policyTypes": []string{"Ingress"}}
	if from != nil {
		spec["podSelector"] = map[string]any{"matchLabels": map[string]string{policyRole: "server"}}
		spec["ingress"] = []any{map[string]any{"from": []any{map[string]any{"podSelector": map[string]any{"matchLabels": from}}}}}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
		"metadata": map[string]any{"name": name, "namespace": "default"}, "spec": spec})
	return b
}

func kube(t *testing.T, tb *testbed.Testbed, stdin []byte, args ...string) {
	t.Helper()
	if _, err := tb.Kubectl(stdin, args...); err != nil {
		t.Fatal(err)
	}
}

// sinkTCP accepts connections on addr:port in ns and counts what they
// send into n, until the test ends.
func sinkTCP(t *testing.T, ns, addr string, port int, n *atomic.Int64) {
	t.Helper()
	var ln net.Listener
	err := netns.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp", net.JoinHostPort(addr, fmt.Sprint(port)))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					k, err := c.Read(buf)
					n.Add(int64(k))
					if err != nil {
						return
					}
				}
			}()
		}
	}()
}

func dialFrom(ns, dst string) (net.Conn, error) {
	var c net.Conn
	err := netns.Do(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", dst, 3*time.Second)
		return err
	})
	return c, err
}

// reaches polls whether a new connection from ns to dst opens until it
// is want or within has passed, and returns the last answer.
func reaches(ns, dst string, want bool, within time.Duration) bool {
	deadline := time.Now().Add(within)
	for {
		c, err := dialFrom(ns, dst)
		if err == nil {
			c.Close()
		}
		if ok := err == nil; ok == want || time.Now().After(deadline) {
			return ok
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stream writes to c, a little over 50 MB/s, until stop closes; a write
// error ends it.
func stream(c net.Conn, stop <-chan struct{}) error {
	buf := []byte(strings.Repeat("falcon!\n", 8<<10))
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(buf); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		time.Sleep(time.Millisecond)
	}
}
