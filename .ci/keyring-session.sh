#!/usr/bin/env bash
# keyring-session.sh CMD [ARGS...]
#
# Runs CMD with a private, unlocked keychain, so that tests which store
# secrets never touch the user's own keyring and never prompt.
#
# On Linux, CMD runs on a private D-Bus session bus (dbus-run-session) with a
# throw-away gnome-keyring Secret Service:
#   - XDG_DATA_HOME and XDG_RUNTIME_DIR point into a fresh temporary folder
#     (HOME is left alone, so GOPATH and the module cache stay where they are);
#   - gnome-keyring-daemon --unlock --components=secrets creates and unlocks
#     the "login" keyring there, with a password given on stdin;
#   - CMD starts only once org.freedesktop.secrets has an owner on the bus;
#   - GATEHOUSE_TEST_KEYRING=1 tells CMD that the keychain it sees is private;
#   - the bus and the daemon run without DISPLAY, so that a locked keyring
#     fails instead of prompting for its password (CMD keeps the display).
# The daemon, the bus and the folder are removed when CMD ends; the exit code
# is CMD's. SIGTERM and SIGHUP are passed on to CMD.
#
# On macOS and Windows, CMD runs as is (login Keychain / Credential Manager).
#
# Needs the Debian packages dbus and gnome-keyring (.ci/deps.sh test).

# shellcheck disable=SC2317 # functions called from traps
set -euo pipefail

me="gatehouse keyring-session"

if [ $# -eq 0 ]; then
	echo "usage: $0 CMD [ARGS...]" >&2
	exit 2
fi

case "$(uname -s)" in
Linux) ;;
*) exec "$@" ;;
esac

# wait_for PID: waits for a child of this shell, however often a trapped
# signal interrupts the wait, and sets rc to its exit code. The traps set
# "interrupted" so that an interrupted wait is told from the child's status.
interrupted=
wait_for() {
	local r
	rc=0
	wait "$1" || rc=$?
	while [ -n "$interrupted" ]; do
		interrupted=
		r=0
		wait "$1" 2>/dev/null || r=$?
		[ "$r" = 127 ] || rc=$r # 127: the first wait had the status already
	done
}

# gone PID: true once PID has exited (a zombie counts as gone).
gone() {
	local state
	state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1) || true
	case "$state" in "" | Z | X) return 0 ;; esac
	return 1
}

# ---------------------------------------------------------------------------
# Outer half: check the tools, make the folder, start again on a private bus.
if [ -z "${_GATEHOUSE_KEYRING_DIR:-}" ]; then
	missing=()
	for tool in dbus-run-session dbus-send gnome-keyring-daemon; do
		command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
	done
	if [ ${#missing[@]} -gt 0 ]; then
		echo "$me: not found: ${missing[*]} (Debian packages: dbus gnome-keyring)" >&2
		echo "hint: .ci/deps.sh test   (or as root: apt-get install dbus gnome-keyring)" >&2
		exit 1
	fi

	# The same folder and bus address every time for this checkout, so that
	# go test can cache the results of tests that read them (it keys a
	# cached result on the environment variables a test read); a second
	# session of the same checkout at once gets a folder of its own.
	key=$(printf '%s' "$PWD" | cksum | cut -d' ' -f1)
	stable=${TMPDIR:-/tmp}/gatehouse-keyring-$(id -u)-$key
	dir=
	if command -v flock >/dev/null 2>&1 && exec 9>"$stable.lock" && flock -n 9; then
		rm -rf "$stable" && mkdir -m 0700 "$stable" && dir=$stable
	fi
	[ -n "$dir" ] || dir=$(mktemp -d "${TMPDIR:-/tmp}/gatehouse-keyring.XXXXXXXX")
	# The session bus's own configuration, but for where it listens: a
	# fixed path rather than a random one.
	cat >"$dir/bus.conf" <<CONF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <keep_umask/>
  <listen>unix:path=$dir/bus</listen>
  <auth>EXTERNAL</auth>
  <standard_session_servicedirs/>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
CONF
	cleanup_outer() {
		# The inner half removes what it started; give it a moment if an
		# interrupt ended dbus-run-session first.
		local pid
		pid=$(cat "$dir/pid" 2>/dev/null) || pid=
		if [ -n "$pid" ]; then
			for _ in $(seq 1 100); do
				gone "$pid" && break
				sleep 0.1
			done
		fi
		rm -rf "$dir"
	}
	trap cleanup_outer EXIT

	# dbus-run-session does not pass signals on: send them to the inner half.
	forward() {
		local pid
		pid=$(cat "$dir/pid" 2>/dev/null) || pid=$session
		kill -"$1" "$pid" 2>/dev/null || true
	}

	# The bus, and the services it starts (the keyring's password prompter),
	# get no display: a locked test keyring must fail, not put a password
	# prompt on the developer's screen and wait. CMD gets the display back.
	env -u DISPLAY -u WAYLAND_DISPLAY _GATEHOUSE_KEYRING_DIR="$dir" \
		_GATEHOUSE_DISPLAY="${DISPLAY-}" _GATEHOUSE_WAYLAND_DISPLAY="${WAYLAND_DISPLAY-}" \
		dbus-run-session --config-file="$dir/bus.conf" -- bash "$0" "$@" <&0 &
	session=$!
	trap 'interrupted=1; forward TERM' TERM
	trap 'interrupted=1; forward HUP' HUP
	trap ':' INT # a terminal's interrupt reaches CMD itself
	wait_for "$session"
	exit "$rc"
fi

# ---------------------------------------------------------------------------
# Inner half: runs inside dbus-run-session.
dir=$_GATEHOUSE_KEYRING_DIR
unset _GATEHOUSE_KEYRING_DIR
echo $$ >"$dir/pid"

if [ -z "${DBUS_SESSION_BUS_ADDRESS:-}" ]; then
	echo "$me: dbus-run-session gave no DBUS_SESSION_BUS_ADDRESS" >&2
	exit 1
fi
# Without the bus's random guid, which clients need not check: the same
# address every run.
export DBUS_SESSION_BUS_ADDRESS="unix:path=$dir/bus"

daemon_pid=
cleanup_inner() {
	if [ -n "$daemon_pid" ] && ! gone "$daemon_pid"; then
		kill -TERM "$daemon_pid" 2>/dev/null || true
		for _ in $(seq 1 50); do
			gone "$daemon_pid" && break
			sleep 0.1
		done
	fi
	rm -rf "$dir/data" "$dir/run"
}
trap cleanup_inner EXIT
trap 'exit 143' TERM
trap 'exit 129' HUP

export XDG_DATA_HOME="$dir/data"
export XDG_RUNTIME_DIR="$dir/run"
mkdir -m 0700 "$XDG_DATA_HOME" "$XDG_RUNTIME_DIR"

bus_call() {
	dbus-send --session --dest=org.freedesktop.DBus --type=method_call --print-reply \
		/org/freedesktop/DBus "org.freedesktop.DBus.$1" string:org.freedesktop.secrets 2>/dev/null
}

# The password comes on stdin; the daemon forks, and prints the variables to
# export (if any) before its parent exits.
if ! daemon_env=$(printf '%s' "gatehouse-test" |
	gnome-keyring-daemon --unlock --components=secrets 2>"$dir/daemon.log"); then
	echo "$me: gnome-keyring-daemon failed to start:" >&2
	cat "$dir/daemon.log" >&2
	exit 1
fi
if [ -n "$daemon_env" ]; then
	eval "$(printf '%s\n' "$daemon_env" | sed -n 's/^\([A-Za-z_][A-Za-z0-9_]*=\)/export \1/p')"
fi

# The daemon takes its bus name asynchronously; until it has, a client call
# would activate a second daemon whose keyring is locked.
owned=
for _ in $(seq 1 100); do
	if bus_call NameHasOwner | grep -q 'boolean true'; then
		owned=1
		break
	fi
	sleep 0.1
done
if [ -z "$owned" ]; then
	echo "$me: org.freedesktop.secrets did not appear on the session bus within 10 s" >&2
	cat "$dir/daemon.log" >&2
	exit 1
fi
daemon_pid=$(bus_call GetConnectionUnixProcessID | awk '/uint32/ {print $2}')

export GATEHOUSE_TEST_KEYRING=1
if [ -n "${_GATEHOUSE_DISPLAY:-}" ]; then export DISPLAY=$_GATEHOUSE_DISPLAY; fi
if [ -n "${_GATEHOUSE_WAYLAND_DISPLAY:-}" ]; then export WAYLAND_DISPLAY=$_GATEHOUSE_WAYLAND_DISPLAY; fi
unset _GATEHOUSE_DISPLAY _GATEHOUSE_WAYLAND_DISPLAY

# CMD runs as a child (not exec) so that the daemon can be stopped afterwards;
# its stdin stays the caller's.
"$@" <&0 &
child=$!
trap 'interrupted=1; kill -TERM "$child" 2>/dev/null || true' TERM
trap 'interrupted=1; kill -HUP "$child" 2>/dev/null || true' HUP
trap ':' INT
wait_for "$child"
exit "$rc"
