package entry

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Decisions a receipt records.
const (
	Allow            = "ALLOW"
	Deny             = "DENY"
	ApprovalRequired = "APPROVAL_REQUIRED" // asked, not answered in time: the call did not run
)

// Outcome statuses.
const (
	Succeeded = "SUCCEEDED"
	Failed    = "FAILED"
	Unknown   = "UNKNOWN" // the call ran, and how it ended is not known (the proxy died, the server vanished)
)

// Receipt is the body of an authorization receipt, written before the call.
type Receipt struct {
	Capability string    `json:"capability"` // mcp.<server>.<tool>
	Server     string    `json:"server"`
	Tool       string    `json:"tool"`
	Decision   string    `json:"decision"`              // Allow, Deny, ApprovalRequired
	Rule       string    `json:"rule"`                  // the rule that decided
	PolicyHash string    `json:"policy_hash,omitempty"` // sha256:<hex> of the policy version in force
	Approver   *Approver `json:"approver,omitempty"`    // who answered, when one did
	Client     Client    `json:"client"`
	Args       string    `json:"args"`                // commitment to the arguments ([Commit])
	ToolHash   string    `json:"tool_hash,omitempty"` // sha256:<hex> of the tool definition
	Session    string    `json:"session,omitempty"`   // the proxy session that made the call
	// ArgsNotKept is set when the log did not keep the arguments beside
	// it, as they were larger than it keeps; Args still commits to them
	// whole. Absent when the arguments were kept.
	ArgsNotKept *NotKept `json:"args_not_kept,omitempty"`
	// Confinement says whether the server the call went to was confined
	// when it started. Absent for a remote server, and in receipts written
	// before it was recorded.
	Confinement *Confinement `json:"confinement,omitempty"`
	// Program is set when the call was a step of a governed program
	// (gatehouse programs): which program, which run of it, which step.
	// Absent for an agent's own calls, and in receipts written before
	// programs existed.
	Program *Program `json:"program,omitempty"`

	// Observed is what a policy rule in observe mode would have decided,
	// had it been applied: a rule other than Rule. Absent when no rule in
	// observe mode would have won, and in receipts written before rules
	// could observe.
	Observed *Observed `json:"observed,omitempty"`
}

// Program names the step of a governed program a call was made for.
type Program struct {
	Name  string `json:"name"`  // the program's name, as it gives it
	Hash  string `json:"hash"`  // sha256:<hex> of the program as submitted
	Trace string `json:"trace"` // the run's trace id
	Step  string `json:"step"`  // the step's name in the program
	Seq   int    `json:"seq"`   // the step's place in the run, from 1
}

// Observed records the decision a rule in observe mode would have made on
// a call; the call was decided without it.
type Observed struct {
	Decision string `json:"decision"` // Allow, Deny, ApprovalRequired
	Rule     string `json:"rule"`     // the rule in observe mode
}

// Confinement records whether the server that runs a call was confined, and
// how: by Landlock, at the kernel's ABI version.
type Confinement struct {
	Confined  bool   `json:"confined"`
	Mechanism string `json:"mechanism,omitempty"` // MechanismLandlock when confined
	ABI       int    `json:"abi,omitempty"`       // the kernel's Landlock ABI, at least 1, when confined
}

// MechanismLandlock is Linux's Landlock LSM.
const MechanismLandlock = "landlock"

// NotKept records, in a signed entry, that the log did not keep a payload
// (arguments or result) beside it: the payload was over the most the log
// keeps of one, so only its commitment, made over all of it, and its salt
// are kept. Whoever kept the payload itself can still show that it is the
// one committed to.
type NotKept struct {
	Size int64 `json:"size"` // the payload's length in bytes; always more than Cap
	Cap  int64 `json:"cap"`  // the most the log kept of one payload, in bytes, when it wrote the entry
}

// String says what was not kept and why, for people.
func (n NotKept) String() string {
	return fmt.Sprintf("not kept: %d bytes, over the log's cap of %d bytes", n.Size, n.Cap)
}

// Approver records which approver answered an approval request, for how
// long, and how the answer came. Kind names the approver program, not a
// person: Via says whether the answer could have been a person's.
type Approver struct {
	Kind  string `json:"kind"`            // "tray", "terminal", ...
	Scope string `json:"scope"`           // once, session, minutes, always, deny, always-deny
	Until string `json:"until,omitempty"` // RFC 3339, for a timed scope
	// Via is how the approver took the answer, one of the Via constants;
	// absent in receipts written before it was recorded.
	Via string `json:"via,omitempty"`
}

// How an approver took an answer ([Approver.Via]), as far as it could tell.
const (
	ViaWindow    = "window"    // a button of the app's approval window
	ViaTerminal  = "terminal"  // a key typed in `gatehouse approvals`, its input and output a terminal
	ViaPiped     = "piped"     // a line `gatehouse approvals` read from input that is not a terminal
	ViaAutomatic = "automatic" // a rule of the approver, nobody asked (`gatehouse approvals --auto`)
	ViaGrant     = "grant"     // nobody asked about this call: an earlier answer used again
	ViaPlan      = "plan"      // a person approved the whole program this call is a step of
)

// Client identifies the MCP client that made a call.
type Client struct {
	Name    string `json:"name"`
	Version string `json:"version,omitempty"`
}

// Outcome is the body of an execution outcome, written after a call ran.
type Outcome struct {
	Receipt    string    `json:"receipt"` // id of the receipt that authorized the call
	Status     string    `json:"status"`  // Succeeded, Failed, Unknown
	Result     string    `json:"result"`  // commitment to the result ([Commit]); empty when none came
	ErrorCode  int64     `json:"error_code,omitempty"`
	DurationMS float64   `json:"duration_ms"`
	Redactions []Finding `json:"redactions,omitempty"`
	// ResultNotKept is set when the log did not keep the result beside it,
	// as it was larger than the log keeps; Result still commits to it
	// whole. Absent when the result was kept, or none came.
	ResultNotKept *NotKept `json:"result_not_kept,omitempty"`
}

// A Finding is a secret found in a result and replaced before the client
// saw it. It names the secret, never its value.
type Finding struct {
	Secret   string `json:"secret"`   // the secret's id in the vault
	Encoding string `json:"encoding"` // raw, base64, url, hex, split
	Count    int    `json:"count"`
}

// KeyEvent is the body of a key entry. A key's first entry is signed by the
// key itself ("added"); a rotation is announced by the old key ("rotated",
// with Previous) so that custody passes from key to key inside the log.
type KeyEvent struct {
	Action    string `json:"action"`             // added, rotated
	KeyID     string `json:"key_id"`             // the key announced
	PublicKey string `json:"public_key"`         // base64 of the 32-byte Ed25519 public key
	Previous  string `json:"previous,omitempty"` // for rotated: the key it replaces
}

// PolicyEvent is the body of a policy entry.
type PolicyEvent struct {
	Version int64  `json:"version"`
	Hash    string `json:"hash"` // sha256:<hex> of the policy document
}

// PinEvent is the body of a pin entry: a tool definition accepted.
type PinEvent struct {
	Server  string `json:"server"`
	Tool    string `json:"tool"`
	OldHash string `json:"old_hash,omitempty"`
	NewHash string `json:"new_hash"`
}

// ErasureEvent is the body of an erasure entry.
type ErasureEvent struct {
	Erased []Erased `json:"erased"`
	Reason string   `json:"reason"`
}

// Erased names one payload that was erased.
type Erased struct {
	Entry      string `json:"entry"` // id of the entry that committed to it
	Part       string `json:"part"`  // "args" or "result"
	Commitment string `json:"commitment"`
}

// SaltSize is the size of a payload's salt in bytes.
const SaltSize = 32

// NewSalt returns a fresh random salt.
func NewSalt() []byte {
	s := make([]byte, SaltSize)
	if _, err := rand.Read(s); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return s
}

// Commit returns the commitment to a payload: "sha256:" and the lowercase hex
// of SHA-256(salt || data). Without the salt, the commitment says nothing
// about the payload (an unsalted hash of personal data is personal data);
// erasing the salt with the payload leaves the commitment meaningless and
// every signature valid.
func Commit(salt, data []byte) string {
	h := sha256.New()
	h.Write(salt)
	h.Write(data)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// NewID returns a random entry id with the given prefix ("r" for receipts,
// "o" for outcomes, "e" for events): 19 lowercase base32 characters (95 random bits) after the
// prefix and a dash. Ids are random, not counters, so that one reveals
// nothing of the others.
func NewID(prefix string) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	const alphabet = "abcdefghijklmnopqrstuvwxyz234567"
	var s strings.Builder
	s.WriteString(prefix)
	s.WriteByte('-')
	var acc uint64
	bits := 0
	for _, c := range b {
		acc = acc<<8 | uint64(c)
		bits += 8
		for bits >= 5 {
			bits -= 5
			s.WriteByte(alphabet[(acc>>bits)&31])
		}
	}
	return s.String()
}

// Capability is the capability name of tool on server.
func Capability(server, tool string) string { return fmt.Sprintf("mcp.%s.%s", server, tool) }
