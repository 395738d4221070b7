package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/tlog"
)

// testKey is a fixed key: the Ed25519 key of 32 zero bytes of seed. Its
// values below are the spec's test vectors (docs/evidence.md).
var testKey = ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))

const (
	testPublicHex = "3b6a27bcceb6a42d62a3a8d02a6f0d73653215771de243a63ac048a18b59da29"
	testKeyID     = "139e3940e64b5491" // hex of SHA-256(public key)[:8]
)

func testPublic() ed25519.PublicKey { return testKey.Public().(ed25519.PublicKey) }

// sample returns a signed receipt entry and its bytes.
func sample(t testing.TB) (*Entry, []byte) {
	t.Helper()
	body, _ := json.Marshal(Receipt{
		Capability: "mcp.files.read_file", Server: "files", Tool: "read_file", Decision: Allow,
		Rule: "default:low", Client: Client{Name: "claude-code"}, Args: Commit(make([]byte, SaltSize), []byte(`{}`)),
	})
	e := &Entry{Log: "testlog", Index: 1, ID: "r-aaaaaaaaaaaaaaaaaaaa", Kind: KindReceipt,
		Time: "2025-06-30T12:00:00.123456789Z", Prev: FormatTreeHash(EmptyTreeHash), Body: body}
	data, err := Sign(e, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return e, data
}

func TestVectors(t *testing.T) {
	if got := hex.EncodeToString(testPublic()); got != testPublicHex {
		t.Fatalf("public key of the zero seed = %s, want %s", got, testPublicHex)
	}
	if got := KeyID(testPublic()); got != testKeyID {
		t.Errorf("KeyID = %s, want %s", got, testKeyID)
	}
	// SHA-256 of 32 zero bytes of salt and "hello".
	if got, want := Commit(make([]byte, SaltSize), []byte("hello")), "sha256:a41de667c15557cbd8acdd71ef0fef5dc73561374baed8330f8adb0e1424cd62"; got != want {
		t.Errorf("Commit = %s, want %s", got, want)
	}
	// The empty tree is SHA-256 of nothing, as RFC 6962 and tlog have it.
	if got, want := hex.EncodeToString(EmptyTreeHash[:]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"; got != want {
		t.Errorf("EmptyTreeHash = %s, want %s", got, want)
	}
	if h, _ := tlog.TreeHash(0, nil); h != EmptyTreeHash {
		t.Errorf("tlog.TreeHash(0) = %v, want EmptyTreeHash", h)
	}
}

// TestSigningInput checks the signature against the input the spec gives,
// built by hand: the prefix, then the canonical entry without its sig
// member.
func TestSigningInput(t *testing.T) {
	e, data := sample(t)
	re := regexp.MustCompile(`,"sig":"[^"]*"`)
	if n := len(re.FindAll(data, -1)); n != 1 {
		t.Fatalf("%d sig members in %s", n, data)
	}
	msg := append([]byte(SigningPrefix), re.ReplaceAll(data, nil)...)
	sig, _ := base64.StdEncoding.DecodeString(e.Sig)
	if !ed25519.Verify(testPublic(), msg, sig) {
		t.Errorf("the signature does not verify over %q", msg)
	}
	// The leaf is SHA-256(0x00 || entry), RFC 6962's leaf hash.
	want := sha256.Sum256(append([]byte{0}, data...))
	if LeafHash(data) != tlog.Hash(want) {
		t.Errorf("LeafHash is not SHA-256(0x00 || entry)")
	}
	// Members in the order RFC 8785 sorts them.
	if !regexp.MustCompile(`^\{"body":\{.*\},"id":"[^"]*","index":1,"key":"` + testKeyID + `","kind":"receipt","log":"testlog","prev":"[^"]*","sig":"[^"]*","time":"[^"]*","v":1\}$`).Match(data) {
		t.Errorf("signed entry is not in the expected canonical layout:\n%s", data)
	}
}

func TestSignParseVerify(t *testing.T) {
	e, data := sample(t)
	got, err := Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := canonicalize(e.Body)
	if got.ID != e.ID || got.Index != e.Index || got.Key != testKeyID || got.Sig != e.Sig || !bytes.Equal(got.Body, body) {
		t.Errorf("Parse(Sign(e)) = %+v, want %+v", got, e)
	}
	if err := Verify(got, testPublic()); err != nil {
		t.Errorf("Verify = %v", err)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey)
	if err := Verify(got, other); !errors.Is(err, ErrSignature) {
		t.Errorf("Verify with another key = %v, want ErrSignature", err)
	}
}

// TestAnyByteChanged flips each bit of a signed entry: every change is
// refused by Parse or fails the signature.
func TestAnyByteChanged(t *testing.T) {
	_, data := sample(t)
	for i := range data {
		for bit := range 8 {
			b := bytes.Clone(data)
			b[i] ^= 1 << bit
			e, err := Parse(b)
			if err == nil {
				err = Verify(e, testPublic())
			}
			if err == nil {
				t.Fatalf("byte %d bit %d changed (%q), and the entry still parses and verifies", i, bit, b)
			}
		}
	}
}

func TestParseRejects(t *testing.T) {
	_, good := sample(t)
	s := string(good)
	// edit changes a field and writes the entry in canonical form again
	// (unsigned: these are refused before any signature is checked).
	edit := func(f func(e *Entry)) string {
		e, _ := sample(t)
		f(e)
		raw, _ := json.Marshal(e)
		return string(canonical(t, raw))
	}
	tests := []struct {
		name string
		data string
		want error
	}{
		{"space after brace", "{ " + s[1:], ErrNotCanonical},
		{"members out of order", `{"v":1,` + strings.TrimSuffix(s[1:], `,"v":1}`) + `}`, ErrNotCanonical},
		{"newline at end", s + "\n", ErrNotCanonical},
		{"escaped slash", strings.Replace(s, `read_file"`, `read\/file"`, 1), ErrNotCanonical},
		{"index as 1.0", strings.Replace(s, `"index":1,`, `"index":1.0,`, 1), ErrNotCanonical},
		{"unicode escape", strings.Replace(s, `"files"`, `"\u0066iles"`, 1), ErrNotCanonical},
		{"duplicate member", strings.Replace(s, `"v":1}`, `"v":1,"v":1}`, 1), ErrMalformed},
		{"unknown member", strings.Replace(s, `"v":1}`, `"v":1,"zz":0}`, 1), ErrMalformed},
		{"member name in capitals", strings.Replace(s, `"body":`, `"Body":`, 1), ErrMalformed},
		{"member twice, in two cases", `{"V":1,` + s[1:], ErrMalformed},
		{"not JSON", s[:len(s)-1], ErrMalformed},
		{"version 2", strings.Replace(s, `"v":1}`, `"v":2}`, 1), ErrMalformed},
		{"unknown kind", strings.Replace(s, `"kind":"receipt"`, `"kind":"rumour"`, 1), ErrMalformed},
		{"negative index", strings.Replace(s, `"index":1,`, `"index":-1,`, 1), ErrMalformed},
		{"body not an object", edit(func(e *Entry) { e.Body = json.RawMessage(`[1]`) }), ErrMalformed},
		{"no sig", edit(func(e *Entry) { e.Sig = "" }), ErrMalformed},
		{"bad time", edit(func(e *Entry) { e.Time = "yesterday" }), ErrMalformed},
		{"bad prev", edit(func(e *Entry) { e.Prev = "AAAA" }), ErrMalformed},
		{"no log", edit(func(e *Entry) { e.Log = "" }), ErrMalformed},
		{"invalid UTF-8", strings.Replace(s, `"files"`, "\"fi\xfflles\"", 1), ErrMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := []byte(tt.data)
			if _, err := Parse(data); !errors.Is(err, tt.want) {
				t.Errorf("Parse(%s) = %v, want %v", data, err, tt.want)
			}
		})
	}
}

func canonical(t *testing.T, data []byte) []byte {
	t.Helper()
	canon, err := canonicalize(data)
	if err != nil {
		t.Fatal(err)
	}
	return canon
}

func canonicalize(data []byte) ([]byte, error) { return jcs.Transform(data) }

// transformed is the signed entry e by RFC 8785's general algorithm: the
// whole entry as encoding/json writes it, transformed.
func transformed(e *Entry) ([]byte, error) {
	raw, err := json.Marshal(e)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

func TestCheckpoint(t *testing.T) {
	h := sha256.Sum256([]byte("tree"))
	c := Checkpoint{Log: "testlog", Size: 42, Hash: h}
	if got, want := c.Text(), "gatehouse/log/testlog\n42\n"+base64.StdEncoding.EncodeToString(h[:])+"\n"; got != want {
		t.Errorf("Text = %q, want %q", got, want)
	}
	signed, err := SignCheckpoint(c, testKey)
	if err != nil {
		t.Fatal(err)
	}
	// The note: the text, a blank line, and "— <name> <base64(key hash ||
	// signature)>", the key hash being the first 4 bytes of
	// SHA-256(name "\n" 0x01 public key) and the signature over the text.
	text, sigs, _ := strings.Cut(string(signed), "\n\n")
	m := regexp.MustCompile(`^— (gatehouse-` + testKeyID + `) (\S+)\n$`).FindStringSubmatch(sigs)
	if text+"\n" != c.Text() || m == nil {
		t.Fatalf("signed checkpoint = %q", signed)
	}
	raw, _ := base64.StdEncoding.DecodeString(m[2])
	kh := sha256.Sum256(append([]byte(m[1]+"\n\x01"), testPublic()...))
	if len(raw) != 4+ed25519.SignatureSize || binary.BigEndian.Uint32(raw) != binary.BigEndian.Uint32(kh[:4]) {
		t.Errorf("note signature does not start with the key hash")
	}
	if !ed25519.Verify(testPublic(), []byte(c.Text()), raw[4:]) {
		t.Errorf("note signature is not over the checkpoint text")
	}

	got, kid, err := OpenCheckpoint(signed, []ed25519.PublicKey{testPublic()})
	if err != nil || got != c || kid != testKeyID {
		t.Errorf("OpenCheckpoint = %v, %s, %v; want %v, %s", got, kid, err, c, testKeyID)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, 32)).Public().(ed25519.PublicKey)
	if _, _, err := OpenCheckpoint(signed, []ed25519.PublicKey{other}); !errors.Is(err, ErrSignature) {
		t.Errorf("OpenCheckpoint with another key = %v, want ErrSignature", err)
	}
	tampered := bytes.Replace(signed, []byte("\n42\n"), []byte("\n41\n"), 1)
	if _, _, err := OpenCheckpoint(tampered, []ed25519.PublicKey{testPublic()}); !errors.Is(err, ErrSignature) {
		t.Errorf("OpenCheckpoint of a changed size = %v, want ErrSignature", err)
	}

	for _, bad := range []string{
		"gatehouse/log/x\n42\n" + FormatTreeHash(h),                  // no final newline
		"gatehouse/log/x\n042\n" + FormatTreeHash(h) + "\n",          // leading zero
		"gatehouse/log/x\n-1\n" + FormatTreeHash(h) + "\n",           // negative
		"gatehouse/log/x\n42\nAAAA\n",                                // short hash
		"other/log/x\n42\n" + FormatTreeHash(h) + "\n",               // origin
		"gatehouse/log/x\n42\n" + FormatTreeHash(h) + "\nextra\n",    // four lines
		"gatehouse/log/x\n+42\n" + FormatTreeHash(h) + "\n",          // sign
		"gatehouse/log/x\n4 2\n" + FormatTreeHash(h) + "\n",          // space
		"gatehouse/log/x\r\n42\r\n" + FormatTreeHash(h) + "\r\n",     // CRLF
		"gatehouse/log/x\n42\n" + FormatTreeHash(h)[:43] + "_\n",     // not base64
		"gatehouse/log/x\n9223372036854775808\n" + FormatTreeHash(h), // overflow
	} {
		if _, err := ParseCheckpoint(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("ParseCheckpoint(%q) = %v, want ErrMalformed", bad, err)
		}
	}
}

func TestNewID(t *testing.T) {
	re := regexp.MustCompile(`^r-[a-z2-7]{19}$`)
	seen := map[string]bool{}
	for range 1000 {
		id := NewID("r")
		if !re.MatchString(id) || seen[id] {
			t.Fatalf("NewID = %q (seen before: %v)", id, seen[id])
		}
		seen[id] = true
	}
}

// FuzzParse: Parse never panics; what it accepts is canonical and
// round-trips through its fields; canonicalizable input that is not
// canonical is refused as such.
func FuzzParse(f *testing.F) {
	_, good := sample(f)
	f.Add(good)
	f.Add([]byte("{ " + string(good[1:])))
	f.Add(bytes.Replace(good, []byte(`"index":1`), []byte(`"index":1.0`), 1))
	f.Add([]byte(`{"v":1}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(``))
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Parse(data)
		if err != nil {
			if e != nil {
				t.Fatal("Parse returned an entry and an error")
			}
			var v any
			if json.Unmarshal(data, &v) == nil && errors.Is(err, ErrNotCanonical) {
				// Refused as non-canonical: the canonical form must differ.
				if canon, cerr := canonicalize(data); cerr == nil && bytes.Equal(canon, data) {
					t.Fatalf("canonical input refused as non-canonical: %q", data)
				}
			}
			return
		}
		canon, err := canonicalize(data)
		if err != nil || !bytes.Equal(canon, data) {
			t.Fatalf("Parse accepted non-canonical input %q", data)
		}
		raw, err := json.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		again, err := canonicalize(raw)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("the parsed entry does not round-trip:\n in: %s\nout: %s", data, again)
		}
	})
}

// FuzzSignParse: any entry Sign accepts, Parse reads back as signed, and
// it verifies.
func FuzzSignParse(f *testing.F) {
	f.Add("testlog", "r-abc", int64(3), "receipt", []byte(`{"server":"files"}`), "2025-06-30T12:00:00Z")
	f.Add("l", "e-1", int64(0), "erasure", []byte(`{"reason":"é \u2028 <>&"}`), "2025-06-30T12:00:00.5+02:00")
	f.Add("l", "k-1", int64(1<<53), "key", []byte(`{"n":1e21,"m":-0}`), "2025-06-30T12:00:00Z")
	f.Add("l\x00\x1f\"\\\b\t\n\f\r\x7f", "r-\xff\xfeé\u2028", int64(7), "outcome", []byte(` { "b" : "\u003c" , "a":[1.50, 2e-7] } `), "\xe2\x80")
	f.Add("l", "r-1", int64(2), "receipt", []byte(nil), "t")
	f.Fuzz(func(t *testing.T, log, id string, index int64, kind string, body []byte, when string) {
		e := &Entry{Log: log, Index: index, ID: id, Kind: Kind(kind), Time: when, Prev: FormatTreeHash(EmptyTreeHash), Body: body}
		data, err := Sign(e, testKey)
		if err != nil {
			return // not JSON, or not representable
		}
		// Sign writes what RFC 8785 makes of the whole entry.
		if want, err := transformed(e); err != nil || !bytes.Equal(data, want) {
			t.Fatalf("Sign(e) =\n%s\nwant the canonical form of the entry (%v)\n%s", data, err, want)
		}
		got, err := Parse(data)
		if err != nil {
			// Sign does not validate; Parse does. Refusals must be for
			// fields that are invalid.
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("Parse(Sign(e)) = %v, want ErrMalformed or success", err)
			}
			return
		}
		if got.Index != index || got.Kind != Kind(kind) || got.Key != testKeyID {
			t.Fatalf("Parse(Sign(e)) = %+v, want index %d kind %q", got, index, kind)
		}
		if err := Verify(got, testPublic()); err != nil {
			t.Fatalf("Verify(Parse(Sign(e))) = %v", err)
		}
		again, err := Sign(got, testKey)
		if err != nil || !bytes.Equal(again, data) {
			t.Fatalf("signing the parsed entry again gives other bytes:\n%s\n%s", data, again)
		}
	})
}

// FuzzParseCheckpoint: never panics, and what it accepts is written back
// byte for byte.
func FuzzParseCheckpoint(f *testing.F) {
	f.Add("gatehouse/log/x\n42\n" + FormatTreeHash(EmptyTreeHash) + "\n")
	f.Add("gatehouse/log/\n0\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		c, err := ParseCheckpoint(text)
		if err != nil {
			return
		}
		if c.Text() != text {
			t.Fatalf("ParseCheckpoint(%q).Text() = %q", text, c.Text())
		}
	})
}

// TestNotKeptMembers: a body says a payload was not kept only when it was;
// one whose payload was kept reads as before the members existed. So does
// an approver without its via.
func TestNotKeptMembers(t *testing.T) {
	nk := &NotKept{Size: 70000, Cap: 65536}
	tests := []struct {
		name string
		body any
		want string
	}{
		{"receipt, arguments kept", Receipt{Decision: Allow, Args: "sha256:00"},
			`{"args":"sha256:00","capability":"","client":{"name":""},"decision":"ALLOW","rule":"","server":"","tool":""}`},
		{"receipt, arguments not kept", Receipt{Decision: Allow, Args: "sha256:00", ArgsNotKept: nk},
			`{"args":"sha256:00","args_not_kept":{"cap":65536,"size":70000},"capability":"","client":{"name":""},"decision":"ALLOW","rule":"","server":"","tool":""}`},
		{"receipt, approver before via was recorded", Receipt{Decision: Allow, Args: "sha256:00", Approver: &Approver{Kind: "tray", Scope: "once"}},
			`{"approver":{"kind":"tray","scope":"once"},"args":"sha256:00","capability":"","client":{"name":""},"decision":"ALLOW","rule":"","server":"","tool":""}`},
		{"receipt, approver via a pipe", Receipt{Decision: Allow, Args: "sha256:00", Approver: &Approver{Kind: "terminal", Scope: "once", Via: ViaPiped}},
			`{"approver":{"kind":"terminal","scope":"once","via":"piped"},"args":"sha256:00","capability":"","client":{"name":""},"decision":"ALLOW","rule":"","server":"","tool":""}`},
		{"outcome, result kept", Outcome{Receipt: "r-1", Status: Succeeded, Result: "sha256:00"},
			`{"duration_ms":0,"receipt":"r-1","result":"sha256:00","status":"SUCCEEDED"}`},
		{"outcome, result not kept", Outcome{Receipt: "r-1", Status: Succeeded, Result: "sha256:00", ResultNotKept: nk},
			`{"duration_ms":0,"receipt":"r-1","result":"sha256:00","result_not_kept":{"cap":65536,"size":70000},"status":"SUCCEEDED"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, _ := json.Marshal(tt.body)
			got, err := jcs.Transform(raw)
			if err != nil || string(got) != tt.want {
				t.Errorf("canonical body = %s, %v; want %s", got, err, tt.want)
			}
		})
	}
	if got, want := nk.String(), "not kept: 70000 bytes, over the log's cap of 65536 bytes"; got != want {
		t.Errorf("NotKept.String() = %q, want %q", got, want)
	}
}

// BenchmarkSign signs a receipt entry; "transform" is the same entry by
// RFC 8785's general algorithm, as Sign did before.
func BenchmarkSign(b *testing.B) {
	e, _ := sample(b)
	b.Run("sign", func(b *testing.B) {
		for b.Loop() {
			if _, err := Sign(e, testKey); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("transform", func(b *testing.B) {
		for b.Loop() {
			e.Sig = ""
			unsigned, _ := transformed(e)
			ed25519.Sign(testKey, append([]byte(SigningPrefix), unsigned...))
			if _, err := transformed(e); err != nil {
				b.Fatal(err)
			}
		}
	})
}
