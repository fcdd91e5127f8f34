package schema

// Placement is where each role runs; NIC is -1 when the NIC is left alone
// (its poll runs on the CPU that sends into the wire: the senders').
type Placement struct {
	Sender, Receiver, Falcon []int
	NIC                      int
}

// CalibrateFormat is the version of the calibrate preset's method: falcon
// sim refuses a file of another (the cases and what they stand for).
const CalibrateFormat = 1

// Placement is the roles of a config.
func (c Config) Placement() Placement {
	p := Placement{Sender: c.SenderCPUs, Receiver: c.ReceiverCPUs, Falcon: c.FalconCPUs, NIC: -1}
	if c.NICCPU != nil {
		p.NIC = *c.NICCPU
	}
	return p
}
