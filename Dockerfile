# SPDX-License-Identifier: Apache-2.0
# Container image for the gpuscaler daemon: a Debian 12 stage runs the same
# meson build as the README, and a debian:12-slim stage ships the binary with
# only the shared libraries it links, running as a non-root numeric user on a
# read-only root filesystem.
#
#   docker build -t gpuscaler:dev .
#   docker run --rm --read-only gpuscaler:dev version
#
# e2e/test_container.py checks this file: exactly two stages (debian:12 and
# debian:12-slim), RUNTIME_PACKAGES equal to the Debian packages of the
# libraries the built binary needs (ldd + dpkg -S), a numeric non-root USER
# and ENTRYPOINT ["gpuscaler"].

FROM debian:12 AS build
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        build-essential meson ninja-build pkg-config \
        libuv1-dev libcurl4-openssl-dev libjansson-dev libyaml-dev libssl-dev zlib1g-dev \
        node-llhttp \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup build -Dtests=disabled --buildtype=release \
 && ninja -C build \
 && install -D -m 0755 build/cmd/gpuscaler/gpuscaler /out/gpuscaler \
 && strip /out/gpuscaler \
 && /out/gpuscaler version

FROM debian:12-slim
# Runtime shared libraries, one Debian package per library the binary links
# (libuv, libcurl, jansson, libyaml, OpenSSL). zlib (gzip traces) is linked
# too, but its package zlib1g is part of debian:12-slim already, so it is not
# installed again. Keep in step with e2e/test_container.py, which derives this
# set from the built binary (its NEEDED libraries, less the base image's).
ARG RUNTIME_PACKAGES="libuv1 libcurl4 libjansson4 libyaml-0-2 libssl3"
# Not libraries: the CA trust store for HTTPS to Prometheus and upstream adapters.
ARG RUNTIME_DATA_PACKAGES="ca-certificates"
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update \
 && apt-get install -y --no-install-recommends ${RUNTIME_PACKAGES} ${RUNTIME_DATA_PACKAGES} \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/archives/*.deb /var/cache/debconf/*-old \
           /var/log/apt /var/log/dpkg.log
COPY --from=build /out/gpuscaler /usr/local/bin/gpuscaler
LABEL org.opencontainers.image.title="gpuscaler" \
      org.opencontainers.image.description="Autoscaler for GPU inference Deployments on Kubernetes" \
      org.opencontainers.image.licenses="Apache-2.0"
# The daemon writes nothing to its root filesystem: state is checkpointed to a
# ConfigMap, and --record needs a mounted volume. HOME points at /tmp so a
# library that looks for dotfiles finds the (optionally mounted) writable dir.
ENV HOME=/tmp
WORKDIR /
# 9090: plain HTTP /metrics, /healthz, /readyz; 6443: HTTPS external metrics API.
EXPOSE 9090 6443
USER 65532:65532
ENTRYPOINT ["gpuscaler"]
CMD ["run"]
