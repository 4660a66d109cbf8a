# restoresync: a thin front over the go tool. See README.md.
GO       ?= go
BIN      := bin/restoresync
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
# Test packages run in parallel at go's default -p; each test makes its own
# temp dirs, ports and sshd. integration/ drives the binary that build made
# (RESTORESYNC_BIN), so it runs beside the package tests, not after them.
TESTFLAGS ?= -count=1 -timeout 8m
FUZZTIME ?= 60s

.PHONY: build demo test race fuzz bench scale lint deps clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/restoresync

# The main job end to end on a generated hosting account, served by the
# embedded 'serve --listen' endpoint on a free loopback port.
demo: build
	./scripts/demo.sh $(BIN)

# Installs what the tests need (openssh-server, rsync) when missing and
# root, builds the binary, then runs every test: the package tests and the
# end-to-end tests of integration/ on that binary. CI runs this (CI=true:
# a test whose tool is missing fails instead of skipping).
test: deps build
	RESTORESYNC_BIN=$(CURDIR)/$(BIN) $(GO) test $(TESTFLAGS) ./...

race: deps build
	RESTORESYNC_BIN=$(CURDIR)/$(BIN) $(GO) test -race $(TESTFLAGS) ./...

fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzFrames$$' -fuzztime $(FUZZTIME) ./transfer/
	$(GO) test -run '^$$' -fuzz '^FuzzMessages$$' -fuzztime $(FUZZTIME) ./transfer/
	$(GO) test -run '^$$' -fuzz '^FuzzValidPath$$' -fuzztime $(FUZZTIME) ./treewalk/
	$(GO) test -run '^$$' -fuzz '^FuzzTarPath$$' -fuzztime $(FUZZTIME) ./restore/dest/
	$(GO) test -run '^$$' -fuzz '^FuzzTarExtract$$' -fuzztime $(FUZZTIME) ./restore/dest/
	$(GO) test -run '^$$' -fuzz '^FuzzParseFindList$$' -fuzztime $(FUZZTIME) ./restore/

# As root: a network namespace with a shaped link (LAB_RATE, LAB_DELAY) and
# an sshd, a generated account (LAB_PROFILE, LAB_SCALE), 'bench run' with the
# baselines; writes bench/results/<date>-<profile>-<link>.md. See
# scripts/lab.sh for the knobs.
bench: deps build
	./scripts/lab.sh $(BIN)

# As root: issue 11's scale table. A loopback sshd, smallfiles trees at
# SCALE_SCALES (default 0.5 and 2: 50,000 and 200,000 files), restoresync,
# rsync -aH and tar|ssh|tar interleaved; writes
# bench/results/<date>-scale-smallfiles.md. See scripts/scale.sh.
scale: deps build
	./scripts/scale.sh $(BIN)

lint:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

deps:
	@./scripts/deps.sh

clean:
	rm -rf bin
