package steer

// Micro is one flow's micro-flow state at the split hook, the twin of
// struct mflow's idx and left in bpf/mflow.h: the index in the split set
// of the current micro-flow and the packets still to go there.
type Micro struct {
	Idx  uint32
	Left uint64
}

// NewMicro is a new elephant's state: its first micro-flow goes to the CPU
// after the one its hash names, so elephants start apart.
func NewMicro(flowhash uint32) Micro { return Micro{Idx: Hash32(flowhash)} }

// Next is the split-set index of the flow's next packet (mflow_index):
// the current micro-flow's until batch packets went there, then the next
// one's (started).
func (m *Micro) Next(cpus []int, load func(cpu int) uint32, threshold uint32, batch uint64) (idx int, started bool) {
	n := uint32(len(cpus))
	if m.Left == 0 {
		m.Idx = uint32(NextBatchIndex(cpus, load, threshold, int(m.Idx%n)))
		m.Left = batch
		started = true
	}
	m.Left--
	return int(m.Idx % n), started
}

// NextBatchIndex is the split-set index of the micro-flow after the one on
// from (next_batch_index): the next CPU in turn that is under the
// threshold, the current one last, or simply the next when none is.
func NextBatchIndex(cpus []int, load func(cpu int) uint32, threshold uint32, from int) int {
	n := len(cpus)
	for k := 1; k <= n; k++ {
		if i := (from + k) % n; load(cpus[i]) < threshold {
			return i
		}
	}
	return (from + 1) % n
}

// Elephant is the verdict at the end of a rate window (mflow_track): bytes
// in span nanoseconds reach elephantBytes per window of windowNs.
func Elephant(bytes, spanNs, elephantBytes, windowNs uint64) bool {
	return bytes*windowNs >= elephantBytes*spanNs
}
