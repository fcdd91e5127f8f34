package procfs

import (
	"os"
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
	if os.Geteuid() != 0 {
		return
	}
	if _, err := ReadSNMP("falcon-no-such-netns"); err == nil {
		t.Error("missing netns: no error")
	}
}
