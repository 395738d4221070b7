package witness

import (
	"bytes"
	"testing"
)

// FuzzParseAddCheckpoint checks that the request parser has one reading
// of a body: what it accepts, Format writes back byte for byte, and it
// never accepts more proof lines than the protocol allows.
func FuzzParseAddCheckpoint(f *testing.F) {
	f.Add([]byte("old 0\n\nexample.com/log\n1\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n— example.com/log AAAA\n"))
	f.Add([]byte("old 20852014\nPlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw=\njrJZDmY8Y7SyJE0MWLpLozkIVMSMZcD5kvuKxPC3swk=\n\ncheckpoint\n"))
	f.Add([]byte("old 01\n\nx\n"))
	f.Add([]byte("old -1\n\nx\n"))
	f.Add([]byte("old 1\nPlRNCrwHpqhGrupue0L7gxbjbMiKA9temvuZZDDpkaw\n\nx\n"))
	f.Add([]byte("old 1\r\n\nx\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := ParseAddCheckpoint(body)
		if err != nil {
			return
		}
		if len(r.Proof) > maxProofLines {
			t.Fatalf("accepted %d proof lines", len(r.Proof))
		}
		if r.Old < 0 || len(r.Checkpoint) == 0 {
			t.Fatalf("accepted old %d, checkpoint %q", r.Old, r.Checkpoint)
		}
		if out := r.Format(); !bytes.Equal(out, body) {
			t.Fatalf("Format(Parse(%q)) = %q", body, out)
		}
	})
}
