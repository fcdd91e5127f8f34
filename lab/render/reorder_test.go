package render

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/schema"
)

func reorderRun(ofo, segs, retrans int64) schema.Run {
	return schema.Run{WindowS: 2, PPS: float64(segs) / 2, Gbps: 5, Retransmits: &retrans, OutOfOrder: &ofo,
		Reordering: &schema.TCPReorder{InSegs: segs, OFOQueue: ofo, OFOMerge: 2, SACKReorder: 7, TSReorder: 1, DSACKRecv: 3,
			DSACKOfoRecv: 2, DSACKRecvSegs: 4, SpuriousRTOs: 1, LostRetrans: 0, Retrans: retrans}}
}

// TestReorderingInResults: the counters reach the file under their names,
// the summary (TCP runs only) and the table; a file from before them
// still reads, and shows iperf3's counts.
func TestReorderingInResults(t *testing.T) {
	tcp := schema.Result{Layout: "docker", Mode: "mflow:batch=16,elephant=0", Workload: "tcp", Size: 64 << 10, Flows: 1,
		Runs: []schema.Run{reorderRun(1000, 20000, 10), reorderRun(3000, 20000, 30)}}
	udp := schema.Result{Layout: "docker", Mode: "vanilla", Workload: "udp", Size: 1400, Flows: 1, Runs: []schema.Run{{WindowS: 2, PPS: 1}}}
	tcp.Summarize()
	udp.Summarize()
	if s := tcp.Summary; s["tcp_ofo_queue"].Mean != 2000 || s["tcp_ofo_pct"].Mean != 10 || s["tcp_retrans"].Mean != 20 ||
		s["tcp_sack_reorder"].Mean != 7 || s["tcp_dsack_recv_segs"].Mean != 4 || s["tcp_spurious_rtos"].Mean != 1 {
		t.Errorf("summary %+v", s)
	}
	for k := range udp.Summary {
		if strings.HasPrefix(k, "tcp_") {
			t.Errorf("a UDP run has %s", k)
		}
	}
	b, err := json.Marshal(tcp.Runs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"reordering":{"in_segs":20000,"ofo_queue":1000,"ofo_drop":0,"ofo_merge":2,"sack_reorder":7,"ts_reorder":1,` +
		`"dsack_recv":3,"dsack_ofo_recv":2,"dsack_recv_segs":4,"spurious_rtos":1,"lost_retrans":0,"retrans":10}`} {
		if !bytes.Contains(b, []byte(k)) {
			t.Errorf("run JSON lacks %s:\n%s", k, b)
		}
	}
	if b, _ := json.Marshal(udp.Runs[0]); bytes.Contains(b, []byte("reordering")) {
		t.Errorf("a UDP run's JSON has reordering: %s", b)
	}

	var out strings.Builder
	if err := WriteTable(&out, &schema.File{Results: []schema.Result{tcp, udp}}); err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(out.String(), "TCP reordering")
	if !strings.Contains(section, "| docker | mflow:batch=16,elephant=0 | tcp | 64 KiB | 1 | — | 2000/20 | 10.00 | 2 | 7/1 | 3/2 | 1 | 0 |") ||
		strings.Contains(section, "| udp |") {
		t.Errorf("table:\n%s", out.String())
	}
	// With --order-check: the exact count over all runs, so that one
	// reordered segment shows however many segments the runs had.
	for i, n := range []int64{0, 1} {
		tcp.Runs[i].Reordering.Order = &schema.TCPOrder{Segments: 20000, Reordered: n}
	}
	tcp.Summarize()
	out.Reset()
	if err := WriteTable(&out, &schema.File{Results: []schema.Result{tcp}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "| tcp | 64 KiB | 1 | 1 of 40000 | 2000/20 |") || tcp.Summary["tcp_reordered"].Mean != 0.5 {
		t.Errorf("table with the order check:\n%s", out.String())
	}
	if b, _ := json.Marshal(tcp.Runs[1]); !bytes.Contains(b, []byte(`"order":{"segments":20000,"reordered":1}`)) {
		t.Errorf("run JSON lacks the order check: %s", b)
	}

	old, err := schema.ReadFile("../render/testdata/results.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range old.Results {
		for _, run := range r.Runs {
			if run.Reordering != nil {
				t.Fatalf("%s/%s: reordering in a file from before it", r.Layout, r.Mode)
			}
		}
	}
	out.Reset()
	WriteTable(&out, old)
	if !strings.Contains(out.String(), "| docker | vanilla | tcp | 64 KiB | 1 | — | 65/206 | — | — | — | — | — | — |") {
		t.Errorf("old file's table:\n%s", out.String())
	}
}

// TestBatchSweepSVG: a file of vanilla and mflow at several batches draws
// out-of-order segments against the batch size, the batches in numeric
// order whatever the file's; any other file the bar chart.
func TestBatchSweepSVG(t *testing.T) {
	var results []schema.Result
	for _, c := range []struct {
		mode string
		ofo  int64
	}{{"vanilla", 5}, {"mflow:batch=256,elephant=0", 40}, {"mflow:batch=16,elephant=0", 900}, {"mflow:batch=64,elephant=0@b", 300}, {"mflow", 50}} {
		r := schema.Result{Layout: "docker", Mode: c.mode, Workload: "tcp", Size: 64 << 10, Flows: 1,
			Runs: []schema.Run{reorderRun(c.ofo, 20000, 1), reorderRun(c.ofo+10, 20000, 1)}}
		r.Summarize()
		results = append(results, r)
	}
	f := &schema.File{Config: schema.Config{Duration: schema.Duration(2e9), Runs: 2}, Results: results}
	if got := batchSweep(f); !reflect.DeepEqual(got, []int{0, 256, 16, 64, 256}) {
		t.Fatalf("batchSweep = %v", got)
	}
	var b bytes.Buffer
	if err := WriteSVG(&b, f); err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(b.Bytes()))
	var labels []string
	var inText bool
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			inText = x.Name.Local == "text"
		case xml.CharData:
			if inText {
				labels = append(labels, string(x))
			}
		}
	}
	svg := b.String()
	if !strings.Contains(svg, "Out-of-order segments per batch size") || !strings.Contains(svg, "docker tcp 64 KiB vanilla: 10") ||
		!strings.Contains(svg, "docker tcp 64 KiB mflow:elephant=0 batch 16: 905 out of order") ||
		!strings.Contains(svg, "docker tcp 64 KiB mflow:elephant=0@b batch 64: 305 out of order") ||
		!strings.Contains(svg, "docker tcp 64 KiB mflow batch 256: 55 out of order") ||
		!strings.Contains(svg, "docker tcp 64 KiB mflow:elephant=0 batch 256: 45 out of order") {
		t.Errorf("svg:\n%s", svg)
	}
	var axis []string
	for _, l := range labels {
		if l == "16" || l == "64" || l == "256" {
			axis = append(axis, l)
		}
	}
	if withoutBatch("mflow:batch=16,elephant=0@b") != "mflow:elephant=0@b" || withoutBatch("mflow:batch=16") != "mflow" {
		t.Error("withoutBatch")
	}
	if !reflect.DeepEqual(axis, []string{"16", "64", "256"}) {
		t.Errorf("x axis %q, want 16, 64, 256 in order", axis)
	}
	// One batch only, or another mode: the bar chart.
	for _, rs := range [][]schema.Result{results[:2], append(results[:2:2], schema.Result{Layout: "docker", Mode: "falcon", Workload: "tcp"})} {
		if batchSweep(&schema.File{Results: rs}) != nil {
			t.Errorf("%d results: a batch sweep", len(rs))
		}
	}
	if batchSweep(&schema.File{Results: []schema.Result{{Mode: "vanilla", Workload: "udp"}, {Mode: "mflow:batch=16", Workload: "udp"}, {Mode: "mflow", Workload: "udp"}}}) != nil {
		t.Error("UDP cases: a batch sweep")
	}
}
