# tracecard: proxy, API and viewer in one process.
# No Docker engine runs on the machines this project is developed and tested on, so every step
# below is the same command the README and scripts/setup use (pip install, npm ci); CI runs
# those commands, not this file.

# --- assets: htmx from its npm package (pinned in package-lock.json) -------------------------
FROM node:20-bookworm-slim AS assets
WORKDIR /build
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --no-audit --no-fund --loglevel=error

# --- build: the Python package as a wheel ------------------------------------------------------
FROM python:3.11-slim-bookworm AS build
WORKDIR /build
COPY pyproject.toml README.md ./
COPY server ./server
COPY scorers ./scorers
COPY viewer ./viewer
COPY traces ./traces
COPY --from=assets /build/node_modules/htmx.org/dist/htmx.min.js ./viewer/static/vendor/htmx.min.js
RUN python -m pip wheel --no-cache-dir --wheel-dir /wheels .

# --- runtime -----------------------------------------------------------------------------------
FROM python:3.11-slim-bookworm
RUN useradd --create-home --uid 10001 tracecard \
    && mkdir -p /data && chown tracecard:tracecard /data
COPY --from=build /wheels /wheels
RUN python -m pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER tracecard
WORKDIR /data
VOLUME ["/data"]
ENV TRACECARD_DB=sqlite:////data/tracecard.db \
    TRACECARD_SANDBOX_ROOT=/data/sandboxes
EXPOSE 7800
# Bound to 0.0.0.0 inside the container, tracecard refuses to start without TRACECARD_API_TOKEN.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:7800/healthz', timeout=4).status == 200 else 1)"
CMD ["tracecard", "serve", "--host", "0.0.0.0", "--port", "7800"]
