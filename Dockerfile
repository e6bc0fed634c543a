# syntax=docker/dockerfile:1
# One image for every binary: abi-discovery, abi-documents, abictl and the
# example modules.
# Build: docker build -t abi:local .   (docker compose up builds it too)

# --- builder: the whole workspace, release mode ------------------------------
FROM rust:1.95-slim-bookworm AS builder
WORKDIR /src
# Only what the build reads. .dockerignore keeps target/, .venv, .git and the
# secrets out of the context a builder without BuildKit sends.
COPY Cargo.toml Cargo.lock ./
COPY proto proto
COPY crates crates
COPY examples examples
COPY vendor vendor
COPY .cargo .cargo
RUN cargo build --release --locked -p abi-discovery -p abi-documents -p abi-cli -p abi-examples \
 && mkdir /out \
 && cp target/release/abi-discovery target/release/abi-documents target/release/abictl \
       target/release/provider target/release/consumer \
       target/release/rollout-a target/release/rollout-b /out/

# --- runtime: slim, non-root --------------------------------------------------
FROM debian:bookworm-slim
# curl answers the compose healthchecks on the modules' /ready probe; abictl
# (below) answers abi-discovery's.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 abi \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --shell /usr/sbin/nologin abi
COPY --from=builder /out/ /usr/local/bin/
# The demo provider's web app folder (its page and stylesheet).
COPY --from=builder /src/examples/apps /usr/local/share/abi/apps
# User and group abi (10001:10001). A secret file bind-mounted from the host
# keeps its host owner and mode: see the top of docker-compose.yml.
USER 10001:10001
ENV NATS_URL=nats://nats:4222 \
    ABI_LOG=info \
    DEMO_APPS_DIR=/usr/local/share/abi/apps
CMD ["abi-discovery"]
