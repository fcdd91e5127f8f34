package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The judge reads the host's ruleset as `nft -j list ruleset` writes it
// (libnftables-json(5)) and accepts only what it knows cannot decide
// differently for two packets of one flow: the fast path carries a flow's
// later packets past netfilter on the strength of one packet's verdict
// (docs/fastpath.md#policy). Anything it does not know is unsafe.

// Why a rule is unsafe.
const (
	whyVaries      = "verdict can change within a flow"
	whyUnknown     = "not known to be constant within a flow"
	whyUnannounced = "its contents change without an nftables commit"
	whyZone        = "conntrack zones other than 0 are not kept in step"
	whyPaths       = "new and established packets of a flow take different paths"
	whyMarks       = "sets a mark that established packets skip"
	whyHelper      = "a conntrack helper must see every packet"
)

// finding is one unsafe expression, where it is.
type finding struct {
	table, chain, what, why string
}

func (f finding) String() string {
	return fmt.Sprintf("table %s chain %s: %q (%s)", f.table, f.chain, f.what, f.why)
}

// nftRule is a rule as nft -j lists it; expressions stay generic JSON.
type nftRule struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	Handle int    `json:"handle"`
	Expr   []any  `json:"expr"`
}

type nftChain struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Name   string `json:"name"`
	Type   string `json:"type"`
	Hook   string `json:"hook"`
}

// nftSet is a named set or map; Elem, Flags and Timeout stay generic.
type nftSet struct {
	Family  string `json:"family"`
	Table   string `json:"table"`
	Name    string `json:"name"`
	Flags   any    `json:"flags"`
	Timeout any    `json:"timeout"`
	Elem    any    `json:"elem"`
}

// nftTable is what the judge needs of one table.
type nftTable struct {
	name   string // "family name", as findings print it
	chains map[string]*nftChain
	order  []string // chain names as listed
	rules  map[string][]nftRule
	sets   map[string]*nftSet
}

// parseRuleset reads nft -j list ruleset's output into tables.
func parseRuleset(js []byte) (map[string]*nftTable, error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		return nil, fmt.Errorf("read nft's JSON ruleset: %w", err)
	}
	tables := map[string]*nftTable{}
	table := func(family, name string) *nftTable {
		k := family + " " + name
		if tables[k] == nil {
			tables[k] = &nftTable{name: k, chains: map[string]*nftChain{}, rules: map[string][]nftRule{}, sets: map[string]*nftSet{}}
		}
		return tables[k]
	}
	for _, obj := range doc.Nftables {
		for kind, raw := range obj {
			var err error
			switch kind {
			case "chain":
				var c nftChain
				if err = json.Unmarshal(raw, &c); err == nil {
					t := table(c.Family, c.Table)
					if t.chains[c.Name] == nil {
						t.order = append(t.order, c.Name)
					}
					t.chains[c.Name] = &c
				}
			case "rule":
				var r nftRule
				if err = json.Unmarshal(raw, &r); err == nil {
					t := table(r.Family, r.Table)
					t.rules[r.Chain] = append(t.rules[r.Chain], r)
				}
			case "set", "map":
				var s nftSet
				if err = json.Unmarshal(raw, &s); err == nil {
					table(s.Family, s.Table).sets[s.Name] = &s
				}
			}
			// Tables, named objects (counters, limits, quotas, helpers)
			// and flowtables act only through the rules that use them.
			if err != nil {
				return nil, fmt.Errorf("read nft's JSON ruleset: %s: %w", kind, err)
			}
		}
	}
	return tables, nil
}

// reach is how a chain's rules see a flow: every packet, or (reached only
// from nat base chains) its first packet alone; conntrack does not pass
// later packets through nat chains.
type reach int

const (
	unreached reach = iota
	firstPacket
	everyPacket
)

// reaches says how each chain of t is reached from its base chains,
// through jumps and gotos, verdict maps' included. Unreached chains run
// for no packet; a commit that links them is judged again.
func (t *nftTable) reaches() map[string]reach {
	out := map[string]reach{}
	var visit func(name string, r reach)
	visit = func(name string, r reach) {
		if out[name] >= r || t.chains[name] == nil {
			return
		}
		out[name] = r
		for _, to := range t.targets(name) {
			visit(to, r)
		}
	}
	for _, name := range t.order {
		if c := t.chains[name]; c.Hook != "" && c.Type != "nat" {
			visit(name, everyPacket)
		}
	}
	for _, name := range t.order {
		if c := t.chains[name]; c.Hook != "" && c.Type == "nat" {
			visit(name, firstPacket)
		}
	}
	return out
}

// targets are the chains chain's rules jump or go to, directly or through
// the table's named maps.
func (t *nftTable) targets(chain string) []string {
	var out []string
	seen := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case []any:
			for _, e := range v {
				walk(e)
			}
		case map[string]any:
			for k, e := range v {
				if to, ok := jumpTarget(k, e); ok {
					out = append(out, to)
				}
				walk(e)
			}
		case string:
			if s := t.sets[strings.TrimPrefix(v, "@")]; strings.HasPrefix(v, "@") && s != nil && !seen[s.Name] {
				seen[s.Name] = true
				walk(s.Elem)
			}
		}
	}
	for _, r := range t.rules[chain] {
		walk(r.Expr)
	}
	return out
}

// jumpTarget is the chain of a jump or goto verdict.
func jumpTarget(kind string, v any) (string, bool) {
	if kind != "jump" && kind != "goto" {
		return "", false
	}
	m, _ := v.(map[string]any)
	to, ok := m["target"].(string)
	return to, ok
}

// judgeRuleset lists the unsafe expressions of a parsed ruleset; xtText
// gives a rule's text form (nft -a list ruleset), for the xtables matches
// whose options the JSON leaves out.
func judgeRuleset(tables map[string]*nftTable, xtText func(family, table, chain string, handle int) (string, bool)) *judged {
	shared := &judged{}
	keys := make([]string, 0, len(tables))
	for k := range tables {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		t := tables[k]
		j := &judge{t: t, xtText: xtText, dynamic: t.dynamicSets(), shared: shared}
		reach := t.reaches()
		for _, chain := range t.order {
			j.estGone = false
			for _, r := range t.rules[chain] {
				switch reach[chain] {
				case everyPacket:
					j.rule(chain, r)
				case firstPacket:
					j.firstPacketRule(chain, r)
				}
			}
		}
	}
	shared.found = append(shared.found, shared.markFindings()...)
	return shared
}

// dynamicSets are the sets of t whose contents change without a commit:
// updated from the packet path (set and meter statements), or with
// elements that time out.
func (t *nftTable) dynamicSets() map[string]bool {
	out := map[string]bool{}
	for name, s := range t.sets {
		b, _ := json.Marshal([]any{s.Flags, s.Elem})
		if s.Timeout != nil || strings.Contains(string(b), `"timeout"`) || strings.Contains(string(b), `"dynamic"`) ||
			strings.Contains(string(b), `"expires"`) {
			out[name] = true
		}
	}
	for _, rules := range t.rules {
		for _, r := range rules {
			for _, st := range r.Expr {
				kind, v := single(st)
				m, _ := v.(map[string]any)
				switch kind {
				case "set":
					if name, ok := m["set"].(string); ok {
						out[strings.TrimPrefix(name, "@")] = true
					}
				case "meter":
					if name, ok := m["name"].(string); ok {
						out[name] = true
					}
				}
			}
		}
	}
	return out
}

// single is the one key and value of a JSON object {"kind": value}; ""
// for anything else.
func single(v any) (string, any) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return "", nil
	}
	for k, e := range m {
		return k, e
	}
	return "", nil
}
