# The operator image: ghcr.io/c5c3/memcached-operator:0.1.0
#
#   docker build -t ghcr.io/c5c3/memcached-operator:0.1.0 .
#
# Builds the logic component (wasm32, as scripts/build-wasm.sh does) and the
# host binary, which embeds it, then copies the binary onto a distroless base
# that runs as the nonroot user. Not built on the project's machines (no
# container engine there); deploy/manager/deployment.yaml runs it.

# The exact Rust this repository builds with (rust-version, and the machine
# host/link/serving-functions.txt was written on): another release, a patch
# one too, gives every function another symbol name.
FROM docker.io/library/rust:1.95.0-bookworm AS build
WORKDIR /src
RUN rustup target add wasm32-unknown-unknown
COPY . .
# Built as `make`'s ship build and the benchmarks build it (--workspace, not
# -p): -p resolves the dependencies' features anew, which changes their
# symbol names, and host/link/serving-functions.txt (the code the operator
# serves with, laid out first) then matched under half of them. The check
# prints how much of that list the binary has.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    bash scripts/build-wasm.sh \
    && cargo build --profile ship --locked --workspace --bin memcached-operator --bin wasm-operator \
    && python3 scripts/code-order.py --check target/ship/memcached-operator host/link/serving-functions.txt \
    && cp target/ship/memcached-operator target/ship/wasm-operator /usr/local/bin/ \
    && mkdir -p /opt/memcached-operator \
    && memcached-operator precompile -o /opt/memcached-operator/memcached.cwasm

# glibc and libgcc (the binary links them dynamically), no shell.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /usr/local/bin/memcached-operator /usr/local/bin/memcached-operator
# The generic host, for running other modules beside or instead of Memcached.
COPY --from=build /usr/local/bin/wasm-operator /usr/local/bin/wasm-operator
# The logic component compiled ahead of time for this binary (deploy/ runs it
# with --module ... --allow-precompiled): no compile at start. It targets the
# build machine's CPU; build the image on the CPU family the nodes have.
COPY --from=build /opt/memcached-operator/memcached.cwasm /opt/memcached-operator/memcached.cwasm
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/memcached-operator"]
CMD ["run"]
