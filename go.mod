module github.com/falconnet/falcon

go 1.26.8

require golang.org/x/sys v0.49.0

require (
	github.com/cilium/ebpf v0.22.0 // indirect
	github.com/safchain/ethtool v0.7.0 // indirect
	github.com/vishvananda/netlink v1.3.1 // indirect
	github.com/vishvananda/netns v0.0.5 // indirect
)
