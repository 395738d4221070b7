package gateway

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// The readers on the other side of the proxy, in their real runtimes: each
// reads one base64 line of bytes from stdin and writes what it read in a
// form that compares across languages (see canonical), or "ERR".
const nodeReader = `
const rl = require('readline').createInterface({input: process.stdin});
const hex = s => Buffer.from(s, 'utf8').toString('hex');
function c(v) {
  if (v === null) return 'n';
  if (v === true) return 't';
  if (v === false) return 'f';
  if (typeof v === 'number') {
    if (v === 0) v = 0;
    const b = Buffer.alloc(8); b.writeDoubleBE(v); return 'd' + b.toString('hex');
  }
  if (typeof v === 'string') return 's' + hex(v);
  if (Array.isArray(v)) return '[' + v.map(c).join(',') + ']';
  const ks = Object.keys(v).map(k => [hex(k), k]).sort((a, b) => a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);
  return '{' + ks.map(([h, k]) => h + ':' + c(v[k])).join(',') + '}';
}
rl.on('line', line => {
  let out;
  try { out = c(JSON.parse(Buffer.from(line, 'base64').toString('utf8'))); } catch (e) { out = 'ERR'; }
  process.stdout.write(out + '\n');
});
`

const pythonReader = `
import base64, json, struct, sys
def c(v):
    if v is None: return 'n'
    if v is True: return 't'
    if v is False: return 'f'
    if isinstance(v, (int, float)):
        f = float(v)
        if f == 0: f = 0.0
        return 'd' + struct.pack('>d', f).hex()
    if isinstance(v, str): return 's' + v.encode('utf-8').hex()
    if isinstance(v, list): return '[' + ','.join(c(e) for e in v) + ']'
    ks = sorted((k.encode('utf-8').hex(), k) for k in v)
    return '{' + ','.join(h + ':' + c(v[k]) for h, k in ks) + '}'
for line in sys.stdin:
    try:
        out = c(json.loads(base64.b64decode(line).decode('utf-8')))
    except Exception:
        out = 'ERR'
    sys.stdout.write(out + '\n')
    sys.stdout.flush()
`

// A reader is one runtime's JSON reader, running.
type reader struct {
	name string
	mu   sync.Mutex
	in   io.WriteCloser
	out  *bufio.Reader
}

func (r *reader) read(data []byte) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, err := fmt.Fprintln(r.in, base64.StdEncoding.EncodeToString(data)); err != nil {
		return "", err
	}
	line, err := r.out.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

var (
	readersOnce sync.Once
	readers     []*reader
	readersErr  error
)

// otherReaders starts Node's and Python's readers once per test process.
// They are part of what make test installs (.ci/deps.sh): without them the
// test fails, saying so, rather than passing unexamined.
func otherReaders(tb testing.TB) []*reader {
	tb.Helper()
	readersOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-readers-")
		if err != nil {
			readersErr = err
			return
		}
		for _, r := range []struct{ name, bin, file, src string }{
			{"node", "node", "reader.js", nodeReader},
			{"python", "python3", "reader.py", pythonReader},
		} {
			path, err := exec.LookPath(r.bin)
			if err != nil {
				readersErr = fmt.Errorf("%s is needed to compare the gate's reading with %s's (make deps installs it): %w", r.bin, r.name, err)
				return
			}
			file := filepath.Join(dir, r.file)
			if err := os.WriteFile(file, []byte(r.src), 0o600); err != nil {
				readersErr = err
				return
			}
			cmd := exec.Command(path, file)
			in, _ := cmd.StdinPipe()
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				readersErr = fmt.Errorf("start %s: %w", r.name, err)
				return
			}
			readers = append(readers, &reader{name: r.name, in: in, out: bufio.NewReader(out)})
		}
	})
	if readersErr != nil {
		tb.Fatal(readersErr)
	}
	return readers
}

// canonical writes a value as the readers above do: null n, true t, false
// f, a number d and its float64's bits (zero without its sign), a string s
// and its UTF-8 in hex, arrays in order, objects with their members sorted
// by name.
func canonical(v any) string {
	switch x := v.(type) {
	case nil:
		return "n"
	case bool:
		if x {
			return "t"
		}
		return "f"
	case json.Number:
		f, _ := strconv.ParseFloat(string(x), 64)
		return canonicalFloat(f)
	case float64:
		return canonicalFloat(x)
	case string:
		return "s" + hex.EncodeToString([]byte(x))
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = canonical(e)
		}
		return "[" + strings.Join(parts, ",") + "]"
	case map[string]any:
		names := make(map[string]string, len(x))
		for k := range x {
			names[hex.EncodeToString([]byte(k))] = k
		}
		var parts []string
		for _, h := range slices.Sorted(maps.Keys(names)) {
			parts = append(parts, h+":"+canonical(x[names[h]]))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	return fmt.Sprintf("?%T", v)
}

func canonicalFloat(f float64) string {
	if f == 0 {
		f = 0
	}
	return fmt.Sprintf("d%016x", math.Float64bits(f))
}

// agree checks that what the gate reads in data, every other reader reads
// alike; what it refuses needs no agreement (the proxy refuses it).
func agree(t testing.TB, data []byte) {
	v, err := ReadValue(data)
	if err != nil {
		return
	}
	want := canonical(v.Interface())
	var std any
	if err := json.Unmarshal(data, &std); err != nil {
		t.Fatalf("%q: the gate reads it, encoding/json refuses it: %v", data, err)
	}
	if got := canonical(std); got != want {
		t.Fatalf("%q: the gate reads %s, encoding/json %s", data, want, got)
	}
	for _, r := range otherReaders(t) {
		got, err := r.read(data)
		if err != nil {
			t.Fatalf("%s reader: %v", r.name, err)
		}
		if got != want {
			t.Fatalf("%q: the gate reads %s, %s %s", data, want, r.name, got)
		}
	}
}

// readerSeeds are messages and values on the edges where readers differ.
var readerSeeds = []string{
	`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/tmp/x"}}}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`,
	`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`,
	`{"params":{},"paramſ":{}}`, `{"k":1,"\u212a":2}`, `{"name":1,"na\u200dme":2}`,
	`{"\u006dethod":"tools/call"}`, `"\ud800"`, `"\udc00\ud800"`, `"\ud83d\ude00"`, "\"\xed\xa0\x80\"", "\"\xc0\xaf\"",
	"\"\xf4\x90\x80\x80\"", `"\u0000\u001f\u007f"`, "\"\u2028\u2029\"", `[1e400]`, `[-1e309]`, `[1e-400]`, `[-0]`, `[-0.0]`,
	`[123456789012345678901234567890]`, `[9007199254740993]`, `[0.1e1, 1E+2, 1e-2]`, `[1.7976931348623157e308]`,
	`[1.7976931348623158e308]`, `[1.7976931348623159e308]`, `[4.9e-324]`, `[2.4703282292062328e-324]`,
	`{"__proto__":{"x":1}}`, `{"constructor":1,"toString":2}`, `{"1":1,"0":0,"a":2}`, `{"":1}`, "\ufeff{}",
	`NaN`, `Infinity`, `[1,]`, `{"a":1,}`, "{\"a\":\"\t\"}", ` [ ] `, "\t{}\r\n", `[[[[[]]]]]`, `"\/"`,
}

// The gate and the readers on the other side read every message the gate
// accepts alike: the seeds, and a hundred thousand mutations of them.
func TestReadersAgree(t *testing.T) {
	otherReaders(t)
	for _, s := range readerSeeds {
		agree(t, []byte(s))
	}
	rng := rand.New(rand.NewPCG(1, 2))
	n := 100_000
	if testing.Short() {
		n = 10_000
	}
	for range n {
		agree(t, mutate(rng, []byte(readerSeeds[rng.IntN(len(readerSeeds))])))
	}
}

// mutate changes a few bytes of b in the ways that matter to JSON readers.
var pieces = []string{`"`, `\`, `\u`, `d800`, `dc00`, `00e9`, `{`, `}`, `[`, `]`, `,`, `:`, `"a":1`, `"A":2`, `"ſ"`, `"s"`,
	"\xff", "\xed\xa0\x80", "\xc3\xa9", "\u212a", "\u200d", `-0`, `1e400`, `9007199254740993`, `.5`, `e+1`, `null`, `true`, " ", "\t", "\x00", "\x1f"}

func mutate(rng *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	for range 1 + rng.IntN(3) {
		i := 0
		if len(b) > 0 {
			i = rng.IntN(len(b) + 1)
		}
		switch p := []byte(pieces[rng.IntN(len(pieces))]); rng.IntN(3) {
		case 0: // insert
			b = append(b[:i:i], append(p, b[i:]...)...)
		case 1: // replace
			end := min(len(b), i+len(p))
			b = append(b[:i:i], append(p, b[end:]...)...)
		default: // delete
			end := min(len(b), i+1+rng.IntN(3))
			b = append(b[:i:i], b[end:]...)
		}
	}
	return b
}

// The same, driven by the fuzzer.
func FuzzReadersAgree(f *testing.F) {
	for _, s := range readerSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { agree(t, data) })
}
