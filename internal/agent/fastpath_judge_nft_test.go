package agent

import (
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/netns"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

// scratchNetns is an empty network namespace, removed (with its rules and
// accounting objects) when the test ends.
func scratchNetns(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("fct-rules-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	return name
}

// loadRuleset loads c's source into ns with the real tool.
func loadRuleset(t *testing.T, ns string, c rulesetCase) {
	t.Helper()
	src := c.src
	if file, ok := strings.CutPrefix(src, "@"); ok {
		b, err := os.ReadFile(filepath.Join("testdata", "nft", file))
		if err != nil {
			t.Fatal(err)
		}
		src = string(b)
	}
	tool := []string{"nft", "-f", "-"}
	if c.iptables {
		tool = []string{"iptables-restore"}
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, tool...)...)
	cmd.Stdin = strings.NewReader(src)
	if out, err := cmd.CombinedOutput(); err != nil {
		// A kernel without nft's queue (CONFIG_NFT_QUEUE) loads no queue
		// case: those were recorded with the queues listed as counters
		// and put back as nft writes them.
		if qerr := testbed.CheckNftQueue(); qerr != nil && strings.Contains(string(out), "queue") {
			t.Skip(qerr)
		}
		t.Fatalf("%s: %v: %s", strings.Join(tool, " "), err, out)
	}
}

// nfacctAdd creates accounting object name in ns, with a packet quota or
// without, as the nfacct tool would.
func nfacctAdd(t *testing.T, ns, name string, quota bool) {
	t.Helper()
	attr := func(typ uint16, val []byte) []byte {
		a := make([]byte, 4, 4+len(val)+3)
		binary.NativeEndian.PutUint16(a, uint16(4+len(val)))
		binary.NativeEndian.PutUint16(a[2:], typ)
		a = append(a, val...)
		return append(a, make([]byte, (4-len(a)%4)%4)...)
	}
	body := append([]byte{unix.AF_UNSPEC, 0, 0, 0}, attr(1, append([]byte(name), 0))...) // NFACCT_NAME
	if quota {
		body = append(body, attr(nfacctFlags, binary.BigEndian.AppendUint32(nil, 1))...) // NFACCT_F_QUOTA_PKTS
		body = append(body, attr(6, binary.BigEndian.AppendUint64(nil, 1000))...)        // NFACCT_QUOTA
	}
	msg := make([]byte, unix.NLMSG_HDRLEN, unix.NLMSG_HDRLEN+len(body))
	binary.NativeEndian.PutUint32(msg, uint32(unix.NLMSG_HDRLEN+len(body)))
	binary.NativeEndian.PutUint16(msg[4:], nfnlSubsysAcct<<8) // NFNL_MSG_ACCT_NEW
	binary.NativeEndian.PutUint16(msg[6:], unix.NLM_F_REQUEST|unix.NLM_F_CREATE|unix.NLM_F_ACK)
	msg = append(msg, body...)
	err := netns.Do(ns, func() error {
		fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
			return err
		}
		buf := make([]byte, 4096)
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil || len(msgs) == 0 {
			return fmt.Errorf("no answer: %v", err)
		}
		return nlError(msgs[0].Data)
	})
	if err != nil {
		t.Fatalf("create nfacct object %s: %v", name, err)
	}
}

// TestRulesetNft judges what the real nft lists of each case loaded by
// the real tools into a scratch namespace, through unsafeRules, as the
// agent does; FALCON_RECORD_NFT=1 records the listings for the unit test.
func TestRulesetNft(t *testing.T) {
	labtest.NeedRoot(t)
	for _, tool := range []string{"nft", "iptables-restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(err)
		}
	}
	for _, c := range rulesetCases {
		if c.src == "" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ns := scratchNetns(t)
			nfacctAdd(t, ns, "ct_state_invalid_dropped_pkts", false)
			loadRuleset(t, ns, c)
			reason, est, err := unsafeRules(ns)
			if err != nil {
				t.Fatal(err)
			}
			if est != c.established {
				t.Errorf("established only: %v, want %v", est, c.established)
			}
			var found []string
			if reason != "" {
				found = []string{reason}
			}
			checkFindings(t, found, c.want[:min(len(c.want), 1)])
			if os.Getenv("FALCON_RECORD_NFT") != "" {
				record(t, ns, c.name)
			}
		})
	}
}

// record writes ns's ruleset as nft lists it, JSON and text, for c.
func record(t *testing.T, ns, name string) {
	t.Helper()
	for ext, args := range map[string][]string{".json": {"-j", "list", "ruleset"}, ".txt": {"-a", "list", "ruleset"}} {
		out, err := nft(ns, args...)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "nft", name+ext), out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestNfacctQuota reads accounting objects' quotas through nfnetlink.
func TestNfacctQuota(t *testing.T) {
	labtest.NeedRoot(t)
	ns := scratchNetns(t)
	nfacctAdd(t, ns, "plain", false)
	if q, err := nfacctQuota(ns); err != nil || q {
		t.Fatalf("without a quota: %v, %v", q, err)
	}
	nfacctAdd(t, ns, "capped", true)
	if q, err := nfacctQuota(ns); err != nil || !q {
		t.Fatalf("with a quota: %v, %v", q, err)
	}
}
