package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

// unsafeMatches are nftables expressions (and the xtables matches that
// iptables-nft translates to) whose verdict can differ between packets of
// one flow: a cached flow would skip them after its first packet passed.
// Each is matched as whole words ("nfacct counter" holds no "ct count").
var unsafeMatches = regexp.MustCompile(`(^|\s)(limit rate|quota|ct count|queue|numgen|meta (hour|day|time)|` +
	`xt match "?(limit|hashlimit|connlimit|quota|time|statistic|recent)"?|xt target "?NFQUEUE"?)(\s|$)`)

// perFlowLines returns the lines of ruleset rs whose verdict can apply to
// any packet of a flow: those of tables with a base chain other than nat.
// A nat table's chains see a connection's first packet only (later ones
// follow its conntrack entry), so what they match cannot change within a
// flow: kube-proxy's random choice among a service's endpoints
// (statistic) is made there.
func perFlowLines(rs string) []string {
	tables := strings.Split(rs, "\ntable ")
	var out []string
	for _, tb := range tables {
		if !strings.Contains(tb, " hook ") || onlyNat.MatchString(tb) && !otherHook.MatchString(tb) {
			continue
		}
		out = append(out, strings.Split(tb, "\n")...)
	}
	return out
}

// unsafeLines are the rules of ruleset rs that the fast path cannot honour.
func unsafeLines(rs string) []string {
	var found []string
	for _, line := range perFlowLines(rs) {
		if unsafeMatches.MatchString(line) {
			found = append(found, strings.TrimSpace(line))
		}
	}
	return found
}

var (
	onlyNat   = regexp.MustCompile(`type nat hook`)
	otherHook = regexp.MustCompile(`type (filter|route) hook`)
)

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
	found := unsafeLines(rs)
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
