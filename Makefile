# The Memcached operator. `make run` and `make test` are the two commands a
# newcomer needs; both install what is missing.

CARGO ?= cargo
WASM := target/memcached.wasm
OPERATOR := target/release/memcached-operator
CRD := deploy/crd/memcached.c5c3.io_memcacheds.yaml
GUEST_SOURCES := $(shell find guest/src wit -type f) guest/Cargo.toml Cargo.lock

.PHONY: all build wasm test manifests bench run envtest clean

all: build

## build: the logic component (target/memcached.wasm) and the operator binary
build: $(OPERATOR)

wasm: $(WASM)

$(WASM): $(GUEST_SOURCES) scripts/build-wasm.sh
	bash scripts/build-wasm.sh

$(OPERATOR): $(WASM) $(shell find host/src -type f) host/Cargo.toml host/build.rs
	$(CARGO) build --release -p memcached-operator

## test: every test, from a fresh clone (installs what is missing first)
test: build
	$(CARGO) test --release --workspace --no-fail-fast

## manifests: regenerate deploy/crd/ from the API types (host/tests/cli.rs fails when it is stale)
manifests: $(OPERATOR)
	mkdir -p deploy/crd
	$(OPERATOR) crd > $(CRD)

## bench: desired state natively vs in the component (criterion); prints a table
bench: $(WASM)
	$(CARGO) bench -p memcached-operator --bench desired_state

## run: render every sample (the operator's run mode comes with the host issue)
run: $(OPERATOR)
	@for sample in deploy/samples/*.yaml; do \
		echo "# $$sample"; $(OPERATOR) render -f $$sample || exit 1; echo; \
	done

## envtest: build (or find) etcd, kube-apiserver, kube-controller-manager and kubectl; prints the folder
envtest:
	@bash scripts/envtest.sh

clean:
	$(CARGO) clean
