package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"math/big"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/render"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// FuzzParseSize: a size is bytes in range or an error; FormatSize writes it
// the way ParseSize reads it.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"16", "1400", "4K", "4KiB", "64k", "1M", "65507", "16 B", "4 KiB", "1 MiB", "0", "-4K", "2M", "4KB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := workload.ParseSize(s)
		if err != nil {
			return
		}
		if n < workload.MinSize || n > workload.MaxSize {
			t.Fatalf("ParseSize(%q) = %d, out of range", s, n)
		}
		// No unit makes a size smaller than its number.
		digits := strings.TrimLeft(strings.TrimSpace(s), "+")
		if i := strings.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
			digits = digits[:i]
		}
		if num, ok := new(big.Int).SetString(digits, 10); ok && num.Cmp(big.NewInt(int64(n))) > 0 {
			t.Fatalf("ParseSize(%q) = %d, less than the number written", s, n)
		}
		if back, err := workload.ParseSize(workload.FormatSize(n)); back != n || err != nil {
			t.Fatalf("ParseSize(%q) = %d; FormatSize %q reads back as %d, %v", s, n, workload.FormatSize(n), back, err)
		}
	})
}

// FuzzResolve: bench's list flags (--modes with the mode specs, --workloads,
// --sizes, --flows, the CPU lists, --containers, --baseline) resolve to a
// config or a *ConfigError, never a panic; a config written back as flags
// resolves to itself, as a results file's config must.
func FuzzResolve(f *testing.F) {
	f.Add("host,docker", "vanilla,falcon:threshold=90,falcon+split", "udp-stress,tcp:128K", "16,1400", "4", "auto", "auto", "1", "auto")
	f.Add("calico", "vanilla,rps,rps+,rfs,rfs+,falcon:cpus=0-1,4,policy=paper", "multi-flow:16,multi-flow-tcp:4K", "16", "1,2,4,8",
		"0", "1", "flows", "calico/vanilla")
	f.Add("docker", "falcon:policy=paper,threshold=100", "latency,latency-load,latency-tcp:4K", "64K,1M", "1", "0-1", "1", "2", "docker")
	f.Fuzz(func(t *testing.T, layouts, modes, workloads, sizes, flows, sender, receiver, containers, baseline string) {
		vals := map[string]string{"layouts": layouts, "modes": modes, "workloads": workloads, "sizes": sizes, "flows": flows,
			"sender-cpus": sender, "receiver-cpus": receiver, "containers": containers, "baseline": baseline}
		c, err := resolveFlags(vals)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("%v: %v is no *ConfigError", vals, err)
			}
			return
		}
		back := map[string]string{"layouts": strings.Join(c.Layouts, ","), "modes": strings.Join(c.Modes, ","),
			"workloads": strings.Join(c.Workloads, ","), "sizes": joinInts(c.Sizes), "flows": joinInts(c.Flows),
			"sender-cpus": cpuset.Format(c.SenderCPUs), "receiver-cpus": cpuset.Format(c.ReceiverCPUs),
			"containers": strconv.Itoa(c.Containers), "baseline": c.Baseline}
		if c.ContainersPerFlow {
			back["containers"] = "flows"
		}
		c2, err := resolveFlags(back)
		if err != nil || !reflect.DeepEqual(c, c2) {
			t.Fatalf("%v resolved to %+v;\nwritten back as %v it resolves to %+v, %v", vals, c, back, c2, err)
		}
	})
}

func resolveFlags(vals map[string]string) (schema.Config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fl := RegisterFlags(fs)
	for k, v := range vals {
		if err := fs.Set(k, v); err != nil {
			return schema.Config{}, &ConfigError{Msg: err.Error()}
		}
	}
	return fl.Resolve([]int{0, 1})
}

func joinInts(v []int) string {
	var s []string
	for _, n := range v {
		s = append(s, strconv.Itoa(n))
	}
	return strings.Join(s, ",")
}

// FuzzDecode: any bytes are a results file or an error, never a panic, and
// a file is something report can print and draw (normalised again, as
// --baseline does); written back as WriteFile writes it, it reads back to
// the same bytes.
func FuzzDecode(f *testing.F) {
	b, err := os.ReadFile("../render/testdata/results.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	// A small file of the same shape, so that mutations reach every field
	// of a result quickly.
	rf, err := schema.Decode(b)
	if err != nil {
		f.Fatal(err)
	}
	rf.Results = rf.Results[:2]
	for i := range rf.Results {
		rf.Results[i].Runs = rf.Results[i].Runs[:1]
	}
	small, err := json.Marshal(rf)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add([]byte(`{"format":1,"results":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		rf, err := schema.Decode(b)
		if err != nil {
			return
		}
		if err := render.WriteTable(io.Discard, rf); err != nil {
			t.Fatalf("table: %v", err)
		}
		if err := render.WriteSVG(io.Discard, rf); err != nil {
			t.Fatalf("svg: %v", err)
		}
		out, err := json.MarshalIndent(rf, "", "  ")
		if err != nil {
			t.Fatalf("a file read cannot be written: %v", err)
		}
		again, err := schema.Decode(out)
		if err != nil {
			t.Fatalf("a file written cannot be read: %v\n%s", err, out)
		}
		out2, err := json.MarshalIndent(again, "", "  ")
		if err != nil || !bytes.Equal(out, out2) {
			t.Fatalf("written, read and written again it differs (%v):\n%s\nvs\n%s", err, out, out2)
		}
		schema.Normalize(rf.Results, "auto")
		render.WriteTable(io.Discard, rf)
		schema.Normalize(rf.Results, "docker/falcon")
		render.WriteSVG(io.Discard, rf)
	})
}
