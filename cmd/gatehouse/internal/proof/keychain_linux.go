package proof

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/godbus/dbus/v5"
)

// errNoPrivate: the tools for a private keychain are not installed.
var errNoPrivate = errors.New("dbus-daemon or gnome-keyring-daemon not installed")

// privateSession is a D-Bus session bus and a gnome-keyring Secret Service
// in a temporary folder, as .ci/keyring-session.sh starts them.
type privateSession struct {
	dir     string
	address string
	bus     *exec.Cmd
	daemon  *exec.Cmd // nil while killed
}

const keyringPassword = "gatehouse-eval"

const busConfig = `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=%s</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
`

func startPrivate(ctx context.Context) (*privateSession, error) {
	for _, tool := range []string{"dbus-daemon", "gnome-keyring-daemon"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, errNoPrivate
		}
	}
	dir, err := os.MkdirTemp("", "gatehouse-eval-keychain-")
	if err != nil {
		return nil, err
	}
	s := &privateSession{dir: dir}
	for _, sub := range []string{"data", "run"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o700); err != nil {
			s.close()
			return nil, err
		}
	}
	// A session bus without service activation: once the keyring daemon is
	// killed, nothing starts another (one would come up locked).
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(busConfig, filepath.Join(dir, "run", "bus"))), 0o600); err != nil {
		s.close()
		return nil, err
	}
	s.bus = exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile", "--print-address=1")
	s.bus.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := s.bus.StdoutPipe()
	if err != nil {
		s.close()
		return nil, err
	}
	if err := s.bus.Start(); err != nil {
		s.close()
		return nil, fmt.Errorf("start dbus-daemon: %w", err)
	}
	addr := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(out).ReadString('\n')
		addr <- strings.TrimSpace(line)
	}()
	select {
	case s.address = <-addr:
	case <-time.After(10 * time.Second):
	}
	if s.address == "" {
		s.close()
		return nil, errors.New("dbus-daemon printed no address")
	}
	if err := s.startDaemon(ctx); err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *privateSession) env() []string {
	return []string{
		"DBUS_SESSION_BUS_ADDRESS=" + s.address,
		"XDG_DATA_HOME=" + filepath.Join(s.dir, "data"),
		"XDG_RUNTIME_DIR=" + filepath.Join(s.dir, "run"),
	}
}

// startDaemon starts gnome-keyring's Secret Service, unlocking (or
// creating) the login keyring in the folder, and waits until it owns its
// name on the bus: before that, a client would start a second daemon whose
// keyring is locked.
func (s *privateSession) startDaemon(ctx context.Context) error {
	d := exec.Command("gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets")
	d.Env = append(os.Environ(), s.env()...)
	d.Stdin = strings.NewReader(keyringPassword)
	d.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.Start(); err != nil {
		return fmt.Errorf("start gnome-keyring-daemon: %w", err)
	}
	s.daemon = d
	conn, err := dbus.Connect(s.address)
	if err != nil {
		return fmt.Errorf("connect to the private bus: %w", err)
	}
	defer conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var owned bool
		err := conn.BusObject().CallWithContext(ctx, "org.freedesktop.DBus.NameHasOwner", 0, "org.freedesktop.secrets").Store(&owned)
		if err == nil && owned {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return errors.New("gnome-keyring-daemon did not take org.freedesktop.secrets on the bus within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *privateSession) killDaemon() error {
	if s.daemon == nil {
		return errors.New("the keychain is already gone")
	}
	s.daemon.Process.Kill()
	s.daemon.Wait()
	s.daemon = nil
	// The bus must see the name go before anything relies on its absence.
	conn, err := dbus.Connect(s.address)
	if err != nil {
		return nil
	}
	defer conn.Close()
	for range 500 {
		var owned bool
		if conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, "org.freedesktop.secrets").Store(&owned) != nil || !owned {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("org.freedesktop.secrets still owned after its daemon was killed")
}

func (s *privateSession) close() {
	if s.daemon != nil {
		s.daemon.Process.Kill()
		s.daemon.Wait()
	}
	if s.bus != nil && s.bus.Process != nil {
		s.bus.Process.Kill()
		s.bus.Wait()
	}
	os.RemoveAll(s.dir)
}
