# The Memcached operator. `make run` and `make test` are the two commands a
# newcomer needs; both install what is missing.

CARGO ?= cargo
WASM := target/memcached.wasm
# The generic host (knows no Memcached) and the Memcached operator (the same
# host with target/memcached.wasm built in).
HOST := target/release/wasm-operator
OPERATOR := target/release/memcached-operator
CRD := deploy/crd/memcached.c5c3.io_memcacheds.yaml
GUEST_SOURCES := $(shell find guest/src wit -type f) guest/Cargo.toml Cargo.lock $(CRD)
HOST_SOURCES := $(shell find host/src host/templates sdk/rust/src sdk/python/src sdk/typescript/src wit/controller -type f) host/Cargo.toml host/build.rs $(wildcard host/link/*)
# A second, tiny logic module (another CRD) the host tests load, its
# deliberately broken variants (cargo features) the host must refuse, and the
# versions the hot-swap tests swap between.
TEST_MODULE := target/greeting.wasm
SDK_RUST_SOURCES := $(shell find sdk/rust/src wit/controller -type f) sdk/rust/Cargo.toml
TEST_MODULE_SOURCES := $(shell find tests/modules/greeting/src -type f) tests/modules/greeting/Cargo.toml $(SDK_RUST_SOURCES)
TEST_MODULE_VARIANTS := target/greeting-contract-v2.wasm target/greeting-missing-functions.wasm target/greeting-wrong-world.wasm \
	target/greeting-v2.wasm target/greeting-v1-rebuilt.wasm target/greeting-fail-on-later.wasm target/greeting-trap-always.wasm \
	target/greeting-loop-always.wasm target/greeting-allocate-always.wasm target/greeting-service-account.wasm \
	target/greeting-wrong-crd.wasm target/greeting-v2-some.wasm target/greeting-no-audiences.wasm \
	target/greeting-hostile.wasm target/greeting-owns-secret.wasm target/greeting-steps.wasm \
	target/greeting-finalizes.wasm
# A logic module written in Python (componentize-py): an Echo CRD.
PY_MODULE := target/echo-py.wasm
# The Python SDK (sdk/python), which it is built with: the SDK's tests and
# linters run in a venv under target/.
PY_SDK_SOURCES := $(wildcard sdk/python/src/wasm_operator_sdk/*.py) sdk/python/src/wasm_operator_sdk/py.typed
PY_SDK_VENV := target/venv-python-sdk
PY_SDK_DEPS := $(PY_SDK_VENV)/.requirements-installed
PY_MODULE_SOURCES := $(wildcard tests/modules/echo-py/*.py) tests/modules/echo-py/crd.yaml tests/modules/echo-py/requirements.txt \
	$(PY_SDK_SOURCES)
# A logic module written in TypeScript on the TypeScript SDK (sdk/typescript),
# built with componentize-js: a Notice CRD.
TS_SDK := sdk/typescript
TS_SDK_SOURCES := $(wildcard $(TS_SDK)/src/*.ts) $(addprefix $(TS_SDK)/,package.json package-lock.json tsconfig.json tsconfig.build.json)
TS_MODULE_DIR := tests/modules/notice-ts
TS_MODULE := target/notice-ts.wasm
TS_MODULE_SOURCES := $(wildcard $(TS_MODULE_DIR)/src/*.ts) $(addprefix $(TS_MODULE_DIR)/,crd.yaml package.json package-lock.json)
# The StaticSite example (examples/static-site): the same module in Rust,
# TypeScript and Python, held to the same golden cases and sample
# (tests/static_site.rs).
STATIC_SITE := examples/static-site
STATIC_SITE_RUST := target/static-site-rust.wasm
STATIC_SITE_TS := target/static-site-ts.wasm
STATIC_SITE_PY := target/static-site-py.wasm
STATIC_SITE_MODULES := $(STATIC_SITE_RUST) $(STATIC_SITE_TS) $(STATIC_SITE_PY)
# A module written by server-side apply (the Rust SDK's WriteModel::Apply):
# a Queue CR owning up to fifteen kinds, from a StatefulSet to a Secret.
QUEUE_MODULE := target/queue.wasm
QUEUE_MODULE_SOURCES := $(shell find tests/modules/queue/src -type f) tests/modules/queue/Cargo.toml $(SDK_RUST_SOURCES)
# Its next version (the cargo feature v2), which plans and swaps compare it with.
QUEUE_V2_MODULE := target/queue-v2.wasm
# The same Queue module on the TypeScript and the Python SDK (writes: apply).
QUEUE_TS_MODULE := target/queue-ts.wasm
QUEUE_PY_MODULE := target/queue-py.wasm
QUEUE_MODULES := $(QUEUE_MODULE) $(QUEUE_V2_MODULE) $(QUEUE_TS_MODULE) $(QUEUE_PY_MODULE)
# The Countdown example (examples/countdown): a status reconciled on its own timer,
# in Rust, TypeScript and Python, held to the same golden cases (host/tests/authoring.rs).
COUNTDOWN := examples/countdown
COUNTDOWN_MODULE := target/countdown.wasm
COUNTDOWN_TS := target/countdown-ts.wasm
COUNTDOWN_PY := target/countdown-py.wasm
TEST_MODULES := $(TEST_MODULE) $(TEST_MODULE_VARIANTS) $(QUEUE_MODULES) $(PY_MODULE) $(TS_MODULE) $(STATIC_SITE_MODULES) \
	$(COUNTDOWN_MODULE) $(COUNTDOWN_TS) $(COUNTDOWN_PY)

.PHONY: all build wasm test manifests bench bench-e2e bench-100k code-order guest-code-order bench-swap bench-plan bench-compile run render-samples envtest clean
.PHONY: playground playground-serve test-embeddings test-browser test-python-module test-typescript lint test-authoring
.PHONY: test-python-sdk lint-python
.PHONY: fuzz test-fuzz test-apply-steady
.PHONY: test-controllers bench-controllers metacontroller
.PHONY: helm
.PHONY: go-operator oci-registry cosign toxiproxy soak soak-rotations
.PHONY: docs docs-serve mdbook test-prerequisites

all: build

## build: the logic component (target/memcached.wasm), the generic host
## (target/release/wasm-operator) and the Memcached operator binary
build: $(OPERATOR) $(HOST)

wasm: $(WASM)

$(WASM): $(GUEST_SOURCES) scripts/build-wasm.sh guest/link/serving-functions.txt
	bash scripts/build-wasm.sh

# Every build names its binary with --workspace (not -p): features are then
# resolved over the whole workspace, as `cargo test --release --workspace`
# and the fuzz build resolve them, so all three share every dependency's
# artifact. Built with -p, a dependency whose features differ (kube-core's
# schema, a build script's serde) was compiled again, and everything above
# it, wasmtime and kube included: minutes of a cold `make test`.
WORKSPACE_BUILD := $(CARGO) build --release --workspace

$(HOST): $(HOST_SOURCES)
	$(WORKSPACE_BUILD) --bin wasm-operator

OPERATOR_SOURCES := $(WASM) $(HOST_SOURCES) $(shell find memcached-operator/src -type f) memcached-operator/Cargo.toml memcached-operator/build.rs
$(OPERATOR): $(OPERATOR_SOURCES)
	$(WORKSPACE_BUILD) --bin memcached-operator

# The operator as the Dockerfile ships it (Cargo.toml's `ship` profile: fat LTO), which the end-to-end
# benchmarks measure; 12-18 minutes cold on 2 cores, so only they build it.
SHIP_OPERATOR := target/ship/memcached-operator
# The check says how much of host/link/serving-functions.txt the binary still has (the linker skips
# a stale list's names without a word).
$(SHIP_OPERATOR): $(OPERATOR_SOURCES) Cargo.toml
	$(CARGO) build --profile ship --workspace --bin memcached-operator
	python3 scripts/code-order.py --check $@ host/link/serving-functions.txt

# The local control plane's binary (tests/control-plane), for `make run`.
CONTROL_PLANE := target/release/control-plane
$(CONTROL_PLANE): $(shell find tests/control-plane/src -type f) tests/control-plane/Cargo.toml
	$(WORKSPACE_BUILD) --bin control-plane

$(TEST_MODULE): $(TEST_MODULE_SOURCES) scripts/build-wasm.sh
	bash scripts/build-wasm.sh tests/modules/greeting greeting-logic $(TEST_MODULE)

target/greeting-%.wasm: $(TEST_MODULE_SOURCES) scripts/build-wasm.sh
	bash scripts/build-wasm.sh tests/modules/greeting greeting-logic $@ $*

$(QUEUE_MODULE): $(QUEUE_MODULE_SOURCES) scripts/build-wasm.sh
	bash scripts/build-wasm.sh tests/modules/queue queue-logic $@

$(QUEUE_V2_MODULE): $(QUEUE_MODULE_SOURCES) scripts/build-wasm.sh
	bash scripts/build-wasm.sh tests/modules/queue queue-logic $@ v2

$(QUEUE_TS_MODULE): $(wildcard tests/modules/queue-ts/src/*.ts) $(addprefix tests/modules/queue-ts/,crd.yaml package.json package-lock.json) \
		$(TS_SDK_SOURCES) wit/controller/controller.wit scripts/build-typescript-module.sh
	bash scripts/build-typescript-module.sh tests/modules/queue-ts $@

$(QUEUE_PY_MODULE): tests/modules/queue-py/app.py tests/modules/queue-py/crd.yaml $(PY_SDK_SOURCES) \
		wit/controller/controller.wit scripts/build-python-module.sh
	bash scripts/build-python-module.sh tests/modules/queue-py $@

$(PY_MODULE): $(PY_MODULE_SOURCES) wit/controller/controller.wit scripts/build-python-module.sh
	bash scripts/build-python-module.sh

$(TS_MODULE): $(TS_MODULE_SOURCES) $(TS_SDK_SOURCES) wit/controller/controller.wit scripts/build-typescript-module.sh
	bash scripts/build-typescript-module.sh $(TS_MODULE_DIR) $@

$(STATIC_SITE_RUST): $(shell find $(STATIC_SITE)/rust/src -type f) $(STATIC_SITE)/rust/Cargo.toml $(SDK_RUST_SOURCES) scripts/build-wasm.sh
	bash scripts/build-wasm.sh $(STATIC_SITE)/rust static-site $@

$(COUNTDOWN_MODULE): $(shell find examples/countdown/rust/src -type f) examples/countdown/rust/Cargo.toml $(SDK_RUST_SOURCES) scripts/build-wasm.sh
	bash scripts/build-wasm.sh examples/countdown/rust countdown $@

$(STATIC_SITE_TS): $(wildcard $(STATIC_SITE)/typescript/src/*.ts) $(addprefix $(STATIC_SITE)/typescript/,crd.yaml package.json package-lock.json) \
		$(TS_SDK_SOURCES) wit/controller/controller.wit scripts/build-typescript-module.sh
	bash scripts/build-typescript-module.sh $(STATIC_SITE)/typescript $@

$(STATIC_SITE_PY): $(wildcard $(STATIC_SITE)/python/*.py) $(STATIC_SITE)/python/crd.yaml $(PY_SDK_SOURCES) \
		wit/controller/controller.wit scripts/build-python-module.sh
	bash scripts/build-python-module.sh $(STATIC_SITE)/python $@

$(COUNTDOWN_TS): $(wildcard $(COUNTDOWN)/typescript/src/*.ts) $(addprefix $(COUNTDOWN)/typescript/,crd.yaml package.json package-lock.json) \
		$(TS_SDK_SOURCES) wit/controller/controller.wit scripts/build-typescript-module.sh
	bash scripts/build-typescript-module.sh $(COUNTDOWN)/typescript $@

$(COUNTDOWN_PY): $(wildcard $(COUNTDOWN)/python/*.py) $(COUNTDOWN)/python/crd.yaml $(PY_SDK_SOURCES) \
		wit/controller/controller.wit scripts/build-python-module.sh
	bash scripts/build-python-module.sh $(COUNTDOWN)/python $@

## test-typescript: the TypeScript SDK's and the Notice module's unit tests and linters (tsc strict, eslint);
## the module's tests also run the built component under Node (jco); the StaticSite's and Countdown's too
test-typescript: $(TS_MODULE) $(STATIC_SITE_TS) $(QUEUE_TS_MODULE) $(COUNTDOWN_TS)
	cd $(TS_SDK) && npm run --silent lint && npm test
	cd $(TS_MODULE_DIR) && npm run --silent lint && npm test
	cd tests/modules/queue-ts && npm run --silent lint
	cd $(STATIC_SITE)/typescript && npm run --silent lint && npm test
	cd $(COUNTDOWN)/typescript && npm run --silent lint && npm test

## test-python-module: the Echo, StaticSite and Countdown modules' logic and WIT adapter under CPython
# (No bytecode: componentize-py bundles every file of the module's and the SDK's folders.)
test-python-module: $(PY_MODULE) $(STATIC_SITE_PY) $(COUNTDOWN_PY)
	PYTHONDONTWRITEBYTECODE=1 target/venv-componentize/bin/python -m pytest -q -p no:cacheprovider tests/modules/echo-py
	PYTHONDONTWRITEBYTECODE=1 target/venv-componentize/bin/python -m pytest -q -p no:cacheprovider $(STATIC_SITE)/python
	PYTHONDONTWRITEBYTECODE=1 target/venv-componentize/bin/python -m pytest -q -p no:cacheprovider $(COUNTDOWN)/python

## test-python-sdk: the Python SDK's unit tests (helpers, errors, the glue on plain texts and on the
## bindings componentize-py generates), then its linters
test-python-sdk: $(PY_SDK_DEPS)
	cd sdk/python && PYTHONDONTWRITEBYTECODE=1 ../../$(PY_SDK_VENV)/bin/python -m pytest -q
	$(MAKE) --no-print-directory lint-python

## lint-python: ruff (lint and format) and mypy --strict on the Python SDK, the Echo, Queue, StaticSite and Countdown modules;
## ruff on scripts/code-order.py, scripts/rust-tests.py and scripts/plots.py
lint-python: $(PY_SDK_DEPS)
	cd sdk/python && ../../$(PY_SDK_VENV)/bin/ruff check --no-cache . && ../../$(PY_SDK_VENV)/bin/ruff format --no-cache --check .
	cd sdk/python && ../../$(PY_SDK_VENV)/bin/mypy --cache-dir ../../target/mypy-cache -p wasm_operator_sdk
	$(PY_SDK_VENV)/bin/ruff check --no-cache --config sdk/python/pyproject.toml tests/modules/echo-py
	$(PY_SDK_VENV)/bin/ruff format --no-cache --check --config sdk/python/pyproject.toml tests/modules/echo-py
	cd tests/modules/echo-py && MYPYPATH=../../../sdk/python/src ../../../$(PY_SDK_VENV)/bin/mypy --strict --cache-dir ../../../target/mypy-cache app.py
	$(PY_SDK_VENV)/bin/ruff check --no-cache --config sdk/python/pyproject.toml tests/modules/queue-py
	$(PY_SDK_VENV)/bin/ruff format --no-cache --check --config sdk/python/pyproject.toml tests/modules/queue-py
	cd tests/modules/queue-py && MYPYPATH=../../../sdk/python/src ../../../$(PY_SDK_VENV)/bin/mypy --strict --cache-dir ../../../target/mypy-cache app.py
	$(PY_SDK_VENV)/bin/ruff check --no-cache --config sdk/python/pyproject.toml $(STATIC_SITE)/python
	$(PY_SDK_VENV)/bin/ruff format --no-cache --check --config sdk/python/pyproject.toml $(STATIC_SITE)/python
	cd $(STATIC_SITE)/python && MYPYPATH=../../../sdk/python/src ../../../$(PY_SDK_VENV)/bin/mypy --strict --cache-dir ../../../target/mypy-cache app.py
	$(PY_SDK_VENV)/bin/ruff check --no-cache --config sdk/python/pyproject.toml $(COUNTDOWN)/python
	$(PY_SDK_VENV)/bin/ruff format --no-cache --check --config sdk/python/pyproject.toml $(COUNTDOWN)/python
	cd $(COUNTDOWN)/python && MYPYPATH=../../../sdk/python/src ../../../$(PY_SDK_VENV)/bin/mypy --strict --cache-dir ../../../target/mypy-cache app.py
	$(PY_SDK_VENV)/bin/ruff check --no-cache --config sdk/python/pyproject.toml scripts/code-order.py scripts/rust-tests.py
	$(PY_SDK_VENV)/bin/ruff format --no-cache --check --config sdk/python/pyproject.toml scripts/code-order.py scripts/rust-tests.py
	$(PY_SDK_VENV)/bin/ruff check --no-cache --config sdk/python/pyproject.toml scripts/plots.py
	$(PY_SDK_VENV)/bin/ruff format --no-cache --check --config sdk/python/pyproject.toml scripts/plots.py

$(PY_SDK_DEPS): sdk/python/requirements-dev.txt
	python3 -m venv $(PY_SDK_VENV)
	$(PY_SDK_VENV)/bin/pip install --quiet --disable-pip-version-check -r sdk/python/requirements-dev.txt
	cp sdk/python/requirements-dev.txt $@

## lint: rustfmt and clippy (the fuzz targets too), as make test runs them, and the Python SDK's linters
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings
	$(CARGO) fmt --manifest-path fuzz/Cargo.toml --all --check
	$(CARGO) clippy --manifest-path fuzz/Cargo.toml --target-dir target --release --locked -p wasm-operator-fuzz \
		--all-targets -- -D warnings
	$(MAKE) --no-print-directory lint-python

## test: every test, from a fresh clone (installs what is missing first): the Rust test binaries' build, then
## the Rust tests beside the linters and the other suites (scripts/test-suites.sh). Every suite runs even
## when an earlier one fails; the exit status says if any did. Ends with the wall time of each suite (CI must
## stay well under an hour from cold).
test: build $(TEST_MODULES) $(CONTROL_PLANE) envtest helm go-operator oci-registry cosign
	@CARGO="$(CARGO)" MAKE="$(MAKE)" bash scripts/test-suites.sh

## test-apply-steady: the steady state of tests/apply_writes.rs watched for APPLY_STEADY_SECONDS (default 300;
## make test watches 70): the Queue module on each SDK owning fifteen kinds writes nothing through resyncs
## every second and its children's status churn. Not part of make test.
APPLY_STEADY_SECONDS ?= 300
test-apply-steady: $(HOST) $(QUEUE_MODULES) $(CONTROL_PLANE) envtest
	APPLY_STEADY_SECONDS=$(APPLY_STEADY_SECONDS) $(CARGO) test --release --workspace --test apply_writes \
		an_applying_module_writes_nothing_in_steady_state

## test-fuzz: the short fuzz run make test makes: each target (see fuzz) for FUZZ_TEST_SECONDS (default 20),
## from the kept corpus alone; fails on any crash
FUZZ_TEST_SECONDS ?= 20
test-fuzz:
	FUZZ_FRESH=1 bash scripts/fuzz.sh $(FUZZ_TEST_SECONDS)

## fuzz: libFuzzer on the Memcached module's logic, the host's watch-event and cached-object decoding, its
## answer checks and the quantity parser (fuzz/), FUZZ_SECONDS each (default 300; FUZZ_TARGETS="answer quantity"
## for some), the code under test at FUZZ_OPT_LEVEL (default 1); prints runs, edges, features and crashes per
## target. `bash scripts/fuzz.sh merge` then minimizes fuzz/corpus/ with what it found. Not part of make test.
FUZZ_SECONDS ?= 300
FUZZ_OPT_LEVEL ?= 1
FUZZ_TARGETS ?=
fuzz:
	FUZZ_OPT_LEVEL=$(FUZZ_OPT_LEVEL) bash scripts/fuzz.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

## test-authoring: `wasm-operator render` and `test` through the binary, on the Greeting module and on
## the Memcached module against `memcached-operator render` (also part of make test)
test-authoring: build $(TEST_MODULE)
	$(CARGO) test --release --workspace --test authoring --test render_agreement

# The same component in the browser, Node.js and Python (issue 3). npm ci and
# a venv under target/ install their pinned dependencies; the stamps are files
# those installs write.
PLAYGROUND_DEPS := playground/node_modules/.package-lock.json
JS_EXAMPLE_DEPS := examples/javascript/node_modules/.package-lock.json
VENV := target/venv
PYTHON_DEPS := $(VENV)/.requirements-installed

## playground: the browser playground, built into playground/dist/ (any static file server can host it)
playground: $(WASM) $(PLAYGROUND_DEPS)
	cd playground && node build.mjs

## playground-serve: serve playground/dist/ on http://127.0.0.1:8080/ (PORT=n for another port)
playground-serve: playground
	node playground/serve.mjs $(or $(PORT),8080)

## test-embeddings: the JavaScript and Python embeddings, and Rust, Node and Python agreeing on every fixture
test-embeddings: $(OPERATOR) $(JS_EXAMPLE_DEPS) $(PYTHON_DEPS)
	cd examples/javascript && npm test
	$(VENV)/bin/python -m pytest -q examples/python
	node --test tests/equivalence/

# The component inside controllers written by others (issue 12): kopf,
# metacontroller (built once from third_party/metacontroller into the
# cache by scripts/metacontroller.sh; METACONTROLLER_BIN skips it) and a
# client-node informer controller. Their pinned dependencies: a venv under
# target/ and npm ci; the Node controller loads the JavaScript example's jco output.
CONTROLLERS_VENV := target/venv-controllers
CONTROLLERS_PYTHON_DEPS := $(CONTROLLERS_VENV)/.requirements-installed
NODE_CONTROLLER_DEPS := controllers/node/node_modules/.package-lock.json
JS_EXAMPLE_GEN := examples/javascript/gen/memcached.js
CONTROLLERS_DEPS := $(OPERATOR) $(CONTROL_PLANE) $(CONTROLLERS_PYTHON_DEPS) $(NODE_CONTROLLER_DEPS) $(JS_EXAMPLE_GEN)

## test-controllers: kopf, metacontroller and the Node.js controller against a local API server, each
## matching the Rust operator's children and status, and writing nothing on a second pass
test-controllers: $(CONTROLLERS_DEPS) metacontroller
	cd controllers/tests && ../../$(CONTROLLERS_VENV)/bin/python -m pytest -q -p no:cacheprovider

## metacontroller: build (or find) the metacontroller binary; prints its path
metacontroller:
	@bash scripts/metacontroller.sh

## bench-controllers: time to converge N CRs and peak memory, each framework beside the Rust host
## (BENCH_CRS=100; not part of make test)
BENCH_CRS ?= 100
bench-controllers: $(CONTROLLERS_DEPS) metacontroller
	cd controllers/tests && ../../$(CONTROLLERS_VENV)/bin/python bench.py --crs $(BENCH_CRS)

$(CONTROLLERS_PYTHON_DEPS): controllers/requirements.txt examples/python/requirements.txt
	python3 -m venv $(CONTROLLERS_VENV)
	$(CONTROLLERS_VENV)/bin/pip install --quiet --disable-pip-version-check -r controllers/requirements.txt
	touch $@

$(NODE_CONTROLLER_DEPS): controllers/node/package-lock.json
	cd controllers/node && npm ci --no-audit --no-fund

$(JS_EXAMPLE_GEN): $(WASM) $(JS_EXAMPLE_DEPS)
	cd examples/javascript && npm run build

## test-browser: the playground in Debian's Chromium (installed when missing), driven by playwright-core
test-browser: playground $(OPERATOR)
	bash scripts/install-deps.sh browser
	cd playground && node --test test/

$(PLAYGROUND_DEPS): playground/package-lock.json
	cd playground && npm ci --no-audit --no-fund

$(JS_EXAMPLE_DEPS): examples/javascript/package-lock.json
	cd examples/javascript && npm ci --no-audit --no-fund

$(PYTHON_DEPS): examples/python/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r examples/python/requirements.txt
	touch $@

## manifests: regenerate deploy/crd/ from the API types (guest/tests/crd.rs fails when it is stale);
## the module embeds it, so rebuild afterwards
manifests:
	mkdir -p deploy/crd
	$(CARGO) run --quiet --release -p memcached-logic --example crd > $(CRD).tmp
	mv $(CRD).tmp $(CRD)

## bench: desired state natively vs in the component (criterion); prints a table, then the resident
## memory each module adds (the test modules and the StaticSite example in each language)
bench: $(WASM) $(TEST_MODULE) $(PY_MODULE) $(TS_MODULE) $(STATIC_SITE_MODULES)
	$(CARGO) bench --workspace --bench desired_state

## run: the operator against a cluster. With no KUBECONFIG (and no ~/.kube/config):
## a local control plane (make envtest) in target/run where Pods start (kube-scheduler,
## kwok as the fake kubelet), the CRDs, the operator, two samples; waits until they are
## Ready, prints what it created, the Pods' addresses and the status, runs until Ctrl-C
## (RUN_ONCE=1 exits after printing). With KUBECONFIG: installs the CRD there
## and runs the operator against it. See scripts/run-local.sh for the knobs.
## MODULE=path/to/module.wasm [SAMPLES="files or folders"]: the same cluster, then
## `wasm-operator dev` on that module (its CRD, the samples, status, objects and events
## as they change; replace the file to hot-swap it), instead of Memcached.
run: $(if $(MODULE),$(HOST),$(OPERATOR)) $(CONTROL_PLANE)
	@bash scripts/run-local.sh

## render-samples: print every object the operator would own for each sample (no cluster)
render-samples: $(OPERATOR)
	@for sample in deploy/samples/*.yaml; do \
		echo "# $$sample"; $(OPERATOR) render -f $$sample || exit 1; echo; \
	done

## bench-e2e: ours and the Go operator v0.4.0 with 1000 and 10,000 CRs, each against a fresh local API
## server; prints them side by side against issue 23's targets (COUNTS=100 for one size; BENCH_FLAGS=--only-ours
## or --only-go for one operator; about 45 minutes in all on 2 cores; not part of make test)
COUNTS ?= 1000,10000
BENCH_FLAGS ?=
bench-e2e: $(SHIP_OPERATOR) go-operator
	$(WORKSPACE_BUILD) --bin bench-e2e
	target/release/bench-e2e --operator $(SHIP_OPERATOR) --counts $(COUNTS) $(BENCH_FLAGS)

## bench-100k: ours alone with 10,000 then 100,000 CRs, without the idle resync pass (100 minutes of
## waiting at 100,000) or the idle touch (the API server outgrows 24 GiB during it at 100,000); its
## growth between the two and the API server's and etcd's share; about an hour on 2 cores and ~20 GiB
## of RAM at the peak; tables in target/bench-e2e/results-100k.md
bench-100k: $(SHIP_OPERATOR)
	$(WORKSPACE_BUILD) --bin bench-e2e
	target/release/bench-e2e --operator $(SHIP_OPERATOR) --counts 10000,100000 --only-ours --no-resync-pass --no-touch-pass --out target/bench-e2e/results-100k.md

## code-order: rewrite host/link/serving-functions.txt, the functions the shipped operator runs while
## serving, laid out first by the linker, from one 1000-CR run of it (needs root: it turns the disk's
## readahead off for the run; a few minutes; run it after large changes to the host, then rebuild)
code-order: $(SHIP_OPERATOR)
	$(WORKSPACE_BUILD) --bin bench-e2e
	python3 scripts/code-order.py $(SHIP_OPERATOR) host/link/serving-functions.txt

## guest-code-order: rewrite guest/link/serving-functions.txt, the Memcached module's functions in the
## order a reconcile first runs them, which componentize lays out first: a profile run of the guest's
## core module over deploy/samples (seconds); run it after changing the guest, then make wasm
guest-code-order: $(WASM)
	bash scripts/build-wasm.sh
	$(WORKSPACE_BUILD) --example guest_code_order
	target/release/examples/guest_code_order target/wasm/wasm32-unknown-unknown/release/memcached_logic.wasm guest/link/serving-functions.txt

## bench-plan: `wasm-operator plan -f` of greeting v2 against v1 over 1000 and 10,000 parents
## (PLAN_COUNTS=...): wall time, CPU and peak memory (not part of make test)
PLAN_COUNTS ?= 1000,10000
bench-plan: $(HOST) $(TEST_MODULE) target/greeting-v2.wasm
	PLAN_COUNTS=$(PLAN_COUNTS) bash scripts/bench-plan.sh

## bench-swap: how long a new module version takes to go live (cold and warm compile cache), and the
## dry run's cost per parent, with 1000 parents (SWAP_COUNTS=100,1000 for more sizes; SWAP_MODULE=memcached
## for the Memcached module; SWAP_STRATEGIES=tiered,optimized for both compile strategies; not part of make test)
SWAP_COUNTS ?= 1000
SWAP_MODULE ?= greeting
SWAP_STRATEGIES ?= tiered,optimized
bench-swap: $(HOST) $(WASM) $(TEST_MODULE) target/greeting-v2.wasm target/greeting-v1-rebuilt.wasm
	$(WORKSPACE_BUILD) --bin bench-swap
	target/release/bench-swap --module $(SWAP_MODULE) --counts $(SWAP_COUNTS) --strategies $(SWAP_STRATEGIES)

## bench-compile: peak memory and time of compiling each module in the child process `run` uses
## (1 and 2 compile threads; BASELINE=path/to/older/wasm-operator runs its in-process precompile beside it)
bench-compile: $(HOST) $(WASM) $(TEST_MODULE)
	$(WORKSPACE_BUILD) --bin bench-compile
	target/release/bench-compile $(if $(BASELINE),--baseline $(BASELINE))

## go-operator: build (or find) the C5C3 Go operator v0.4.0 (tests/go-operator/go.mod), cached outside
## the repo; prints its path (GO_OPERATOR_BINARY=path skips the build). bench-e2e and tests/migration.rs run it.
go-operator:
	@bash scripts/go-operator.sh

## oci-registry: build (or find) CNCF distribution's registry (tests/registry/go.mod), cached outside the
## repo; prints its path (REGISTRY_BINARY=path skips the build). The LogicModule tests run it on loopback.
oci-registry:
	@bash scripts/registry.sh

## cosign: build (or find) sigstore's cosign CLI (tests/cosign/go.mod), cached outside the repo; prints its
## path (COSIGN_BINARY=path skips the build). tests/module_signature.rs signs modules with it.
cosign:
	@bash scripts/cosign.sh

## soak: two replicas of memcached-operator with leader election, SOAK_CRS Memcached CRs (1000) on kwok nodes,
## for SOAK_MINUTES (60), under seeded random churn (SOAK_SEED) and faults: CR edits, deletes and re-creates,
## children deleted or edited by hand, Secret rotations, hot swaps (and one that must roll back), API server
## restarts, leader kills, and latency, resets and partitions through Toxiproxy; prints a table (README "Soak").
## Not part of make test.
SOAK_MINUTES ?= 60
SOAK_CRS ?= 1000
SOAK_SEED ?= 22
SOAK_FLAGS ?=
SOAK_FAILING := target/memcached-soak-fail-on-later.wasm
soak: $(OPERATOR) $(HOST) $(SOAK_FAILING) toxiproxy
	$(WORKSPACE_BUILD) --bin soak
	target/release/soak --minutes $(SOAK_MINUTES) --crs $(SOAK_CRS) --seed $(SOAK_SEED) $(SOAK_FLAGS)

## soak-rotations: the soak's largest burst alone: Secret rotations, each rolling every Memcached of a namespace
## that references the Secret, timed at each --concurrency (ROTATION_FLAGS, e.g. "--concurrency 8,16,32"),
## direct and behind the soak's worst latency; prints the table that chose the default (README "Soak").
ROTATION_FLAGS ?=
soak-rotations: $(OPERATOR) $(HOST) $(SOAK_FAILING) toxiproxy
	$(WORKSPACE_BUILD) --bin soak
	target/release/soak rotations $(ROTATION_FLAGS)

# The Memcached module trapping on parents annotated soak.c5c3.io/fail-on-later: the version make soak
# swaps in once and the operator must roll back. Built only for make soak.
$(SOAK_FAILING): $(GUEST_SOURCES) scripts/build-wasm.sh guest/link/serving-functions.txt
	bash scripts/build-wasm.sh guest memcached-logic $@ soak-fail-on-later

## toxiproxy: build (or find) Shopify's Toxiproxy server (tests/toxiproxy/go.mod), cached outside the repo;
## prints its path (TOXIPROXY_BINARY=path skips the build). make soak puts it between the operators and the API server.
toxiproxy:
	@bash scripts/toxiproxy.sh

## envtest: build (or find) etcd, kube-apiserver, kube-controller-manager, kubectl, kube-scheduler and kwok;
## prints the folder
envtest:
	@bash scripts/envtest.sh

## helm: build (or find: HELM_BINARY) helm from the Go module pinned in tests/helm/go.mod; prints its path.
## charts/memcached-operator uses it; tests/helm.rs tests the chart with it
helm:
	@bash scripts/helm.sh

## docs: the book (docs/, mdBook) built into target/book/ (mdbook from scripts/mdbook.sh: pinned, installed once
## into ~/.cache/memcached-operator/; MDBOOK=path uses one you have)
docs:
	@mdbook="$$(bash scripts/mdbook.sh | tail -n1)" && "$$mdbook" build docs

## docs-serve: build the book and serve target/book/ on http://127.0.0.1:3000/ (PORT=n for another port);
## make docs again after an edit and reload
docs-serve: docs
	python3 -m http.server --bind 127.0.0.1 --directory target/book $(or $(PORT),3000)

## mdbook: install (or find) the pinned mdbook; prints its path
mdbook:
	@bash scripts/mdbook.sh

## plots: the benchmark pages' plots (docs/src/images/bench-*.svg) drawn again from the result files in
## docs/src/benchmarks/results/ (scripts/plots.py, Python's standard library alone); tests/book.rs checks
## that they are what those files make now
.PHONY: plots
plots:
	python3 scripts/plots.py

# (After every variable it names: a rule's prerequisites expand where it is read.)
## test-prerequisites: what the suites beside the Rust tests build first (make test builds it before they start)
test-prerequisites: playground $(OPERATOR) metacontroller $(CONTROLLERS_DEPS) $(JS_EXAMPLE_DEPS) $(PYTHON_DEPS) $(PY_SDK_DEPS) \
		$(TS_MODULE) $(STATIC_SITE_TS) $(PY_MODULE) $(STATIC_SITE_PY)

clean:
	$(CARGO) clean
