# The peerops images for people with Docker: the same content as `npm run build:image`
# (scripts/build-image.ts), which builds them without a daemon from Debian's packages. One file, two
# targets; test/image/packages.test.ts keeps their package lists, users and commands in step with the script.
#
#   docker build --target controller -t peerops/controller:0.1.0 .
#   docker build --target agent -t peerops/agent:0.1.0 .
#
# docs/kubernetes.md, "The images".

# The release bundle (scripts/build-release.ts) and the Node 24 binary of the `node` npm package.
FROM node:24-bookworm AS bundle
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN node scripts/build-release.ts --out /out \
 && cp node_modules/node/bin/node /out/node

# peerops-wireguard (wireguard-host/): every userspace tunnel in one process, run by the WireGuard keeper.
FROM golang:1.24-bookworm AS wireguard-host
WORKDIR /src
COPY wireguard-host/ ./
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/peerops-wireguard .

# `peerops serve`: non-root (the chart's uid 10001), runs on a read-only root file system.
FROM debian:bookworm-slim AS controller
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates git \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* /usr/share/man/* \
 && find /usr/share/doc -type f ! -name copyright -delete \
 && echo 'peerops:x:10001:10001:peerops:/var/lib/peerops:/usr/sbin/nologin' >> /etc/passwd \
 && echo 'peerops:x:10001:' >> /etc/group \
 && mkdir -p /var/lib/peerops && chown 10001:10001 /var/lib/peerops
COPY --from=bundle /out/node /usr/local/bin/node
COPY --from=bundle /out/peerops.mjs /out/peerops /out/SHA256SUMS /opt/peerops/
RUN ln -s /opt/peerops/peerops /usr/local/bin/peerops
ENV NODE_ENV=production
USER 10001:10001
WORKDIR /var/lib/peerops
ENTRYPOINT ["/usr/local/bin/node", "/opt/peerops/peerops.mjs"]
CMD ["serve"]

# `peerops agent`: root in its container; the chart's DaemonSet drops every capability but what it needs.
FROM debian:bookworm-slim AS agent
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates iproute2 wireguard-tools wireguard-go bird2 iputils-ping procps \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/* /var/log/* /usr/share/man/* \
 && find /usr/share/doc -type f ! -name copyright -delete \
 && mkdir -p /etc/peerops/agent /var/run/wireguard
COPY --from=bundle /out/node /usr/local/bin/node
COPY --from=bundle /out/peerops.mjs /out/peerops /out/SHA256SUMS /opt/peerops/
COPY image/wireguard-keeper.ts /opt/peerops/wireguard-keeper.ts
COPY --chmod=755 image/wireguard-go-shim.sh /usr/local/sbin/wireguard-go
COPY --from=wireguard-host /out/peerops-wireguard /usr/local/bin/peerops-wireguard
RUN ln -s /opt/peerops/peerops /usr/local/bin/peerops
ENV NODE_ENV=production
USER 0:0
WORKDIR /
ENTRYPOINT ["/usr/local/bin/node", "/opt/peerops/peerops.mjs"]
CMD ["agent", "--config", "/etc/peerops/agent/agent.json"]
