package agent

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// neighMsg is a netlink datagram of one RTM_NEWNEIGH (or typ) message with
// an ndmsg of family, state and flags.
func neighMsg(typ uint16, family uint8, state uint16, flags uint8) []byte {
	b := make([]byte, unix.NLMSG_HDRLEN+unix.SizeofNdMsg)
	binary.NativeEndian.PutUint32(b[0:], uint32(len(b)))
	binary.NativeEndian.PutUint16(b[4:], typ)
	nd := b[unix.NLMSG_HDRLEN:]
	nd[0] = family
	binary.NativeEndian.PutUint16(nd[8:], state)
	nd[10] = flags
	return b
}

func TestFastAnnouncedNeighbours(t *testing.T) {
	cases := []struct {
		name string
		b    []byte
		want int
	}{
		{"bridge-learned", neighMsg(unix.RTM_NEWNEIGH, unix.AF_BRIDGE, unix.NUD_REACHABLE, unix.NTF_MASTER), watchNeigh},
		{"bridge-aged", neighMsg(unix.RTM_DELNEIGH, unix.AF_BRIDGE, unix.NUD_STALE, unix.NTF_MASTER), watchNeigh},
		{"arp-learned", neighMsg(unix.RTM_NEWNEIGH, unix.AF_INET, unix.NUD_STALE, 0), watchNeigh},
		{"arp-incomplete", neighMsg(unix.RTM_NEWNEIGH, unix.AF_INET, unix.NUD_INCOMPLETE, 0), watchNeigh},
		{"noarp-device", neighMsg(unix.RTM_NEWNEIGH, unix.AF_INET, unix.NUD_NOARP, 0), watchNeigh},
		{"permanent-neighbour", neighMsg(unix.RTM_NEWNEIGH, unix.AF_INET, unix.NUD_PERMANENT, 0), watchRoute},
		{"static-fdb", neighMsg(unix.RTM_NEWNEIGH, unix.AF_BRIDGE, unix.NUD_NOARP, unix.NTF_SELF), watchRoute},
		{"permanent-fdb-removed", neighMsg(unix.RTM_DELNEIGH, unix.AF_BRIDGE, unix.NUD_PERMANENT, unix.NTF_SELF), watchRoute},
		{"extern-learned", neighMsg(unix.RTM_NEWNEIGH, unix.AF_BRIDGE, unix.NUD_REACHABLE, unix.NTF_EXT_LEARNED), watchRoute},
		{"learned-then-permanent", append(neighMsg(unix.RTM_NEWNEIGH, unix.AF_BRIDGE, unix.NUD_REACHABLE, 0),
			neighMsg(unix.RTM_NEWNEIGH, unix.AF_INET, unix.NUD_PERMANENT, 0)...), watchRoute},
		{"short", neighMsg(unix.RTM_NEWNEIGH, unix.AF_INET, unix.NUD_STALE, 0)[:unix.NLMSG_HDRLEN+4], watchRoute},
		{"overflowed", nil, watchNeigh},
	}
	for _, c := range cases {
		if got := announced(watchNeigh, c.b); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
	// Other sockets' datagrams are theirs, whatever they hold.
	if got := announced(watchNft, neighMsg(unix.RTM_NEWNEIGH, unix.AF_INET, unix.NUD_STALE, 0)); got != watchNft {
		t.Errorf("an nftables datagram: %d, want %d", got, watchNft)
	}
}

// TestFastFlushLimiter: requests in a burst flush once at once and once at
// the end of the period; none is lost.
func TestFastFlushLimiter(t *testing.T) {
	l := flushLimiter{period: 100 * time.Millisecond}
	defer l.stop()
	var n atomic.Int32
	flush := func() { n.Add(1) }
	start := time.Now()
	for time.Since(start) < 250*time.Millisecond {
		l.request(flush)
		time.Sleep(time.Millisecond)
	}
	time.Sleep(250 * time.Millisecond) // past the waiting one's flush, and a period after it
	// 250 ms of requests: at 0, 100, 200 and the one that waited past 250.
	if got := n.Load(); got < 3 || got > 4 {
		t.Errorf("%d flushes for a burst of 250 ms at most one per 100 ms, want 3 or 4", got)
	}
	forced, deferred := l.counts()
	if forced != uint64(n.Load()) || deferred == 0 {
		t.Errorf("counts: %d forced, %d deferred; %d flushes ran", forced, deferred, n.Load())
	}
	l.request(flush)
	if n.Load() != int32(forced)+1 {
		t.Error("a request a period after the last flush did not flush at once")
	}
}
