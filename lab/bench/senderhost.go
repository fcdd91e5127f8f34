package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/testbed"
)

// keepSenderHostOnSenderCPUs points RPS of the sending host's wire end at
// the sender CPUs, in every mode alike.
//
// On two real machines the client's receive work (TCP ACKs, ping-pong
// replies) runs on the client's own cores. Here both hosts share the CPUs,
// and without this the ACKs of a flow whose receive stages falcon moved to
// another CPU would be processed there too; the sender then transmits from
// that CPU as well, its container veth queues segments on two backlogs, and
// TCP reorders its own packets (TCPOFOQueue and spurious retransmits, seen
// even in vanilla). Pinning the sending host's receive work to the sender
// CPUs keeps the client side what it is on a real testbed: somebody else's
// machine. The testbed is thrown away afterwards, so nothing is restored.
func keepSenderHostOnSenderCPUs(tb *testbed.Testbed, cpus []int) error {
	h := tb.Hosts[0]
	mask := cpuset.Mask(cpus)
	return netns.WithSysfs(h.Netns, func(root string) error {
		queues, err := filepath.Glob(filepath.Join(root, "class/net", h.NIC, "queues/rx-*/rps_cpus"))
		if err != nil || len(queues) == 0 {
			return fmt.Errorf("no rx queues on %s in %s", h.NIC, h.Netns)
		}
		for _, q := range queues {
			if err := os.WriteFile(q, []byte(mask), 0); err != nil {
				return fmt.Errorf("set %s: %w", strings.TrimPrefix(q, root), err)
			}
		}
		return nil
	})
}
