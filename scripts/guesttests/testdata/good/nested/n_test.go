package n

import "testing"

// guest: another module's
func TestNested(t *testing.T) {}
