package agent

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
)

// judge judges the rules of one table; shared holds what spans tables.
type judge struct {
	t       *nftTable
	xtText  func(family, table, chain string, handle int) (string, bool)
	dynamic map[string]bool
	shared  *judged
	// estGone: an earlier rule of the chain being judged accepts every
	// established packet (ct state established,related accept), so none
	// reaches the rules after it.
	estGone bool
}

// judged is what the judge found in a whole ruleset.
type judged struct {
	found []finding
	// estAccepts: some rule accepts established packets of a flow before
	// the rules its new packets went through (ct state established
	// accept); markSetters then make the paths differ in the marks they
	// leave for later base chains.
	estAccepts  bool
	markSetters []finding
	// nfacct: xt nfacct matches, which match every packet unless their
	// accounting object has a quota (the JSON names no object).
	nfacct []finding
	// queues: queue statements no established packet reaches; safe only
	// while the fast path carries established connections alone (see
	// queue).
	queues []finding
}

func (j *judge) add(chain, what, why string) {
	j.shared.found = append(j.shared.found, finding{j.t.name, chain, what, why})
}

// firstPacketRule judges a rule that sees a connection's first packet
// only: whatever it decides holds for the connection. Only what reaches
// past the connection is unsafe: zones (later packets are tracked in
// them), and sets it fills (their per-packet readers are judged).
func (j *judge) firstPacketRule(chain string, r nftRule) {
	for _, st := range r.Expr {
		kind, v := single(st)
		m, _ := v.(map[string]any)
		switch {
		case kind == "mangle" && isCt(m["key"], "zone"):
			j.add(chain, "ct zone set", whyZone)
		case kind == "xt" && m["name"] == "CT":
			j.add(chain, "xt target CT", whyZone)
		}
	}
}

// verdict is a rule's verdict: kind "" where the packet goes on.
type verdict struct{ kind, to string }

func ruleVerdict(r nftRule) verdict {
	if len(r.Expr) == 0 {
		return verdict{}
	}
	kind, v := single(r.Expr[len(r.Expr)-1])
	switch kind {
	case "accept", "drop", "reject", "return", "continue":
		return verdict{kind: kind}
	}
	if to, ok := jumpTarget(kind, v); ok {
		return verdict{kind: kind, to: to}
	}
	return verdict{}
}

// stateCond is what a rule's ct state conditions match: new packets,
// established ones.
type stateCond struct{ new, est bool }

// rule judges a rule that sees every packet of a flow.
func (j *judge) rule(chain string, r nftRule) {
	if toLoopback(r) {
		return
	}
	cond := stateCond{true, true}
	sideEffect := false
	// stateOnly: the rule matches by ct state alone, so it takes every
	// packet of the states it names.
	stateOnly, vmapEst := true, false
	for _, st := range r.Expr {
		kind, v := single(st)
		m, _ := v.(map[string]any)
		stateOnly = stateOnly && (kind == "counter" || kind == "accept" || isCt(m["left"], "state") || isCt(m["key"], "state"))
		switch kind {
		case "accept", "drop", "reject", "continue", "return", "jump", "goto", "counter", "log", "notrack":
			// counter and log: fast packets are not counted or logged
			// (docs/fastpath.md#policy). notrack applies alike to every
			// packet its matches select.
		case "match":
			j.match(chain, v, &cond)
		case "vmap":
			vmapEst = j.vmap(chain, v)
		case "queue":
			j.queue(chain, cond)
		case "mangle":
			sideEffect = true
			j.mangle(chain, v)
		case "xt":
			j.xt(chain, r, v, &cond, &sideEffect)
		default:
			what, why := describeStmt(kind, v)
			j.add(chain, what, why)
		}
	}
	if cond.new != cond.est {
		v := ruleVerdict(r)
		newV, estV := verdict{}, verdict{}
		if cond.new {
			newV = v
		} else {
			estV = v
		}
		j.paths(chain, newV, estV, sideEffect, strings.TrimSpace("ct state … "+v.kind+" "+v.to))
	}
	if stateOnly && (vmapEst || cond.est && !cond.new && ruleVerdict(r).kind == "accept") {
		j.estGone = true
	}
}

// queue judges a queue statement: the verdict of a program in user space,
// per packet. Only one that no established packet reaches passes: after a
// rule of its chain that accepts them all, or under a ct state condition
// that excludes them (kube-network-policies' first packets of a
// connection). The fast path then carries only connections conntrack has
// ESTABLISHED, UDP ones too (judged.queues), and every packet of those is
// established: the queue would never have seen one it carries.
func (j *judge) queue(chain string, cond stateCond) {
	if cond.est && !j.estGone {
		j.add(chain, "queue", whyVaries)
		return
	}
	j.shared.queues = append(j.shared.queues, finding{j.t.name, chain, "queue", "sees no established packet"})
}

// paths judges a ct state condition that sends a flow's new and its
// established packets different ways. Within a flow conntrack's state
// only goes from new to established (a UDP flow is new until its first
// reply, which takes the slow path and may come after the flow was
// cached); related and untracked hold for the whole connection, and
// invalid packets of a cached flow are those conntrack would find
// out of window, which it does not for the flows the fast path keeps
// (liberal TCP). So a cached flow's later packets may be established
// where the packet it was learned from was new. Safe are the forms where
// an established packet still ends accepted: accepted earlier (ct state
// established accept), or spared a path that can only refuse (ct state
// new drop, ct state new jump to chains that never accept nor change the
// packet). Anything else may drop an established packet the fast path
// would deliver.
func (j *judge) paths(chain string, newV, estV verdict, sideEffect bool, what string) {
	switch {
	case sideEffect:
	case newV == estV:
		return
	case estV.kind == "accept":
		j.shared.estAccepts = true
		return
	case estV.kind != "":
	case newV.kind == "drop" || newV.kind == "reject":
		return
	case newV.kind == "jump" && j.refusesOnly(newV.to, map[string]bool{}):
		return
	}
	j.add(chain, what, whyPaths)
}

// refusesOnly: chain and the chains it jumps to can only drop, reject or
// let a packet go on, and change nothing.
func (j *judge) refusesOnly(chain string, seen map[string]bool) bool {
	if seen[chain] {
		return true
	}
	seen[chain] = true
	for _, r := range j.t.rules[chain] {
		for _, st := range r.Expr {
			kind, v := single(st)
			m, _ := v.(map[string]any)
			switch kind {
			case "match", "counter", "log", "drop", "reject", "return", "continue":
			case "xt":
				if m["type"] != "match" && m["name"] != "REJECT" {
					return false
				}
			case "jump":
				if to, _ := jumpTarget(kind, v); !j.refusesOnly(to, seen) {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

func (j *judge) match(chain string, v any, cond *stateCond) {
	m, _ := v.(map[string]any)
	switch left := m["left"]; {
	case (isCt(left, "state") || isCt(left, "status")) && len(strs(m["right"])) == 0:
		j.add(chain, describeExpr(left), whyUnknown)
	case isCt(left, "state"):
		j.ctState(chain, m["op"], strs(m["right"]), cond)
	case isCt(left, "status"):
		j.ctStatus(chain, strs(m["right"]))
	default:
		j.flowConst(chain, left)
		j.flowConst(chain, m["right"])
	}
}

// ctState narrows cond by a ct state match.
func (j *judge) ctState(chain string, op any, states []string, cond *stateCond) {
	if op != "==" && op != "in" && op != "!=" {
		j.add(chain, fmt.Sprintf("ct state %v", op), whyUnknown)
		return
	}
	neg := op == "!="
	cond.new = cond.new && slices.Contains(states, "new") != neg
	cond.est = cond.est && slices.Contains(states, "established") != neg
}

// ctStatus: of conntrack's status bits only these are set once for a
// connection, before its first packet passes; seen-reply, assured and
// the others change as it runs.
func (j *judge) ctStatus(chain string, bits []string) {
	for _, b := range bits {
		if b != "expected" && b != "snat" && b != "dnat" {
			j.add(chain, "ct status "+b, whyVaries)
		}
	}
}

// vmap judges a verdict map; est: it maps ct state established to
// accept.
func (j *judge) vmap(chain string, v any) (est bool) {
	m, _ := v.(map[string]any)
	if !isCt(m["key"], "state") {
		j.flowConst(chain, m["key"])
		j.flowConst(chain, m["data"])
		return false
	}
	// ct state vmap { established : accept, new : jump x, ... }
	var newV, estV verdict
	_, elems := single(m["data"])
	list, ok := elems.([]any)
	if !ok {
		j.add(chain, "ct state vmap", whyUnknown)
		return false
	}
	for _, e := range list {
		pair, _ := e.([]any)
		if len(pair) != 2 {
			j.add(chain, "ct state vmap", whyUnknown)
			return false
		}
		kind, to := single(pair[1])
		t, _ := jumpTarget(kind, to)
		for _, s := range strs(pair[0]) {
			switch s {
			case "new":
				newV = verdict{kind, t}
			case "established":
				estV = verdict{kind, t}
			}
		}
	}
	j.paths(chain, newV, estV, false, "ct state vmap")
	return estV.kind == "accept"
}

func (j *judge) mangle(chain string, v any) {
	m, _ := v.(map[string]any)
	switch key := m["key"]; {
	case isMeta(key, "mark"), isCt(key, "mark"), isCt(key, "label"):
		// Marks are not reproduced on fast packets (KNOWN_ISSUES.md);
		// one a flow's packets all get alike decides alike later.
		j.flowConst(chain, m["value"])
		kind, e := single(key)
		k, _ := e.(map[string]any)
		j.shared.markSetters = append(j.shared.markSetters, finding{j.t.name, chain, fmt.Sprintf("%s %v set", kind, k["key"]), whyMarks})
	case isCt(key, "zone"):
		j.add(chain, "ct zone set", whyZone)
	default:
		j.add(chain, describeExpr(key)+" set", whyUnknown)
	}
}

// xtFlowConst are the xtables matches and targets (as iptables-nft
// leaves them, options unread) that decide alike for a flow's packets:
// comments, marks read, addresses, ports and devices (route and link
// changes are announced: addrtype reads the routes, physdev and devgroup
// the links), ICMP (never a fast flow), logging and rejecting.
var xtFlowConst = map[string]bool{
	"match comment": true, "match mark": true, "match connmark": true, "match addrtype": true,
	"match physdev": true, "match pkttype": true, "match multiport": true, "match iprange": true,
	"match icmp": true, "match devgroup": true,
	"target LOG": true, "target NFLOG": true, "target REJECT": true,
}

// xtVaries are xtables matches and targets known to decide per packet.
var xtVaries = map[string]bool{
	"limit": true, "hashlimit": true, "connlimit": true, "quota": true, "time": true, "statistic": true,
	"recent": true, "string": true, "u32": true, "length": true, "bpf": true, "connbytes": true,
	"dscp": true, "tos": true, "ttl": true, "ecn": true, "tcpmss": true, "NFQUEUE": true, "QUEUE": true,
}

func (j *judge) xt(chain string, r nftRule, v any, cond *stateCond, sideEffect *bool) {
	m, _ := v.(map[string]any)
	typ, _ := m["type"].(string)
	name, _ := m["name"].(string)
	what := "xt " + typ + " " + name
	switch {
	case xtFlowConst[typ+" "+name]:
	case typ == "target" && (name == "MARK" || name == "CONNMARK"):
		*sideEffect = true
		j.shared.markSetters = append(j.shared.markSetters, finding{j.t.name, chain, what, whyMarks})
	case typ == "match" && (name == "conntrack" || name == "state"):
		j.xtConntrack(chain, r, what, cond)
	case typ == "match" && name == "nfacct":
		j.shared.nfacct = append(j.shared.nfacct, finding{j.t.name, chain, what, "its accounting object has a quota"})
	case name == "set" || name == "SET":
		j.add(chain, what, "ipset contents change without an nftables commit")
	case name == "CT":
		j.add(chain, what, whyZone)
	case xtVaries[name]:
		j.add(chain, what, whyVaries)
	default:
		j.add(chain, what, whyUnknown)
	}
}

// ctClause is one ct clause of a rule's text form: key, "!=", value.
var ctClause = regexp.MustCompile(`(?:^|\s)ct ([a-z-]+)( !=? )?(?: ?([^\s]+))?`)

// xtUntranslated: nft wrote a conntrack or state match untranslated.
var xtUntranslated = regexp.MustCompile(`xt match "?(conntrack|state)\b`)

// xtConntrack reads an xt conntrack or state match's options from the
// rule's text form, which nft writes translated: the JSON names the
// match alone.
func (j *judge) xtConntrack(chain string, r nftRule, what string, cond *stateCond) {
	text, ok := j.xtText(r.Family, r.Table, r.Chain, r.Handle)
	if !ok || xtUntranslated.MatchString(text) {
		j.add(chain, what, "its options could not be read")
		return
	}
	clauses := ctClause.FindAllStringSubmatch(text, -1)
	// nft 1.0.6 writes --ctstate with the virtual states SNAT or DNAT as
	// ct status alone, the states and any negation lost.
	if !slices.ContainsFunc(clauses, func(c []string) bool { return c[1] == "state" }) &&
		slices.ContainsFunc(clauses, func(c []string) bool { return c[1] == "status" }) {
		j.add(chain, what, "nft's text of its states is ambiguous")
		return
	}
	for _, c := range clauses {
		key, neg, val := c[1], c[2] != "", strings.Split(c[3], ",")
		switch key {
		case "state":
			op := "in"
			if neg {
				op = "!="
			}
			j.ctState(chain, op, val, cond)
		case "status":
			j.ctStatus(chain, val)
		case "direction", "original", "reply", "l3proto", "protocol", "mark":
		default:
			j.add(chain, "ct "+key, whyVaries)
		}
	}
}

// markFindings: with an early accept of established packets, the rules
// setting marks are skipped by established packets and not by new ones.
func (s *judged) markFindings() []finding {
	if !s.estAccepts {
		return nil
	}
	return s.markSetters
}

// describeStmt names a statement outside the allowlist and says why.
func describeStmt(kind string, v any) (what, why string) {
	m, _ := v.(map[string]any)
	switch kind {
	case "limit", "quota":
		if name, ok := v.(string); ok {
			return kind + " name " + name, whyVaries
		}
		return kind, whyVaries
	case "ct count":
		return kind, whyVaries
	case "set":
		return fmt.Sprintf("%v %v", m["op"], m["set"]), "updates a set per packet; fast packets do not"
	case "meter":
		return fmt.Sprintf("meter %v", m["name"]), "updates a set per packet; fast packets do not"
	case "ct helper":
		return "ct helper set", whyHelper
	}
	return kind, whyUnknown
}

// toLoopback says whether r matches only packets to 127.0.0.0/8: none the
// fast path carries, neither the containers' flows nor the VXLAN packets
// between nodes (kube-proxy's rule against reaching the host's localnet
// through a node port).
func toLoopback(r nftRule) bool {
	for _, st := range r.Expr {
		kind, v := single(st)
		m, _ := v.(map[string]any)
		if kind != "match" || m["op"] != "==" {
			continue
		}
		p, _ := m["left"].(map[string]any)["payload"].(map[string]any)
		if p == nil || p["protocol"] != "ip" || p["field"] != "daddr" {
			continue
		}
		addr, bits := "", 32
		switch right := m["right"].(type) {
		case string:
			addr = right
		case map[string]any:
			pf, _ := right["prefix"].(map[string]any)
			addr = str(pf["addr"])
			if l, ok := pf["len"].(float64); ok {
				bits = int(l)
			}
		}
		if a, err := netip.ParseAddr(addr); err == nil && a.Is4() && bits >= 8 && netip.MustParsePrefix("127.0.0.0/8").Contains(a) {
			return true
		}
	}
	return false
}
