package policy

// alwaysOn is the paper and static policies: falcon is on the path from
// the start and steers every packet by the datapath's per-packet choice
// (FALCON's Algorithm 1, or its first choice alone); it never stands down,
// so it takes no turns (Entry.Always).
type alwaysOn struct{}

func always(Params) Policy { return alwaysOn{} }

func (alwaysOn) Turn(Window) Verdict { return Verdict{} }
func (alwaysOn) Done(Verdict, error) {}
