// Package seqcheck tells whether UDP flows arrive in order at a socket: a
// sender in one network namespace numbers every datagram of each flow, a
// receiver in another counts, per flow, the datagrams that arrive after a
// higher number (reordered) and the numbers that never arrive (lost). It
// observes what an application sees, so it checks the whole path.
package seqcheck

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HeaderLen is the numbered part of every datagram, big-endian:
//
//	0  sequence number in the flow (uint64, from 0); the stage tracer reads it
//	8  packets in the flow (uint64)
//	16 flows sent together (uint32)
//	20 this flow's index (uint32)
//	24 magic "FSEQ"
const HeaderLen = 28

var magic = [4]byte{'F', 'S', 'E', 'Q'}

type header struct {
	seq, total   uint64
	flows, index uint32
}

func (h header) put(b []byte) {
	binary.BigEndian.PutUint64(b[0:], h.seq)
	binary.BigEndian.PutUint64(b[8:], h.total)
	binary.BigEndian.PutUint32(b[16:], h.flows)
	binary.BigEndian.PutUint32(b[20:], h.index)
	copy(b[24:], magic[:])
}

var errNotSeq = errors.New("not a sequenced datagram")

func parse(b []byte) (header, error) {
	if len(b) < HeaderLen || [4]byte(b[24:28]) != magic {
		return header{}, errNotSeq
	}
	h := header{
		seq:   binary.BigEndian.Uint64(b[0:]),
		total: binary.BigEndian.Uint64(b[8:]),
		flows: binary.BigEndian.Uint32(b[16:]),
		index: binary.BigEndian.Uint32(b[20:]),
	}
	if h.total == 0 || h.seq >= h.total || h.total > maxPerFlow || h.index >= h.flows {
		return header{}, fmt.Errorf("%w: seq %d of %d, flow %d of %d", errNotSeq, h.seq, h.total, h.index, h.flows)
	}
	return h, nil
}

// maxPerFlow bounds the receiver's memory (a bit per packet per flow).
const maxPerFlow = 1 << 28
