# Gatehouse
#
#   make run    builds and runs the desktop app
#   make test   runs every test (lint, unit and integration tests, race
#               detector, builds)
#
# On Debian/Ubuntu both install what they need when run as root, and otherwise
# print what is missing and the command that installs it (.ci/deps.sh).
# `make help` lists the other targets; docs/development.md explains them.

SHELL := bash
# (GNU make 3.81, macOS's, ignores .SHELLFLAGS: multi-line recipes set it too.)
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help
# Steps run in the order written, even under make -j: `go` parallelises itself.
.NOTPARALLEL:
MAKEFLAGS += --no-print-directory

# Go from its default install folder when it is not on PATH.
_go := $(shell command -v go 2>/dev/null)
ifeq ($(_go),)
_go := $(wildcard /usr/local/go/bin/go)
export PATH := /usr/local/go/bin:$(PATH)
endif

# The Fyne GL driver is built with the gles tag everywhere: its cold cgo build
# takes about a third of the time, and any change of tags pays the cold build
# again. The caller's GOFLAGS (environment, make's command line, or
# `go env -w`) are kept; tags given there (-tags=a,b) are added to gles.
comma := ,
empty :=
space := $(empty) $(empty)
_goflags := $(if $(filter command line,$(origin GOFLAGS)),$(GOFLAGS),$(if $(_go),$(shell GOFLAGS='$(GOFLAGS)' $(_go) env GOFLAGS 2>/dev/null)))
_user_tags := $(subst $(comma),$(space),$(patsubst -tags=%,%,$(filter -tags=%,$(_goflags))))
override GOFLAGS := $(strip -tags=$(subst $(space),$(comma),$(sort gles $(_user_tags))) $(filter-out -tags=%,$(_goflags)))
export GOFLAGS

# A checkout another user owns (sudo make test in a user's clone): git
# refuses to read it unless told it is safe, and both the version below and
# go build's VCS stamp read it. Git counts these variables as command-line
# configuration, the only kind besides the user's own that may say so.
ifeq ($(origin GIT_CONFIG_COUNT),undefined)
export GIT_CONFIG_COUNT := 1
export GIT_CONFIG_KEY_0 := safe.directory
export GIT_CONFIG_VALUE_0 := $(CURDIR)
endif

VERSION := $(shell git -c safe.directory='$(CURDIR)' describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

# go test flags for the test steps, e.g. GOTESTFLAGS=-count=1 or -v.
GOTESTFLAGS ?=
# test-unit: which packages, and an optional -run pattern.
PKG ?= ./...
RUN ?=
# fuzz: how long each fuzz target runs.
FUZZTIME ?= 10s
# run: arguments for the app.
ARGS ?=
# stress: how many times the race-prone tests run under -race, and the
# app's timing tests at each of -cpu=1,2.
STRESS_RACE ?= 3000
STRESS_LOCK ?= 300
STRESS_APP ?= 100

# Packages tested with -race: everything but the GUI (the Fyne app needs cgo
# for GL, and its race build would be a second cold build of the driver).
CORE_PKGS = go list ./... | grep -Ev "^$$(go list -m)/(app|cmd/gatehouse-app)(/|\$$)"

KEYRING := bash .ci/keyring-session.sh

define heading
@printf '\n==> %s\n' "$(1)"
endef

.PHONY: help run build test lint vet staticcheck test-unit test-race build-check \
	bench eval fuzz stress deps clean distclean go-check deps-run deps-test \
	package package-check deps-package

help: ## list the targets
	@echo 'Gatehouse: make run runs the app, make test runs every test.'
	@echo
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo
	@echo 'Variables: PKG=./internal/store/... RUN=TestName (test-unit), GOTESTFLAGS=-count=1,'
	@echo '           FUZZTIME=30s (fuzz), ARGS=... (run). GOFLAGS always has -tags=gles.'

go-check:
	@command -v go >/dev/null 2>&1 || { \
		echo 'gatehouse: Go is not installed: Go 1.26.8 or later is needed, on PATH or in /usr/local/go' \
			'(a Go 1.21 or later fetches 1.26.8 itself through the module proxy).' >&2; exit 1; }

deps-run:
	$(call heading,deps: .ci/deps.sh run)
	@bash .ci/deps.sh run

deps-test:
	$(call heading,deps: .ci/deps.sh test)
	@bash .ci/deps.sh test

deps-package:
	$(call heading,deps: .ci/deps.sh package)
	@bash .ci/deps.sh package

deps: deps-test ## check/install everything make run and make test need

run: deps-run build ## build and run the desktop app (ARGS=... are passed on)
	$(call heading,run: bin/gatehouse-app $(ARGS))
	bin/gatehouse-app $(ARGS)

build: go-check ## build bin/gatehouse (CLI and proxy) and bin/gatehouse-app
	$(call heading,build: bin/gatehouse bin/gatehouse-app ($(VERSION)))
	CGO_ENABLED=1 go build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/gatehouse ./cmd/gatehouse-app

test: deps-test vet staticcheck test-unit test-race build-check ## run every test: deps, go mod tidy -diff, gofmt, vet, staticcheck, go test, -race, builds
	$(call heading,test: all steps passed)

lint: vet staticcheck ## go mod tidy -diff, gofmt, go vet and staticcheck

vet: go-check
	$(call heading,lint: go mod tidy -diff; gofmt -l .; go vet ./...)
	@go mod tidy -diff >/dev/null || { echo 'go.mod or go.sum is not tidy: run go mod tidy (go mod tidy -diff shows the change)' >&2; exit 1; }
	@unformatted=$$(gofmt -l $$(go list -f '{{.Dir}}' ./...)); \
	if [ -n "$$unformatted" ]; then echo "not gofmt'd (run gofmt -w):" $$unformatted >&2; exit 1; fi
	CGO_ENABLED=1 go vet ./...

staticcheck: go-check
	$(call heading,lint: go tool staticcheck ./...)
	CGO_ENABLED=1 go tool staticcheck ./...

test-unit: go-check ## go test ./... with a private keychain (PKG=..., RUN=...)
	$(call heading,test: go test $(PKG) (private keychain session))
	CGO_ENABLED=1 $(KEYRING) go test -timeout 20m $(if $(RUN),-run '$(RUN)') $(GOTESTFLAGS) $(PKG)

test-race: go-check ## go test -race -short on the core packages (all but the GUI)
	$(call heading,test: go test -race -short (core packages; private keychain session))
	@set -euo pipefail; pkgs=$$($(CORE_PKGS)); \
	if [ -z "$$pkgs" ]; then echo 'no core packages'; exit 0; fi; \
	echo "$$pkgs" | sed 's/^/    /'; \
	CGO_ENABLED=1 $(KEYRING) go test -race -short -timeout 20m $(GOTESTFLAGS) $$pkgs

build-check: build ## the builds make test checks: both binaries, and the CLI without cgo
	$(call heading,build: CGO_ENABLED=0 go build ./cmd/gatehouse)
	CGO_ENABLED=0 go build -o /dev/null ./cmd/gatehouse

package: deps-package go-check ## build the desktop packages into dist/, with SHA-256 sums (docs/packaging.md)
	$(call heading,package: packaging/build.sh (Linux: .deb .rpm .tar.gz; Windows: .zip, installer; macOS: .dmg))
	bash packaging/build.sh

package-check: package ## make package, then install and run each package: a clean Debian root (as root), Wine
	$(call heading,package-check: packaging/check.sh)
	bash packaging/check.sh

bench: deps-test build ## bin/gatehouse bench (relay, and governed with 8 proxies), then the Go benchmarks of the proxy, the gate and the evidence log
	$(call heading,bench: bin/gatehouse bench)
	$(KEYRING) bin/gatehouse bench
	$(call heading,bench: bin/gatehouse bench --governed --proxies 8)
	$(KEYRING) bin/gatehouse bench --governed --proxies 8
	$(call heading,bench: go test -bench . ./gateway/... ./cmd/gatehouse/internal/bench/)
	$(KEYRING) go test -run '^$$' -bench . -benchtime 2000x ./gateway/... ./cmd/gatehouse/internal/bench/
	$(call heading,bench: go test -bench . ./receipts/... (search builds a million-receipt database once, about 30 min, cached under the temp folder, and the index upgrade one at the earlier schema, as long; the upgrade itself takes about 8 min; GATEHOUSE_BENCH_ENTRIES=1000000 runs export and verify at a million too))
	$(KEYRING) go test -run '^$$' -bench . -timeout 2h ./receipts/...

eval: deps-test build ## bin/gatehouse eval, then bin/gatehouse eval --faults (make test runs both too)
	$(call heading,eval: bin/gatehouse eval)
	bin/gatehouse eval
	$(call heading,eval: bin/gatehouse eval --faults)
	bin/gatehouse eval --faults

fuzz: go-check ## run every Fuzz* target for FUZZTIME each (default 10s)
	$(call heading,fuzz: each fuzz target for $(FUZZTIME))
	@set -euo pipefail; if ! list=$$(go test -list '^Fuzz' ./... 2>&1); then printf '%s\n' "$$list" >&2; exit 1; fi; \
	targets=$$(printf '%s\n' "$$list" | awk ' \
		/^Fuzz/ { names[n++] = $$1; next } \
		/^ok[ \t]/ { for (i = 0; i < n; i++) print $$2, names[i] } \
		{ n = 0 }'); \
	if [ -z "$$targets" ]; then echo 'no fuzz targets (func FuzzXxx(f *testing.F)) in this module'; exit 0; fi; \
	while read -r pkg fn; do \
		printf '\n--> %s %s\n' "$$pkg" "$$fn"; \
		if out=$$(go test -run '^$$' -fuzz "^$$fn\$$" -fuzztime '$(FUZZTIME)' "$$pkg" </dev/null 2>&1); then printf '%s\n' "$$out"; continue; fi; \
		printf '%s\n' "$$out"; \
		if ! grep -q 'context deadline exceeded' <<<"$$out" || grep -q 'Failing input written' <<<"$$out"; then exit 1; fi; \
		echo "(Go's fuzz coordinator failed at the deadline having found nothing, golang/go#75804: replaying the corpus instead)"; \
		go test -run "^$$fn\$$" "$$pkg" </dev/null; \
	done <<<"$$targets"

# The tests that touch timing, concurrency and processes, run many times:
# the remote connection's start and stop and the file locks under -race,
# the app's clock-driven tests (countdowns, retries) at one and two CPUs.
# Not part of make test: about twenty minutes.
stress: go-check ## rerun the timing, concurrency and process tests many times (STRESS_RACE=3000, STRESS_LOCK=300, STRESS_APP=100 at -cpu=1,2)
	$(call heading,stress: gateway remote connections -count=$(STRESS_RACE) and internal/filelock -count=$(STRESS_LOCK); -race)
	CGO_ENABLED=1 go test -race -count=$(STRESS_RACE) -timeout 60m -run '^TestRemote' ./gateway/
	CGO_ENABLED=1 go test -race -count=$(STRESS_LOCK) -timeout 60m -run '^(TestLockExcludes|TestTryLock)$$' ./internal/filelock/
	$(call heading,stress: the app's timing tests; -count=$(STRESS_APP) at one and two CPUs)
	CGO_ENABLED=1 go test -count=$(STRESS_APP) -cpu=1,2 -timeout 60m \
		-run '^(TestApprovalArmDelay|TestApprovalCountdown|TestApprovalCountsDownTheProxysWait|TestHistoryWithoutKeychain|TestPolicyWithoutKeychain|TestDatabaseLockedForWrites)$$' ./app/
	$(call heading,stress: all passed)

clean: ## remove build output (bin/, dist/, failed UI goldens)
	rm -rf bin/ dist/ app/testdata/failed/

distclean: clean ## clean, and remove the installed npm test peers
	rm -rf cmd/gatehouse/testdata/npm/node_modules/
