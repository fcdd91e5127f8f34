package stagetrace

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
)

// TestTCPOrderByIPID: the sequence device numbers TCP segments by their
// IPv4 ID. Segments whose IDs arrive out of order count as reordered; a
// gap (a loss, or a retransmission's new ID) and the 16-bit wrap do not.
// No TCP stack sends out of order on purpose, so the segments are written
// with a raw socket on h1 and cross the overlay as any other; c1 has no
// socket on their port and answers each with a reset.
func TestTCPOrderByIPID(t *testing.T) {
	o := newOverlay(t, true)
	opts := traceOptions(o)
	opts.SeqPaths = true
	tr, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()

	cases := []idCase{
		{41001, []uint16{100, 101, 103, 102, 104}, 1},
		{41002, []uint16{65534, 65535, 0, 1}, 0},
		{41003, []uint16{500, 510, 511}, 0},
		{41004, []uint16{7, 9, 8, 6, 10}, 2},
	}
	if err := netns.Do(o.h1, func() error { return sendByID(cases) }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	order, err := tr.Reordering()
	if err != nil {
		t.Fatal(err)
	}
	got := map[Flow]SeqRecord{}
	for _, r := range order {
		got[r.Flow] = r
	}
	for _, c := range cases {
		f := Flow{Proto: 6, Src: h1v4, Dst: c1v4, Sport: c.sport, Dport: portTCP + 1}
		r, ok := got[f]
		last := c.ids[len(c.ids)-1]
		if !ok || r.Seen != uint64(len(c.ids)) || r.Reordered != c.reordered || uint16(r.MaxSeq) != last+1 {
			t.Errorf("IDs %v: %+v (found %v), want %d seen, %d reordered, next ID %d", c.ids, r, ok, len(c.ids), c.reordered, last+1)
		}
		if c.reordered > 0 {
			checkFirstInversion(t, o, c, r)
		}
	}
	checkOrderReport(t, o, tr, order, got)
}

// idCase is one flow of segments sent from sport with IPv4 IDs ids, of
// which reordered arrive out of order.
type idCase struct {
	sport     uint16
	ids       []uint16
	reordered uint64
}

// sendByID writes each case's segments from a raw socket of the current
// namespace (h1's) to c1, one a millisecond.
func sendByID(cases []idCase) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_RAW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	send := func(sport, dport, id uint16, seq uint32) error {
		return unix.Sendto(fd, tcpSegment(h1v4, c1v4, sport, dport, id, seq), 0,
			&unix.SockaddrInet4{Addr: c1v4.As4()})
	}
	// Outside the traced ports: resolves c1's neighbour entries first.
	if err := send(41000, 9, 1, 1); err != nil {
		return err
	}
	time.Sleep(200 * time.Millisecond)
	for _, c := range cases {
		for i, id := range c.ids {
			// Sequence numbers that do not follow on: GRO merges none.
			if err := send(c.sport, portTCP+1, id, uint32(i+1)*100000); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// checkFirstInversion: the first reordered segment, its predecessor and
// their ways: h2's NIC, its VXLAN device, c1's eth0, in that order.
func checkFirstInversion(t *testing.T, o *overlay, c idCase, r SeqRecord) {
	t.Helper()
	inv := r.First
	if inv == nil {
		t.Errorf("IDs %v: no first inversion recorded", c.ids)
		return
	}
	want := []string{o.h2 + "/nic0", o.h2 + "/vxlan0", o.c1 + "/eth0"}
	for _, p := range [][]Hop{inv.Path, inv.PrevPath} {
		var got []string
		for i, h := range p {
			got = append(got, h.Stage)
			if i > 0 && h.At < p[i-1].At {
				t.Errorf("IDs %v: hops out of time order: %+v", c.ids, p)
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("IDs %v: way %v, want %v", c.ids, got, want)
		}
	}
	if i := slices.Index(c.ids, inv.ID); i < 1 || c.ids[i-1] != inv.PrevID || inv.Behind == 0 {
		t.Errorf("IDs %v: first inversion %+v", c.ids, inv)
	}
}

// checkOrderReport: falcon-lab trace --seq --paths' report carries each flow's
// first inversion, its text tells it with both ways, its JSON keeps them.
func checkOrderReport(t *testing.T, o *overlay, tr *Tracer, order []SeqRecord, got map[Flow]SeqRecord) {
	t.Helper()
	rep, err := tr.Report(time.Second, 0)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	rep.WriteText(&text)
	js, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js, &back); err != nil {
		t.Fatal(err)
	}
	for i, fo := range back.Order {
		r := got[order[i].Flow]
		if fo.Flow != r.Flow.String() || fo.Reordered != r.Reordered || (fo.First == nil) != (r.First == nil) {
			t.Errorf("report's order %+v, the tracer's %+v", fo, r)
			continue
		}
		if fo.First == nil {
			continue
		}
		if !reflect.DeepEqual(*fo.First, *r.First) {
			t.Errorf("%s: the first inversion through JSON %+v, want %+v", fo.Flow, *fo.First, *r.First)
		}
		line := "the first " + r.First.String()
		if !strings.Contains(text.String(), line) || !strings.Contains(line, fmt.Sprintf("its way (ID %d): %s/nic0 CPU", r.First.ID, o.h2)) {
			t.Errorf("the text report lacks %q:\n%s", line, text.String())
		}
	}
	t.Logf("\n%s", text.String())
}

// tcpSegment is an IPv4 packet (DF, ID id) carrying a TCP segment of 16
// bytes at seq with ACK and PSH set.
func tcpSegment(src, dst netip.Addr, sport, dport, id uint16, seq uint32) []byte {
	const payload = 16
	b := make([]byte, 20+20+payload)
	ip, tcp := b[:20], b[20:]
	ip[0], ip[8], ip[9] = 0x45, 64, unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(ip[2:], uint16(len(b)))
	binary.BigEndian.PutUint16(ip[4:], id)
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	s, d := src.As4(), dst.As4()
	copy(ip[12:], s[:])
	copy(ip[16:], d[:])
	binary.BigEndian.PutUint16(ip[10:], ^checksum(0, ip))
	binary.BigEndian.PutUint16(tcp[0:], sport)
	binary.BigEndian.PutUint16(tcp[2:], dport)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	binary.BigEndian.PutUint32(tcp[8:], 1)
	tcp[12], tcp[13] = 5<<4, 0x18 // ACK|PSH
	binary.BigEndian.PutUint16(tcp[14:], 65535)
	pseudo := make([]byte, 12)
	copy(pseudo, s[:])
	copy(pseudo[4:], d[:])
	pseudo[9] = unix.IPPROTO_TCP
	binary.BigEndian.PutUint16(pseudo[10:], uint16(len(tcp)))
	binary.BigEndian.PutUint16(tcp[16:], ^checksum(uint32(checksum(0, pseudo)), tcp))
	return b
}

// checksum adds b to the ones' complement sum sum, folded.
func checksum(sum uint32, b []byte) uint16 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}
