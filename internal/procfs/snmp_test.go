package procfs

import (
	"github.com/falconnet/falcon/lab/roottest"
	"testing"
)

func TestParseSNMP(t *testing.T) {
	s, err := ParseSNMP(read(t, "snmp"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{"Ip", "Icmp", "IcmpMsg", "Tcp", "Udp", "UdpLite"} {
		if _, ok := s[sec]; !ok {
			t.Errorf("section %s missing", sec)
		}
	}
	if got := s["Tcp"]["MaxConn"]; got != -1 {
		t.Errorf("Tcp MaxConn = %d, want -1", got)
	}
	if got := s["Ip"]["DefaultTTL"]; got != 64 {
		t.Errorf("Ip DefaultTTL = %d, want 64", got)
	}
	if _, ok := s["Udp"]["RcvbufErrors"]; !ok {
		t.Error("Udp RcvbufErrors missing")
	}
	n, err := ParseSNMP(read(t, "netstat"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := n["TcpExt"]["TCPTimeouts"]; !ok {
		t.Error("TcpExt TCPTimeouts missing")
	}
	if _, ok := n["IpExt"]["InOctets"]; !ok {
		t.Error("IpExt InOctets missing")
	}
}

// TestParseSNMP6: a container's /proc/net/snmp6 after an iperf3 UDP run
// over an IPv6 overlay (its /proc/net/snmp counted no UDP at all).
func TestParseSNMP6(t *testing.T) {
	s, err := ParseSNMP6(read(t, "snmp6"))
	if err != nil {
		t.Fatal(err)
	}
	for sec, want := range map[string][2]any{
		"Ip6":      {"InReceives", int64(6269)},
		"Udp6":     {"InDatagrams", int64(6246)},
		"Icmp6":    {"InMsgs", nil},
		"UdpLite6": {"InDatagrams", int64(0)},
	} {
		got, ok := s[sec][want[0].(string)]
		if !ok || (want[1] != nil && got != want[1]) {
			t.Errorf("%s %s = %d (present %v), want %v", sec, want[0], got, ok, want[1])
		}
	}
	if _, ok := s["Udp6"]["InCsumErrors"]; !ok || len(s["UdpLite6"]) == 0 {
		t.Error("Udp6 counted into the wrong section")
	}
	s["Udp"] = map[string]int64{"InDatagrams": 4}
	if got := s.UDP("InDatagrams"); got != 6250 {
		t.Errorf("UDP(InDatagrams) = %d, want IPv4's 4 + IPv6's 6246", got)
	}
	for _, in := range []string{"Udp6InDatagrams\n", "Udp6InDatagrams x\n", "Udp6InDatagrams 1 2\n"} {
		if _, err := ParseSNMP6([]byte(in)); err == nil {
			t.Errorf("ParseSNMP6(%q): no error", in)
		}
	}
}

func TestParseSNMPErrors(t *testing.T) {
	for _, in := range []string{
		"Udp: InDatagrams NoPorts\n",
		"Udp: InDatagrams NoPorts\nUdp: 1\n",
		"Udp: InDatagrams\nTcp: 1\n",
		"Udp: InDatagrams\nUdp: x\n",
	} {
		if _, err := ParseSNMP([]byte(in)); err == nil {
			t.Errorf("ParseSNMP(%q): no error", in)
		}
	}
}

func TestReadSNMP(t *testing.T) {
	s, err := ReadSNMP("")
	if err != nil {
		t.Fatal(err)
	}
	if s["Udp"] == nil || s["TcpExt"] == nil {
		t.Errorf("sections: snmp and netstat not merged: %d sections", len(s))
	}
	if !roottest.May() {
		return
	}
	if _, err := ReadSNMP("falcon-no-such-netns"); err == nil {
		t.Error("missing netns: no error")
	}
}
