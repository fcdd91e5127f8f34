package r

import "testing"

// guest:
func TestR(t *testing.T) {}
