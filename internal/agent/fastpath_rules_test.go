package agent

import (
	"slices"
	"testing"
)

// kubeProxy is a ruleset as kube-proxy (iptables mode, iptables-nft) and
// flannel leave a node's namespace, cut to what matters here.
const kubeProxy = `table ip filter {
	chain KUBE-FORWARD {
		ct state invalid xt match nfacct counter packets 0 bytes 0 drop
		xt match "comment" xt match "mark" counter packets 0 bytes 0 accept
	}
	chain FORWARD {
		type filter hook forward priority filter; policy accept;
		xt match "comment" counter packets 12 bytes 900 jump KUBE-FORWARD
	}
}
table ip nat {
	chain KUBE-SVC-X {
		xt match "comment" xt match "statistic" counter packets 0 bytes 0 jump KUBE-SEP-A
		counter packets 0 bytes 0 jump KUBE-SEP-B
	}
	chain PREROUTING {
		type nat hook prerouting priority dstnat; policy accept;
		counter packets 3 bytes 180 jump KUBE-SERVICES
	}
}
`

func TestUnsafeLines(t *testing.T) {
	for _, c := range []struct {
		name, rs string
		want     []string
	}{
		{"kube-proxy: nfacct holds no ct count, statistic only in nat", kubeProxy, nil},
		{"a rate limit in forward", "table inet t {\n\tchain fw {\n\t\ttype filter hook forward priority 0; policy accept;\n\t\tudp dport 53 limit rate 10/second accept\n\t}\n}\n",
			[]string{"udp dport 53 limit rate 10/second accept"}},
		{"statistic in a filter table", "table ip filter {\n\tchain FORWARD {\n\t\ttype filter hook forward priority filter; policy accept;\n\t\txt match \"statistic\" counter drop\n\t}\n}\n",
			[]string{`xt match "statistic" counter drop`}},
		{"a connection limit", "table inet t {\n\tchain in {\n\t\ttype filter hook input priority 0;\n\t\tct count over 10 drop\n\t}\n}\n",
			[]string{"ct count over 10 drop"}},
		{"a queue's name is no queue", "table inet t {\n\tchain fw {\n\t\ttype filter hook forward priority 0;\n\t\tjump myqueue_rules\n\t}\n}\n", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := unsafeLines(c.rs); !slices.Equal(got, c.want) {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
