# syntax=docker/dockerfile:1
# Multi-stage: build (with compilers for the native addons) → slim, non-root runtime.

FROM node:20-bookworm-slim AS build
WORKDIR /app
# node-gyp needs these for native addons (hnswlib-node builds from source).
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
COPY package.json package-lock.json tsconfig.json tsconfig.build.json ./
COPY src ./src
# `npm ci` runs the `prepare` script, which compiles src/ into dist/.
RUN npm ci --no-audit --no-fund \
 && npm prune --omit=dev

FROM node:20-bookworm-slim AS runtime
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    BURROW_DATA_DIR=/data
WORKDIR /app
COPY --from=build --chown=node:node /app/node_modules ./node_modules
COPY --from=build --chown=node:node /app/dist ./dist
COPY --chown=node:node package.json ./
COPY --chown=node:node openapi ./openapi
COPY --chown=node:node console ./console
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME ["/data"]
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD node -e "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"
# Exec form: node runs as PID 1 and receives SIGTERM itself, for a graceful stop.
CMD ["node", "dist/bin/server.js"]
