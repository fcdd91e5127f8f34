package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

// unsafeMatches are nftables expressions (and the xtables matches that
// iptables-nft translates to) whose verdict can differ between packets of
// one flow: a cached flow would skip them after its first packet passed.
var unsafeMatches = []string{
	"limit rate", "quota", "ct count", "queue", "numgen", "meta hour", "meta day", "meta time",
	"xt match \"limit\"", "xt match \"hashlimit\"", "xt match \"connlimit\"", "xt match \"quota\"",
	"xt match \"time\"", "xt match \"statistic\"", "xt match \"recent\"", "xt target \"NFQUEUE\"",
}

// ruleset is the host namespace's nftables ruleset as text. Without nft
// it cannot be read, and rules may be there all the same (iptables-nft
// writes them without it): the fast path then stays off.
func ruleset(ns string) (string, error) {
	nft, err := exec.LookPath("nft")
	if err != nil {
		return "", fmt.Errorf("the fast path needs nft (Debian: nftables) to read the host's ruleset: %w", err)
	}
	var out []byte
	err = netns.Do(ns, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		out, err = exec.CommandContext(ctx, nft, "list", "ruleset").Output()
		return err
	})
	if err != nil {
		return "", fmt.Errorf("read the nftables ruleset of network namespace %s: %w", netns.Label(ns), err)
	}
	return string(out), nil
}

// unsafeRules names the rules of ns that the fast path cannot honour: rules
// whose verdict can change within a flow, and legacy iptables, whose
// changes the kernel announces to no one. "" when there are none.
func unsafeRules(ns string) (string, error) {
	rs, err := ruleset(ns)
	if err != nil {
		return "", err
	}
	var found []string
	for _, line := range strings.Split(rs, "\n") {
		for _, m := range unsafeMatches {
			if strings.Contains(line, m) {
				found = append(found, strings.TrimSpace(line))
				break
			}
		}
	}
	if len(found) > 0 {
		if len(found) > 3 {
			found = append(found[:3], fmt.Sprintf("and %d more", len(found)-3))
		}
		return fmt.Sprintf("rules whose verdict can change within a flow (%s)", strings.Join(found, "; ")), nil
	}
	legacy, err := legacyTables(ns)
	if err != nil {
		return "", err
	}
	if legacy != "" {
		return fmt.Sprintf("legacy iptables tables (%s), whose changes are announced to no one", legacy), nil
	}
	return "", nil
}

// legacyTables lists the legacy (x_tables) tables of ns that hold rules.
func legacyTables(ns string) (string, error) {
	var names []string
	err := netns.Do(ns, func() error {
		for _, f := range []string{"/proc/net/ip_tables_names", "/proc/net/ip6_tables_names"} {
			b, err := os.ReadFile(f)
			if err != nil {
				continue // x_tables is not loaded: no legacy table exists
			}
			names = append(names, strings.Fields(string(b))...)
		}
		return nil
	})
	return strings.Join(names, ", "), err
}
