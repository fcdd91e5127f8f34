package datapath

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/conntrack"
)

// TestEstablishedEntry: what the keeper takes for an ESTABLISHED
// connection, so that every later packet of it is established to the
// rules: TCP by its state, UDP (and any other) by a reply seen.
func TestEstablishedEntry(t *testing.T) {
	for _, c := range []struct {
		proto uint8
		e     conntrack.Entry
		want  bool
	}{
		{unix.IPPROTO_TCP, conntrack.Entry{TCPState: conntrack.TCPEstablished, Status: conntrack.SeenReply}, true},
		{unix.IPPROTO_TCP, conntrack.Entry{TCPState: conntrack.TCPEstablished - 1, Status: conntrack.SeenReply}, false},
		{unix.IPPROTO_UDP, conntrack.Entry{Status: conntrack.SeenReply}, true},
		{unix.IPPROTO_UDP, conntrack.Entry{Status: conntrack.Assured}, false},
	} {
		if got := established(c.proto, c.e); got != c.want {
			t.Errorf("established(%d, %+v) = %v, want %v", c.proto, c.e, got, c.want)
		}
	}
}
