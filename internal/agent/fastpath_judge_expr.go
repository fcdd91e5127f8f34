package agent

import (
	"fmt"
	"slices"
	"strings"
)

// flowPayload are the header fields that hold one value for every packet
// of a flow: its addresses, protocol and ports (the flow's key), and the
// inner Ethernet addresses (learned per flow). ICMP is never a fast flow,
// and nft puts a protocol check before its fields.
var flowPayload = map[string][]string{
	"ip":      {"saddr", "daddr", "protocol", "version"},
	"ip6":     {"saddr", "daddr", "nexthdr", "version"},
	"tcp":     {"sport", "dport"},
	"udp":     {"sport", "dport"},
	"udplite": {"sport", "dport"},
	"th":      {"sport", "dport"},
	"sctp":    {"sport", "dport"},
	"dccp":    {"sport", "dport"},
	"icmp":    {"type", "code"},
	"icmpv6":  {"type", "code"},
	"ether":   {"saddr", "daddr", "type"},
}

// flowMeta are the meta keys alike for a flow's packets: its devices (a
// link's change is announced), protocols, packet type, and the mark
// (set alike for them where rules set it: see mangle). skuid and skgid
// are the owner of the packet's socket if the socket is the rules' own
// namespace's (nft_meta_get_eval_skugid skips others'): the fast path
// carries containers' traffic through the host and its VXLAN packets,
// whose socket, if any, is a container's, so they match for none of its
// packets.
var flowMeta = []string{
	"iif", "oif", "iifname", "oifname", "iiftype", "oiftype", "iifgroup", "oifgroup", "iifkind", "oifkind",
	"ibrname", "obrname", "ibridgename", "obridgename", "sdif", "sdifname",
	"mark", "protocol", "nfproto", "l4proto", "pkttype", "skuid", "skgid",
}

// flowCt are the conntrack keys set for a connection as it starts: its
// tuples, direction, zone, id, and the marks and labels rules give it.
// (state and status are judged by their values; bytes, packets, avgpkt
// and expiration grow or shrink with every packet.)
var flowCt = []string{
	"direction", "mark", "label", "l3proto", "protocol", "saddr", "daddr", "proto-src", "proto-dst",
	"zone", "id",
}

// exprVaries are expressions known to differ between a flow's packets.
var exprVaries = []string{"numgen", "exthdr", "tcp option", "ip option", "sctp chunk", "dccp option", "socket", "osf"}

// flowConst records what in expression e can differ between two packets
// of a flow. Routes (fib, rt) are announced when they change.
func (j *judge) flowConst(chain string, e any) {
	switch e := e.(type) {
	case string:
		if name, ok := strings.CutPrefix(e, "@"); ok && j.dynamic[name] {
			j.add(chain, "@"+name, whyUnannounced)
		}
	case []any:
		for _, x := range e {
			j.flowConst(chain, x)
		}
	case map[string]any:
		kind, v := single(e)
		m, _ := v.(map[string]any)
		switch kind {
		case "payload":
			if !slices.Contains(flowPayload[str(m["protocol"])], str(m["field"])) {
				j.add(chain, describeExpr(e), whyVaries)
			}
		case "meta":
			if !slices.Contains(flowMeta, str(m["key"])) {
				j.add(chain, describeExpr(e), whyVaries)
			}
		case "ct":
			if !slices.Contains(flowCt, str(m["key"])) {
				j.add(chain, describeExpr(e), whyVaries)
			}
		case "fib", "rt", "symhash", "prefix", "range", "accept", "drop", "continue", "return", "jump", "goto":
		case "jhash":
			j.flowConst(chain, m["expr"])
		case "&", "|", "^", "<<", ">>", "concat", "set":
			j.flowConst(chain, v)
		case "map":
			j.flowConst(chain, m["key"])
			j.flowConst(chain, m["data"])
		case "elem":
			j.flowConst(chain, m["val"])
		default:
			why := whyUnknown
			if slices.Contains(exprVaries, kind) {
				why = whyVaries
			}
			j.add(chain, describeExpr(e), why)
		}
	}
}

// describeExpr names an expression as nft writes it, roughly.
func describeExpr(e any) string {
	kind, v := single(e)
	m, _ := v.(map[string]any)
	switch kind {
	case "payload":
		if base, ok := m["base"]; ok {
			return fmt.Sprintf("@%v,%v,%v", base, m["offset"], m["len"])
		}
		return fmt.Sprintf("%v %v", m["protocol"], m["field"])
	case "meta", "ct":
		return fmt.Sprintf("%s %v", kind, m["key"])
	case "":
		return fmt.Sprintf("%.40v", e)
	}
	return kind
}

// isCt: e is conntrack's key.
func isCt(e any, key string) bool {
	kind, v := single(e)
	m, _ := v.(map[string]any)
	return kind == "ct" && m["key"] == key
}

func isMeta(e any, key string) bool {
	kind, v := single(e)
	m, _ := v.(map[string]any)
	return kind == "meta" && m["key"] == key
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// strs are the strings of a match's right side: one, a list, or a set.
func strs(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, x := range v {
			out = append(out, strs(x)...)
		}
		return out
	case map[string]any:
		if kind, x := single(v); kind == "set" {
			return strs(x)
		}
	}
	return nil
}
