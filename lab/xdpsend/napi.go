package xdpsend

import (
	"fmt"

	"github.com/safchain/ethtool"

	"github.com/falconnet/falcon/internal/netns"
)

const featGRO = "rx-gro"

// ReceiverNAPI makes the far end of the wire (dev in namespace ns, a veth)
// take frames sent to it by XDP: veth queues them for its NAPI poll, which
// runs only with an XDP program attached or GRO on, and drops them
// otherwise. It turns GRO on (a real NIC's default) and returns the undo,
// which puts the old value back.
func ReceiverNAPI(ns, dev string) (undo func() error, err error) {
	set := func(on bool) (was bool, err error) {
		err = netns.Do(ns, func() error {
			et, err := ethtool.NewEthtool()
			if err != nil {
				return err
			}
			defer et.Close()
			f, err := et.Features(dev)
			if err != nil {
				return fmt.Errorf("features of %s: %w", dev, err)
			}
			if was = f[featGRO]; was == on {
				return nil
			}
			if err := et.Change(dev, map[string]bool{featGRO: on}); err != nil {
				return fmt.Errorf("ethtool -K %s gro %v: %w", dev, on, err)
			}
			return nil
		})
		return was, err
	}
	was, err := set(true)
	if err != nil {
		return nil, err
	}
	return func() error {
		_, err := set(was)
		return err
	}, nil
}
