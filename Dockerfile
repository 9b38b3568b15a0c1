# Calypso's image: the server, the bundled embedding model and the OCR engine, run as a non-root user with the
# data in a volume. See docs/deploy.md, "Containers".
#
#   docker build -t calypso .                      # or: podman build --format docker -t calypso .
#   docker run -p 8080:8080 -v calypso:/var/lib/calypso -e CALYPSO_ADMIN_KEY=... calypso
#
# Every setting is a CALYPSO_* variable (`docker run --rm calypso calypso settings` lists them). BASE is any
# Debian bookworm image with python3 >= 3.11 and its venv module (a locally made one where no registry is reached).
ARG BASE=python:3.11-slim-bookworm

FROM ${BASE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
# The extras: the bundled embedding model (embed) and xAI's gRPC API (xai), as `make serve` installs them.
ARG EXTRAS=embed,xai
RUN python3 -m venv /opt/calypso
WORKDIR /build
# Dependencies first, in their own layer: a change to the code does not download them again.
COPY pyproject.toml README.md ./
RUN mkdir -p src/calypso && touch src/calypso/__init__.py \
    && /opt/calypso/bin/pip install ".[${EXTRAS}]" \
    && /opt/calypso/bin/pip uninstall --yes calypso && rm -rf src build
COPY src ./src
# pip and setuptools stay behind in this stage: the image runs the server, it builds nothing.
RUN /opt/calypso/bin/pip install --no-deps . && rm -rf build
# The embedding model's compact graphs are built from the package's weights once (docs/deploy.md, "the bundled
# model"): here, into the image's cache, so no container builds them at start. Ingesting and searching one
# small document also proves the installed server works.
ENV XDG_CACHE_HOME=/opt/calypso-cache
RUN printf '# Build check\n\nThe image embeds its passages with the bundled model.\n' > /tmp/check.md \
    && /opt/calypso/bin/calypso ingest --home /tmp/check-home /tmp/check.md \
    && /opt/calypso/bin/calypso search --home /tmp/check-home "bundled model" \
    && rm -rf /tmp/check-home /tmp/check.md \
    && chmod -R a+rX /opt/calypso-cache && ls -l /opt/calypso-cache/calypso/models \
    && /opt/calypso/bin/pip uninstall --yes --quiet pip setuptools

FROM ${BASE}
# Debian's Tesseract reads the scripts PP-OCRv6 lacks (docs/formats.md, "Scans and images"); add language packs
# here (tesseract-ocr-jpn, tesseract-ocr-kor, tesseract-ocr-chi-sim ...), or set it empty for PP-OCRv6 alone.
ARG OCR_PACKAGES=tesseract-ocr
RUN if [ -n "${OCR_PACKAGES}" ]; then \
        apt-get update \
        && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends ${OCR_PACKAGES} \
        && apt-get clean && rm -rf /var/lib/apt/lists/*; \
    fi \
    && groupadd --system --gid 10001 calypso \
    && useradd --system --uid 10001 --gid calypso --home-dir /var/lib/calypso --no-create-home \
        --shell /usr/sbin/nologin calypso \
    && install -d -o calypso -g calypso -m 0750 /var/lib/calypso
COPY --from=build /opt/calypso /opt/calypso
# Writable by the server: a model chosen at run time (CALYPSO_EMBEDDING_MODEL) caches its graph beside these.
COPY --from=build --chown=calypso:calypso /opt/calypso-cache /opt/calypso-cache
ENV PATH=/opt/calypso/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    XDG_CACHE_HOME=/opt/calypso-cache \
    CALYPSO_HOME=/var/lib/calypso \
    CALYPSO_HOST=0.0.0.0 \
    CALYPSO_PORT=8080 \
    CALYPSO_GRPC_PORT=50051
# The SQLite file, signing.key and index snapshots (the embedded default), or only the index files of a process
# on PostgreSQL: a volume either way.
VOLUME ["/var/lib/calypso"]
USER calypso
WORKDIR /var/lib/calypso
EXPOSE 8080 50051
# Liveness: the process answers. Readiness (/readyz: database, index follower, workers) is the orchestrator's.
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('CALYPSO_PORT', '8080'), timeout=4)"]
CMD ["calypso", "serve"]
