package verify

import (
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// A frontier computes the RFC 6962 tree hash of a growing list of leaves
// while keeping only the roots of its perfect subtrees (one per bit of the
// size): a complete bundle's tree is rebuilt from its entries in one pass
// and little memory.
type frontier struct {
	size  int64
	roots []tlog.Hash // left to right; roots[i] covers 2^k leaves, k the i-th highest set bit of size
}

// push appends a leaf hash.
func (f *frontier) push(leaf tlog.Hash) {
	f.roots = append(f.roots, leaf)
	// Two subtrees of equal size merge: one per trailing 1 bit of the old size.
	for n := f.size; n&1 == 1; n >>= 1 {
		k := len(f.roots)
		f.roots = append(f.roots[:k-2], tlog.NodeHash(f.roots[k-2], f.roots[k-1]))
	}
	f.size++
}

// root returns the tree hash of the leaves pushed so far: the subtree roots
// folded from the right, as RFC 6962 splits a tree at its largest power of
// two.
func (f *frontier) root() tlog.Hash {
	if f.size == 0 {
		return entry.EmptyTreeHash
	}
	h := f.roots[len(f.roots)-1]
	for i := len(f.roots) - 2; i >= 0; i-- {
		h = tlog.NodeHash(f.roots[i], h)
	}
	return h
}
