package agent

import (
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestSameSettingsSeesEveryField: a change to any setting, however new,
// makes enable act (sameSettings false); the plumbing that the state file
// does not hold (json:"-") does not, nor does a CPU list spelled in
// another order.
func TestSameSettingsSeesEveryField(t *testing.T) {
	base := DefaultOptions()
	base.Netns = "ns1"
	n := 0
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		for i := range v.NumField() {
			f, sf := v.Field(i), v.Type().Field(i)
			if f.Kind() == reflect.Struct && sf.Anonymous {
				walk(f, path+sf.Name+".")
				continue
			}
			o := base
			field := reflect.ValueOf(&o).Elem().FieldByIndex(fieldIndex(reflect.TypeOf(o), sf.Name))
			if !setOther(field) {
				t.Errorf("%s%s: a type the test cannot change", path, sf.Name)
				continue
			}
			n++
			if got, want := sameSettings(base, o), sf.Tag.Get("json") == "-"; got != want {
				t.Errorf("%s%s changed: sameSettings %v, want %v", path, sf.Name, got, want)
			}
		}
	}
	walk(reflect.ValueOf(base), "")
	if n < 20 {
		t.Errorf("only %d fields seen", n)
	}
	a, b := base, base
	a.CPUs, b.CPUs = []int{3, 1, 2}, []int{1, 2, 3, 3}
	a.Devices, b.Devices = nil, []string{}
	if !sameSettings(a, b) {
		t.Error("one CPU list in two spellings, or no devices as nil and as empty, differ")
	}
}

func fieldIndex(t reflect.Type, name string) []int {
	f, _ := t.FieldByName(name)
	return f.Index
}

// setOther gives f a value other than the one it has.
func setOther(f reflect.Value) bool {
	switch f.Interface().(type) {
	case string:
		f.SetString(f.String() + "x")
	case bool:
		f.SetBool(!f.Bool())
	case int, time.Duration:
		f.SetInt(f.Int() + 1)
	case uint64:
		f.SetUint(f.Uint() + 1)
	case []int:
		f.Set(reflect.ValueOf(append(f.Interface().([]int), 7)))
	case []string:
		f.Set(reflect.ValueOf(append(f.Interface().([]string), "x")))
	case *slog.Logger:
		f.Set(reflect.ValueOf(slog.New(slog.DiscardHandler)))
	default:
		return false
	}
	return true
}

// TestSettingsSynopsis: every setting that takes a value says what the
// value looks like, so the usage line shows no bare flag.
func TestSettingsSynopsis(t *testing.T) {
	for _, s := range settings {
		if s.boolean != (s.arg == "") {
			t.Errorf("--%s: boolean %v but synopsis value %q", s.name, s.boolean, s.arg)
		}
		if !strings.Contains(Synopsis(), "[--"+s.name) {
			t.Errorf("--%s missing from %q", s.name, Synopsis())
		}
	}
}
