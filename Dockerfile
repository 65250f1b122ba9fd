# payd's OCI image: the release binary on a slim Debian base, as a non-root user.
#
#   cargo build --release --bin payd
#   docker build -t payd:0.2.0 .                         # or: buildah bud -t payd:0.2.0 .
#
# BASE is any Debian bookworm image; where the public one cannot be pulled, make one
# (docs/deployment.md, "The image"):
#   mmdebstrap --variant=minbase bookworm base.tar && podman import base.tar localhost/debian-base
#   buildah bud --isolation chroot --build-arg BASE=localhost/debian-base -t payd:0.2.0 .
# PAYD_BIN is the binary to put in it (target/release/payd by default).
ARG BASE=docker.io/library/debian:bookworm-slim
FROM ${BASE}
ARG PAYD_BIN=target/release/payd

RUN groupadd --system payd \
    && useradd --system --gid payd --home-dir /var/lib/payd --shell /usr/sbin/nologin payd \
    && install -d -o payd -g payd -m 0750 /var/lib/payd

COPY ${PAYD_BIN} /usr/local/bin/payd
COPY config/default.toml /usr/share/doc/payd/default.toml
COPY LICENSE /usr/share/doc/payd/LICENSE

# Production by default: payd refuses to start until PAYD_SECURITY__KEY_PEPPER,
# PAYD_SECURITY__MASTER_KEY and PAYD_HTTP__PUBLIC_URL are given (compose.yaml shows them).
ENV PAYD_MODE=production \
    PAYD_LISTEN=0.0.0.0:8080 \
    PAYD_DATABASE_URL=sqlite:///var/lib/payd/payd.db?mode=rwc \
    PAYD_LOG__FORMAT=json \
    PAYD_SANDBOX__DATA_DIR=/var/lib/payd/data

USER payd
WORKDIR /var/lib/payd
VOLUME ["/var/lib/payd"]
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
    CMD ["/usr/local/bin/payd", "health"]
ENTRYPOINT ["/usr/local/bin/payd"]
CMD ["serve"]
