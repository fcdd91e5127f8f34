package probes

import (
	"os"
	"reflect"
	"testing"

	"github.com/falconnet/falcon/internal/procfs"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// TestTCPReorderCounters: every counter TCPReorder reads is one bench
// samples, under the name this kernel's netstat gives it (a recorded
// /proc/net/netstat of the development VM, 6.18).
func TestTCPReorderCounters(t *testing.T) {
	b, err := os.ReadFile("../../internal/procfs/testdata/netstat")
	if err != nil {
		t.Fatal(err)
	}
	snmp, err := procfs.ParseSNMP(b)
	if err != nil {
		t.Fatal(err)
	}
	counters := map[string]int64{}
	n := int64(0)
	for role, keys := range counterKeys {
		for _, k := range keys {
			if k[0] == "TcpExt" {
				if _, ok := snmp[k[0]][k[1]]; !ok {
					t.Errorf("netstat has no %s %s", k[0], k[1])
				}
			}
			n++
			counters[role+"."+k[0]+"."+k[1]] = n // distinct, non-zero
		}
	}
	o := TCPReorder(counters, false)
	v := reflect.ValueOf(*o)
	seen := map[int64]string{}
	for i := 0; i < v.NumField(); i++ {
		if v.Field(i).Kind() != reflect.Int64 {
			continue // Order: the order check's, below
		}
		x := v.Field(i).Int()
		if x == 0 {
			t.Errorf("TCPReorder.%s reads a counter bench does not sample", v.Type().Field(i).Name)
		}
		if other, dup := seen[x]; dup {
			t.Errorf("TCPReorder.%s and %s read the same counter", v.Type().Field(i).Name, other)
		}
		seen[x] = v.Type().Field(i).Name
	}
	if o.OFOQueue != counters["rx.TcpExt.TCPOFOQueue"] || o.SACKReorder != counters["tx.TcpExt.TCPSACKReorder"] ||
		o.Retrans != counters["tx.Tcp.RetransSegs"] || o.InSegs != counters["rx.Tcp.InSegs"] || o.Order != nil {
		t.Errorf("TCPReorder %+v", o)
	}
	// --order-check's counts, sampled as the others are (Probes.Sample).
	counters["rx.order.segments"], counters["rx.order.reordered"] = 1000, 0
	if o := TCPReorder(counters, true); o.Order == nil || *o.Order != (schema.TCPOrder{Segments: 1000}) {
		t.Errorf("TCPReorder with the order check: %+v", o.Order)
	}
	for _, w := range []string{"tcp", "multi-flow-tcp", "latency-tcp", "latency-load-tcp", "memcached", "web"} {
		if !workload.IsTCP(w) {
			t.Errorf("%s is TCP", w)
		}
	}
	for _, w := range []string{"udp", "udp-stress", "multi-flow", "latency", "latency-load"} {
		if workload.IsTCP(w) {
			t.Errorf("%s is not TCP", w)
		}
	}
}
