package bench

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/schema"
)

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
