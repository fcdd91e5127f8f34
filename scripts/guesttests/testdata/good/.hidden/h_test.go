package h

import "testing"

// guest: not the module's
func TestHidden(t *testing.T) {}
