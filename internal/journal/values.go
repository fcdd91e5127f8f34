package journal

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/falconnet/falcon/internal/quote"
)

// The values falcon changes, and so the only ones Apply, Write and Restore
// touch. A journal (or the agent's hold file) is falcon's own, but its
// values are written as root wherever it says, so one planted or edited by
// someone else must reach nothing more: /proc/sys/kernel/core_pattern, say,
// would make the kernel run a program of their choosing.
const (
	// RPSCPUs and RPSFlowCnt are attributes of a receive queue,
	// /sys/class/net/DEV/queues/rx-N/ATTR (QueuePath).
	RPSCPUs    = "rps_cpus"
	RPSFlowCnt = "rps_flow_cnt"
	// SockFlowEntries is the global RFS socket table's size. It exists only
	// in the initial network namespace and serves every namespace.
	SockFlowEntries = "/proc/sys/net/core/rps_sock_flow_entries"
)

var queueAttrs = []string{RPSCPUs, RPSFlowCnt}

// ErrRefused is the error of a path that is not a value falcon changes.
var ErrRefused = errors.New("not a value falcon changes")

const queuesDir = "/sys/class/net"

// QueueGlob is the pattern of attribute attr (RPSCPUs, RPSFlowCnt) of
// every receive queue of device dev.
func QueueGlob(dev, attr string) string {
	return filepath.Join(queuesDir, dev, "queues", "rx-*", attr)
}

// checkPath accepts the values falcon changes alone: a receive queue's
// attribute of queueAttrs, or SockFlowEntries.
func checkPath(p string) error {
	if p == SockFlowEntries || isQueueValue(p) {
		return nil
	}
	return fmt.Errorf("journal: %s is %w (%s or %s of a receive queue, %s/DEV/queues/rx-N/; or %s)",
		quote.Short(p), ErrRefused, RPSCPUs, RPSFlowCnt, queuesDir, SockFlowEntries)
}

// Device is the device whose receive queue e's value belongs to ("" for
// a value of no device).
func (e Entry) Device() string {
	if !isQueueValue(e.Path) {
		return ""
	}
	return strings.Split(strings.TrimPrefix(e.Path, queuesDir+"/"), "/")[0]
}

func isQueueValue(p string) bool {
	rest, ok := strings.CutPrefix(p, queuesDir+"/")
	if !ok || filepath.Clean(p) != p {
		return false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 4 || parts[1] != "queues" {
		return false
	}
	dev, queue, attr := parts[0], parts[2], parts[3]
	n, ok := strings.CutPrefix(queue, "rx-")
	return dev != "." && dev != ".." && ok && n != "" && strings.Trim(n, "0123456789") == "" && slices.Contains(queueAttrs, attr)
}
