package policy

// Actuator is what the engine may do to the datapath, and all a policy's
// verdicts come to. The agent's falcon mode implements it: coming back on
// the path attaches the hooks, the split programs and the ordering
// guard's, and sets RPS; standing down undoes each, every flow drained
// back inline first.
type Actuator interface {
	// SetLoad hands the datapath a load sample: busy percent by CPU, the
	// set's average and the sample's CLOCK_MONOTONIC time.
	SetLoad(perCPU []uint32, avg uint32, monotonicNs uint64) error
	// Steer: whether the datapath may move stages (engaged), on the path.
	Steer(on bool) error
	// StandDown takes falcon off the path; false where a flow did not
	// come back inline in time and it stayed attached, inline. why goes
	// to the log where not "".
	StandDown(why string) bool
	// StandUp puts falcon back on the path.
	StandUp(why string) error
}

// Sensors are the readings the engine takes from the mode.
type Sensors interface {
	// Path: off the path, and steering.
	Path() (stoodDown, engaged bool)
	// Netns: the namespaces whose sockets receive what falcon carries
	// (the containers', a host NIC's), whose deliveries the engine counts.
	Netns() []string
	// NICPackets: on the path, the packets the NIC hooks ran by CPU.
	NICPackets() (map[int]uint64, error)
}

// Mode is an Actuator with its Sensors.
type Mode interface {
	Actuator
	Sensors
}
