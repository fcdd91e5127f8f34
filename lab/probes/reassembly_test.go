package probes

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// TestAwaitReassembly leaves the last fragment of a UDP datagram whose
// others never come in a testbed's receiving host, as a saturated CPU does:
// the next run waits until reassembly expires it, and no longer.
func TestAwaitReassembly(t *testing.T) {
	if testing.Short() {
		t.Skip("integration test: waits for reassembly to expire")
	}
	labtest.NeedTestbeds(t)
	ctx := context.Background()
	tb := labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("pr%d", os.Getpid()), Layout: "host"})
	if d, err := AwaitReassembly(ctx, tb); err != nil || d > ReassemblyPoll {
		t.Fatalf("new testbed: waited %s, %v", d, err)
	}
	rx := tb.Hosts[1]
	err := netns.Do(rx.Netns, func() error { return os.WriteFile("/proc/sys/net/ipv4/ipfrag_time", []byte("2"), 0) })
	if err != nil {
		t.Fatal(err)
	}
	src, dst := net.ParseIP(tb.Hosts[0].Addr).To4(), net.ParseIP(rx.Addr).To4()
	err = netns.Do(tb.Hosts[0].Netns, func() error {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_RAW, syscall.IPPROTO_RAW)
		if err != nil {
			return err
		}
		defer syscall.Close(fd)
		// IPv4 header (the kernel fills length and checksum) of a UDP
		// datagram's fragment at offset 1480, the last: no MF.
		pkt := make([]byte, 20+800)
		pkt[0], pkt[8], pkt[9] = 0x45, 64, syscall.IPPROTO_UDP
		binary.BigEndian.PutUint16(pkt[4:], 0x1234)
		binary.BigEndian.PutUint16(pkt[6:], 1480/8)
		copy(pkt[12:], src)
		copy(pkt[16:], dst)
		var to syscall.SockaddrInet4
		copy(to.Addr[:], dst)
		return syscall.Sendto(fd, pkt, 0, &to)
	})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := procfs.ReadFragMemory(rx.Netns); err != nil || n == 0 {
		t.Fatalf("reassembly holds %d bytes, %v: the fragment did not arrive", n, err)
	}
	start := time.Now()
	d, err := AwaitReassembly(ctx, tb)
	if err != nil || d < time.Second || d > 3*time.Second || time.Since(start) < d {
		t.Fatalf("waited %s, %v; want the 2 s the fragment had left, give or take", d, err)
	}
	if n, err := procfs.ReadFragMemory(rx.Netns); err != nil || n != 0 {
		t.Errorf("after the wait reassembly holds %d bytes, %v", n, err)
	}
}
