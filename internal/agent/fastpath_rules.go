package agent

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/falconnet/falcon/internal/netns"
)

// nft runs nft with args in ns. Without nft the ruleset cannot be read,
// and rules may be there all the same (iptables-nft writes them without
// it): the fast path then stays off.
func nft(ns string, args ...string) ([]byte, error) {
	bin, err := exec.LookPath(nftTool)
	if err != nil {
		return nil, fmt.Errorf("the fast path needs %s (Debian: %s) to read the host's ruleset: %w", nftTool, fastTools[nftTool], err)
	}
	var out []byte
	err = netns.Do(ns, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		out, err = exec.CommandContext(ctx, bin, args...).Output()
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read the nftables ruleset of network namespace %s: %w", netns.Label(ns), err)
	}
	return out, nil
}

// ruleKey names one rule: its table's family and name, chain and handle.
type ruleKey struct {
	family, table, chain string
	handle               int
}

var handleComment = regexp.MustCompile(`\s# handle (\d+)$`)

// ruleTexts indexes the rules of nft -a list ruleset's text by key.
func ruleTexts(rs string) map[ruleKey]string {
	out := map[ruleKey]string{}
	var family, table, chain string
	for _, line := range strings.Split(rs, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "table":
			family, table, chain = f[1], strings.Trim(f[2], `"`), ""
		case len(f) >= 2 && f[0] == "chain":
			chain = strings.Trim(f[1], `"`)
		case len(f) >= 2 && (f[0] == "set" || f[0] == "map" || f[0] == "flowtable" || f[1] != "{" && strings.HasSuffix(line, "{")):
			chain = "" // a named object's body holds no rules
		case chain != "":
			if m := handleComment.FindStringSubmatch(line); m != nil {
				h, _ := strconv.Atoi(m[1])
				out[ruleKey{family, table, chain, h}] = strings.TrimSpace(line[:len(line)-len(m[0])])
			}
		}
	}
	return out
}

// ruling is what the judge decided of a ruleset.
type ruling struct {
	// unsafe: the findings, formatted.
	unsafe []string
	// established: safe only while the fast path carries established
	// connections alone (queue statements that see new packets).
	established bool
}

// unsafeRuleset judges ruleset js (nft -j), reading rules' text forms
// with text where the JSON leaves out what decides, and nfacct objects'
// quotas with quota.
func unsafeRuleset(js []byte, text func() (string, error), quota func() (bool, error)) (ruling, error) {
	tables, err := parseRuleset(js)
	if err != nil {
		return ruling{}, err
	}
	var texts map[ruleKey]string
	xtText := func(family, table, chain string, handle int) (string, bool) {
		if texts == nil {
			rs, err := text()
			if err != nil {
				return "", false
			}
			texts = ruleTexts(rs)
		}
		s, ok := texts[ruleKey{family, table, chain, handle}]
		return s, ok
	}
	j := judgeRuleset(tables, xtText)
	found := j.found
	if len(j.nfacct) > 0 {
		if q, err := quota(); err != nil || q {
			found = append(found, j.nfacct...)
		}
	}
	out := ruling{established: len(j.queues) > 0}
	seen := map[finding]bool{}
	for _, f := range found {
		if !seen[f] {
			seen[f] = true
			out.unsafe = append(out.unsafe, f.String())
		}
	}
	return out, nil
}

// unsafeRules names the rules of ns that the fast path cannot honour: rules
// whose verdict can change within a flow, and legacy iptables, whose
// changes the kernel announces to no one. "" when there are none;
// established: the rules are safe only for established connections.
func unsafeRules(ns string) (reason string, established bool, err error) {
	js, err := nft(ns, "-j", "list", "ruleset")
	if err != nil {
		return "", false, err
	}
	text := func() (string, error) {
		b, err := nft(ns, "-a", "list", "ruleset")
		return string(b), err
	}
	r, err := unsafeRuleset(js, text, func() (bool, error) { return nfacctQuota(ns) })
	if err != nil {
		return "", false, err
	}
	if found := r.unsafe; len(found) > 0 {
		if len(found) > 3 {
			found = append(found[:3], fmt.Sprintf("and %d more", len(found)-3))
		}
		return fmt.Sprintf("rules the fast path cannot honour: %s", strings.Join(found, "; ")), false, nil
	}
	legacy, err := legacyTables(ns)
	if err != nil {
		return "", false, err
	}
	if legacy != "" {
		return fmt.Sprintf("legacy iptables tables (%s), whose changes are announced to no one", legacy), false, nil
	}
	return "", r.established, nil
}

// legacyTables lists the legacy (x_tables) tables of ns that hold rules.
func legacyTables(ns string) (string, error) {
	var names []string
	err := netns.Do(ns, func() error {
		names = legacyNames()
		return nil
	})
	return strings.Join(names, ", "), err
}

// legacyNames lists the legacy (x_tables) tables, IPv4's and IPv6's, of
// the calling thread's namespace.
func legacyNames() []string {
	var names []string
	for _, f := range []string{"/proc/thread-self/net/ip_tables_names", "/proc/thread-self/net/ip6_tables_names"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // x_tables is not loaded: no legacy table exists
		}
		names = append(names, strings.Fields(string(b))...)
	}
	return names
}
