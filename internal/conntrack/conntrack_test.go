package conntrack

import (
	"errors"
	"fmt"
	"github.com/falconnet/falcon/lab/roottest"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

func TestAttrsRoundTrip(t *testing.T) {
	b := attr(nil, ctaStatus, be32(Assured|SeenReply))
	b = attr(b, ctaTimeout, be32(30))
	b = attr(b, ctaProtoinfo, attr(nil, ctaProtoinfoTCP, attr(nil, ctaProtoinfoTCPState, []byte{TCPEstablished})))
	var e Entry
	parseEntry(b, &e)
	if e != (Entry{Status: Assured | SeenReply, Timeout: 30, TCPState: TCPEstablished}) {
		t.Fatalf("parsed %+v", e)
	}
	parseEntry([]byte{0xff, 0xff, 1, 0, 1}, &e) // malformed: no panic, no change
}

// trackedNetns makes a namespace whose loopback traffic conntrack tracks.
func trackedNetns(t *testing.T) string {
	t.Helper()
	roottest.Need(t)
	name := fmt.Sprintf("fct%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	run("ip", "-n", name, "link", "set", "lo", "up")
	run("ip", "netns", "exec", name, "nft", "add table ip t; add chain ip t c { type filter hook output priority 0; ct state new accept; }")
	return name
}

func TestGetUpdateTCP(t *testing.T) {
	ns := trackedNetns(t)
	var tup Tuple
	var conns []net.Conn
	err := netns.Do(ns, func() error {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			return err
		}
		t.Cleanup(func() { l.Close() })
		c, err := net.Dial("tcp4", l.Addr().String())
		if err != nil {
			return err
		}
		s, err := l.Accept()
		if err != nil {
			return err
		}
		conns = append(conns, c, s)
		la, ra := c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr)
		tup = Tuple{Src: netip.MustParseAddr("127.0.0.1"), Dst: netip.MustParseAddr("127.0.0.1"), Sport: uint16(la.Port), Dport: uint16(ra.Port), Proto: 6}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	c, err := Open(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	conns[0].Write([]byte("x"))
	time.Sleep(50 * time.Millisecond)
	// Both directions' tuples find the entry.
	rev := Tuple{Src: tup.Dst, Dst: tup.Src, Sport: tup.Dport, Dport: tup.Sport, Proto: 6}
	for _, q := range []Tuple{tup, rev} {
		e, err := c.Get(q)
		if err != nil {
			t.Fatalf("get %+v: %v", q, err)
		}
		if e.TCPState != TCPEstablished || e.Status&SeenReply == 0 || e.Timeout < 1000 {
			t.Fatalf("entry %+v: want established, replied, a long timeout", e)
		}
	}
	if err := c.Update(rev, Change{Timeout: 77, Liberal: true}); err != nil {
		t.Fatal(err)
	}
	e, err := c.Get(tup)
	if err != nil || e.Timeout > 77 || e.Timeout < 75 {
		t.Fatalf("after update: %+v %v, want a timeout of 77 s", e, err)
	}
	missing := tup
	missing.Sport++
	if _, err := c.Get(missing); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get of no entry: %v, want ErrNotFound", err)
	}
	if err := c.Update(missing, Change{Timeout: 5}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of no entry: %v, want ErrNotFound (never created)", err)
	}
}
