package xdpsend

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
)

// Frames captured by Learn on the testbed (a 200 B datagram to port 9 from
// the client container; the host layout sends it plain).
func recorded(t *testing.T, layout string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + layout + ".hex")
	if err != nil {
		t.Fatal(err)
	}
	f, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestParseFrame(t *testing.T) {
	for _, c := range []struct {
		layout       string
		inner, outer int
	}{
		{"host", 34, 0},
		{"docker", 84, 34}, // Ethernet, IPv4, UDP, VXLAN, Ethernet, IPv4
		{"flannel", 84, 34},
	} {
		raw := recorded(t, c.layout)
		tpl, err := ParseFrame(raw, 9)
		if err != nil {
			t.Fatalf("%s: %v", c.layout, err)
		}
		if tpl.InnerSport != c.inner || tpl.OuterSport != c.outer {
			t.Errorf("%s: ports at %d/%d, want %d/%d", c.layout, tpl.InnerSport, tpl.OuterSport, c.inner, c.outer)
		}
		if got := binary.BigEndian.Uint16(tpl.Frame[tpl.InnerSport+2:]); got != 9 {
			t.Errorf("%s: inner destination port %d", c.layout, got)
		}
		for _, off := range []int{tpl.InnerSport, tpl.OuterSport} {
			if off != 0 && binary.BigEndian.Uint16(tpl.Frame[off+6:]) != 0 {
				t.Errorf("%s: UDP checksum at %d not zeroed", c.layout, off+6)
			}
		}
		if tpl.HeaderLen() != c.inner+8 || len(tpl.Frame) != len(raw) {
			t.Errorf("%s: header %d B of a %d B frame", c.layout, tpl.HeaderLen(), len(tpl.Frame))
		}
		if &tpl.Frame[0] == &raw[0] {
			t.Errorf("%s: the template shares the captured buffer", c.layout)
		}
	}
}

func TestParseFrameRefuses(t *testing.T) {
	docker := recorded(t, "docker")
	frag := append([]byte(nil), docker...)
	frag[64+6] |= 0x20 // the inner IPv4 header's more-fragments flag
	v6 := append([]byte(nil), docker...)
	v6[12], v6[13] = 0x86, 0xdd
	for name, c := range map[string]struct {
		frame []byte
		port  int
		want  error
		msg   string
	}{
		"fragmented":     {frag, 9, ErrFragmented, ""},
		"ipv6 underlay":  {v6, 9, ErrNotIPv4, ""},
		"another port":   {docker, 10, nil, "no UDP datagram to port 10"},
		"truncated":      {docker[:30], 9, nil, "too short"},
		"longer than 1p": {make([]byte, MaxFrame+1), 9, nil, "live-frame mode sends at most"},
	} {
		_, err := ParseFrame(c.frame, c.port)
		switch {
		case err == nil:
			t.Errorf("%s: accepted", name)
		case c.want != nil && !errors.Is(err, c.want):
			t.Errorf("%s: %v, want %v", name, err, c.want)
		case c.msg != "" && !strings.Contains(err.Error(), c.msg):
			t.Errorf("%s: %q lacks %q", name, err, c.msg)
		}
	}
}
