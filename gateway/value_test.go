package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestReadValue(t *testing.T) {
	tests := []struct {
		name, in string
		err      string // part of the error; "" when it must read
	}{
		{"object", ` {"a":[1,-2.5e3,true,false,null,"x"],"b":{}} `, ""},
		{"escapes", `"\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"`, ""},
		{"empty containers", `[[],{},[{}]]`, ""},
		{"a member twice", `{"a":1,"a":2}`, `member "a" is given twice`},
		{"a member in another case", `{"method":1,"Method":2}`, `member "Method" is given twice`},
		{"a member folded (long s)", `{"params":1,"paramſ":2}`, "given twice"},
		{"a member folded (Kelvin)", `{"k":1,"\u212a":2}`, "given twice"},
		{"a member full width", `{"name":1,"ｎａｍｅ":2}`, "given twice"},
		{"a member with an invisible character", `{"name":1,"na\u200dme":2}`, "given twice"},
		{"a member spelled with escapes", `{"name":1,"\u006eame":2}`, "given twice"},
		{"many members, one twice", `{` + members(40) + `,"m7":0}`, `member "m7" is given twice`},
		{"the same name in two objects", `{"a":{"x":1},"b":{"x":2}}`, ""},
		{"invalid UTF-8", "\"\xff\"", "not valid UTF-8"},
		{"an encoded surrogate", "\"\xed\xa0\x80\"", "not valid UTF-8"},
		{"an overlong encoding", "\"\xc0\xaf\"", "not valid UTF-8"},
		{"a lone high surrogate", `"\ud800"`, "half a surrogate pair"},
		{"a lone low surrogate", `"\udc00"`, "half a surrogate pair"},
		{"a high surrogate and no low one", `"\ud800\u0041"`, "half a surrogate pair"},
		{"a control character", "\"a\tb\"", "control character"},
		{"a bad escape", `"\x"`, "not a JSON escape"},
		{"a short \\u", `"\u12"`, "four hex digits"},
		{"an unclosed string", `"abc`, "not closed"},
		{"a number out of range", `1e400`, "beyond the range"},
		{"a negative number out of range", `-1e309`, "beyond the range"},
		{"a number that underflows", `1e-400`, ""},
		{"a leading zero", `01`, `'1' follows`},
		{"a bare point", `1.`, "after its point"},
		{"NaN", `NaN`, "not the start"},
		{"Infinity", `[Infinity]`, "not the start"},
		{"a trailing comma", `[1,]`, "not the start"},
		{"a trailing comma in an object", `{"a":1,}`, "member name"},
		{"single quotes", `{'a':1}`, "member name"},
		{"data after", `{} {}`, "follows the JSON value"},
		{"a BOM", "\xef\xbb\xbf{}", "not the start"},
		{"nothing", ``, "ends too early"},
		{"too deep", strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), "nested more than"},
		{"deep enough", strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth), ""},
		{"far too deep, without recursion", strings.Repeat("[", 4<<20), "nested more than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadValue([]byte(tt.in))
			switch {
			case tt.err == "" && err != nil:
				t.Errorf("ReadValue(%.60q) = %v, want it read", tt.in, err)
			case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
				t.Errorf("ReadValue(%.60q) = %v, want an error with %q", tt.in, err, tt.err)
			}
			var re *ReadError
			if err != nil && !errors.As(err, &re) {
				t.Errorf("error %v is not a *ReadError", err)
			}
		})
	}
}

func members(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"m` + itoa(i) + `":` + itoa(i))
	}
	return b.String()
}

func TestValueNavigation(t *testing.T) {
	v, err := ReadValue([]byte(`{"a" : [ 1 , "t\u00e9" , {"b":true} ] , "\u0063":null, "n":-7}`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range v.Members() {
		names = append(names, k)
	}
	if want := []string{"a", "c", "n"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Members = %q, want %q", names, want)
	}
	if b, ok := v.Path("a"); !ok || b.Kind() != Array {
		t.Errorf("Path(a) = %v, want the array", b)
	}
	var elems []string
	a, _ := v.Get("a")
	for e := range a.Elements() {
		elems = append(elems, string(e.Raw()))
	}
	if want := []string{`1`, `"t\u00e9"`, `{"b":true}`}; !reflect.DeepEqual(elems, want) {
		t.Errorf("Elements = %q, want %q", elems, want)
	}
	if c, ok := v.Get("c"); !ok || c.Kind() != Null {
		t.Errorf(`Get("c") = %v, %v, want null (the name was escaped)`, c, ok)
	}
	if n, _ := v.Get("n"); func() bool { i, ok := n.Int(); return !ok || i != -7 }() {
		t.Errorf("n = %s, want -7", n.Raw())
	}
	want := map[string]any{"a": []any{json.Number("1"), "té", map[string]any{"b": true}}, "c": nil, "n": json.Number("-7")}
	if got := v.Interface(); !reflect.DeepEqual(got, want) {
		t.Errorf("Interface() = %#v, want %#v", got, want)
	}
}

func TestWithMember(t *testing.T) {
	v, _ := ReadValue([]byte(`{"a":1, "b" : {"x":[1]} ,"c":3}`))
	got, ok := withMember(v, "b", []byte(`{"y":2}`))
	if want := `{"a":1, "b" : {"y":2} ,"c":3}`; !ok || string(got) != want {
		t.Errorf("withMember = %s, want %s", got, want)
	}
	if _, ok := withMember(v, "z", []byte(`1`)); ok {
		t.Error("withMember of a missing member succeeded")
	}
}

// What ReadValue accepts, encoding/json reads as the same value; and what
// encoding/json refuses, ReadValue refuses.
func FuzzReadValue(f *testing.F) {
	for _, s := range []string{
		`{"a":[1,2,{"b":null}],"c":"\u00e9"}`, `{"a":1,"A":2}`, `"\ud800"`, `[1e400]`, `{"a":1,"a":1}`,
		`{"ſ":1,"s":2}`, "\"\xff\"", `[-0, 0.5e-3, 123456789012345678901234567890]`, `{"\u0000":"\u001f"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ReadValue(data)
		var std any
		stdErr := json.Unmarshal(data, &std)
		if err != nil {
			return
		}
		if stdErr != nil {
			t.Fatalf("ReadValue accepted %q, which encoding/json refuses: %v", data, stdErr)
		}
		if !utf8.Valid(v.Raw()) {
			t.Fatalf("ReadValue accepted invalid UTF-8: %q", data)
		}
		if !sameValue(v.Interface(), std) {
			t.Fatalf("%q: ReadValue reads %#v, encoding/json %#v", data, v.Interface(), std)
		}
		// And the value it reads is the same when written back and read again.
		again, err := json.Marshal(v.Interface())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ReadValue(again); err != nil && !bytes.Contains(again, []byte(`\ufffd`)) {
			t.Fatalf("ReadValue refuses %s, its own reading of %q, written back: %v", again, data, err)
		}
	})
}

// sameValue compares a ReadValue tree with an encoding/json one (numbers
// as float64).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case json.Number:
		f, err := x.Float64()
		g, ok := b.(float64)
		return err == nil && ok && (f == g || math.IsNaN(f) && math.IsNaN(g))
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !sameValue(x[k], y[k]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}

func BenchmarkReadValue(b *testing.B) {
	for _, size := range []int{100, 10 << 10, 1 << 20} {
		msg := benchMessage(size)
		b.Run(itoa(size), func(b *testing.B) {
			b.SetBytes(int64(len(msg)))
			for b.Loop() {
				if _, _, err := parseFrame(msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchMessage is a tools/call answer of about size bytes: a text result,
// as most are.
func benchMessage(size int) []byte {
	text := strings.Repeat("The quick brown fox jumps over the lazy dog. ", size/45+1)[:size]
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "result": map[string]any{
		"content": []any{map[string]any{"type": "text", "text": text}}, "isError": false}})
	return b
}
