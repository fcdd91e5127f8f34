package cause

import (
	"fmt"
	"github.com/falconnet/falcon/lab/roottest"
	"net"
	"os"
	"runtime"
	"slices"
	"testing"
	"time"
)

func TestProcessor(t *testing.T) {
	// A command name with spaces and parentheses; processor 7.
	stat := "1234 (my (odd) app) S 1 1234 1234 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 4 0 100 1000 200 " +
		"18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 7 0 0 0 0 0"
	if cpu, ok := Processor([]byte(stat)); !ok || cpu != 7 {
		t.Errorf("Processor = %d, %v; want 7", cpu, ok)
	}
	if _, ok := Processor([]byte("1 (x) S 1")); ok {
		t.Error("a short stat line parsed")
	}
}

func TestReaderDiff(t *testing.T) {
	files := map[string]string{}
	r := Reader{read: func(p string) ([]byte, error) { return []byte(files[p]), nil }}
	set := func(user, soft, idle, rx, drop, squeeze int) {
		files["/proc/stat"] = fmt.Sprintf("cpu  0 0 0 0 0 0 0 0 0 0\ncpu0 %d 0 0 %d 0 0 %d 0 0 0\ncpu1 0 0 0 100 0 0 0 0 0 0\n", user, idle, soft)
		files["/proc/softirqs"] = fmt.Sprintf("                    CPU0       CPU1\n      NET_RX: %d 0\n", rx)
		files["/proc/net/softnet_stat"] = fmt.Sprintf("00000010 %08x %08x 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n", drop, squeeze)
	}
	set(10, 10, 80, 5, 0, 0)
	if c, _, err := r.Read(); err != nil || c != nil {
		t.Fatalf("first read: %v, %v", c, err)
	}
	set(20, 70, 90, 105, 2, 3)
	c, ms, err := r.Read()
	if err != nil || len(c) != 2 || ms < 0 {
		t.Fatalf("second read: %v, %v", c, err)
	}
	want := CPU{ID: 0, Busy: 87.5, Softirq: 75, BusyTicks: 70, NetRx: 100, Dropped: 2, Squeezed: 3}
	if c[0] != want {
		t.Errorf("cpu 0: %+v, want %+v", c[0], want)
	}
	if nic := NICByNetRx(c); !slices.Equal(nic, []int{0}) {
		t.Errorf("NIC by NET_RX: %v", nic)
	}
}

// BenchmarkRead is the cost of one turn's per-CPU causes on this machine.
func BenchmarkRead(b *testing.B) {
	var r Reader
	for b.Loop() {
		if _, _, err := r.Read(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkApps is the cost of finding the applications' CPUs in this
// process's own network namespace (the host's: every socket of the
// machine, far more than a container holds).
func BenchmarkApps(b *testing.B) {
	var a Apps
	for b.Loop() {
		if _, err := a.CPUs([]string{""}); err != nil && roottest.Root() {
			b.Log(err)
		}
	}
}

// The live files parse: every online CPU, twice in a row.
func TestReadLive(t *testing.T) {
	var r Reader
	if _, _, err := r.Read(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	c, ms, err := r.Read()
	if err != nil || len(c) != runtime.NumCPU() || ms <= 0 {
		t.Fatalf("%d CPUs over %.1f ms: %v (%d online)", len(c), ms, err, runtime.NumCPU())
	}
	for _, x := range c {
		if x.Busy < 0 || x.Busy > 100 || x.Softirq > x.Busy+0.1 {
			t.Errorf("cpu %d: %+v", x.ID, x)
		}
	}
}

// BenchmarkReceived is the cost of one turn's count of what a namespace's
// sockets received (this process's own namespace).
func BenchmarkReceived(b *testing.B) {
	var r Received
	for b.Loop() {
		if _, _, err := r.Counts([]string{""}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestPair(t *testing.T) {
	snmp := "Ip: Forwarding DefaultTTL\nIp: 1 64\nUdp: InDatagrams NoPorts InErrors OutDatagrams RcvbufErrors\nUdp: 100 2 7 50 5\nUdpLite: InDatagrams\nUdpLite: 9\n"
	u := pair([]byte(snmp), "Udp:")
	if u["InDatagrams"] != 100 || u["InErrors"] != 7 || u["RcvbufErrors"] != 5 || len(u) != 5 {
		t.Errorf("Udp: %v", u)
	}
	if pair([]byte(snmp), "Tcp:") != nil {
		t.Error("a section that is not there")
	}
}

// The applications holding sockets are found: this process, by its own
// UDP socket, on the CPUs its threads last ran on.
func TestAppsFindsOwnSocket(t *testing.T) {
	c, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Skip(err)
	}
	defer c.Close()
	var a Apps
	cpus, err := a.CPUs([]string{""})
	if err != nil || len(cpus) == 0 {
		t.Fatalf("CPUs %v, %v", cpus, err)
	}
	if !slices.Contains(a.pids, os.Getpid()) {
		t.Errorf("holders %v lack this process %d", a.pids, os.Getpid())
	}
}
