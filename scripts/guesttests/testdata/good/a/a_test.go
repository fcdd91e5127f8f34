package a

import "testing"

// TestOne needs the old kernel.
//
// guest: why one
func TestOne(t *testing.T) {}

// guest: why two
func TestTwo(t *testing.T) {}

// TestHost runs on the host only.
func TestHost(t *testing.T) {}
