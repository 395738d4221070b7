package approval

import (
	"fmt"
	"path/filepath"
	"strings"
)

// sameUser is the peer check: the other end of the socket must run as the
// user this process runs as. Root is another user too.
func sameUser(peer, self int) error {
	if peer != self {
		return fmt.Errorf("the other end runs as uid %d, not as uid %d", peer, self)
	}
	return nil
}

// approverProgram is the approver check, made when the asking program, self,
// is a Gatehouse program (gatehouse or gatehouse-app; a proxy always is):
// exe, the approver's program, must then be self, or gatehouse or
// gatehouse-app in self's folder. A program that was replaced on disk while
// it ran (an upgrade) counts as the path it had.
func approverProgram(exe, self string) error {
	exe = strings.TrimSuffix(exe, " (deleted)")
	self = strings.TrimSuffix(self, " (deleted)")
	if !isGatehouseProgram(self) || exe == self {
		return nil
	}
	if filepath.Dir(exe) == filepath.Dir(self) && isGatehouseProgram(exe) {
		return nil
	}
	return fmt.Errorf("the approver is %s, not a Gatehouse program beside %s", exe, self)
}

func isGatehouseProgram(path string) bool {
	switch strings.TrimSuffix(filepath.Base(path), ".exe") {
	case "gatehouse", "gatehouse-app":
		return true
	}
	return false
}
