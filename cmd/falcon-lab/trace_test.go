package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/stagetrace"
)

func TestTraceBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"--duration", "0s"},
		{"--duration", "-1s"},
		{"--proto", "icmp"},
		{"--ports", "0"},
		{"--ports", "9-3"},
		{"--ports", "70000"},
		{"--ports", "a-b"},
		{"--vxlan-ports", "4789,x"},
		{"--seq", "eth0"},
		{"--seq", "ns/eth0,eth1"},
		{"--paths"},
		{"--flows", "-1"},
		{"stray"},
	} {
		err := runTrace(args)
		var ue cli.UsageError
		if !errors.As(err, &ue) {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}

// A real trace of UDP over the loopback of a fresh namespace: the flow
// shows at <ns>/lo with its packets.
func TestTraceLoopback(t *testing.T) {
	labtest.NeedRoot(t)
	ns := fmt.Sprintf("fct%dtr", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	var conn *net.UDPConn
	err := netns.Do(ns, func() error {
		// A child started here inherits the locked thread's namespace.
		if err := exec.Command("ip", "link", "set", "lo", "up").Run(); err != nil {
			return err
		}
		var err error
		conn, err = net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40123})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			conn.Write([]byte("falcon-lab trace test"))
			time.Sleep(time.Millisecond)
		}
	}()

	var buf bytes.Buffer
	traceOut = &buf
	defer func() { traceOut = os.Stdout }()
	if err := runTrace([]string{"--duration", "500ms", "--netns", ns, "--ports", "40123", "--json"}); err != nil {
		t.Fatal(err)
	}
	var rep stagetrace.Report
	if err := json.Unmarshal(buf.Bytes(), &rep); err != nil {
		t.Fatalf("%v\n%s", err, buf.String())
	}
	if len(rep.Flows) == 0 {
		t.Fatalf("no flow traced:\n%s", buf.String())
	}
	for _, f := range rep.Flows {
		if f.Proto != 17 || f.Dport != 40123 || len(f.Stages) != 1 || f.Packets == 0 {
			t.Errorf("unexpected flow %+v", f)
		}
		for st := range f.Stages {
			if st != ns+"/lo" {
				t.Errorf("flow %s at stage %s, want %s/lo", f.Flow, st, ns)
			}
		}
	}

	buf.Reset()
	if err := runTrace([]string{"--duration", "200ms", "--netns", ns, "--ports", "40123"}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), ns+"/lo") {
		t.Errorf("text report lacks the stage:\n%s", buf.String())
	}
	t.Logf("\n%s", buf.String())
}
