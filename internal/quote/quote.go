// Package quote quotes input for error messages without echoing all of
// it: a value of any length can come from a flag or a file, and an error
// that repeats 100 KB of it helps nobody and fills logs.
package quote

import (
	"strconv"
	"unicode/utf8"
)

// Max is how many bytes of a value an error message quotes.
const Max = 64

// Short quotes s as strconv.Quote does, but only its first Max bytes
// (never half a character), marking a cut with "…".
func Short(s string) string {
	if len(s) <= Max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cut(s)]) + "…"
}

// Prefix is s itself when it is short, else its first Max bytes and "…":
// for a value shown as written (key=value), unquoted.
func Prefix(s string) string {
	if len(s) <= Max {
		return s
	}
	return s[:cut(s)] + "…"
}

// cut is where to cut s, longer than Max: at Max, or before the character
// that straddles it.
func cut(s string) int {
	i := Max
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return i
}
