package m

import "testing"

func TestM(t *testing.T) {
	// guest: inside the body, it selects nothing
}
