package c_test

import "testing"

// guest: why
func TestC(t *testing.T) {}
