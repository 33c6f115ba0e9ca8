# syntax=docker/dockerfile:1
# One image for every Drydock service; the command chooses the service:
#   docker run IMAGE serve ingress        (also: dashboard, credential-proxy, coder-worker, ...)
# Every service answers /healthz, /readyz and /metrics on DRYDOCK_HTTP_PORT (8000), workers
# included (their health listener), so probes are the same for all.
#
# DEV=1 (the Tiltfile sets it) leaves /app writable by the service user for live updates.

# PYTHON: any Debian bookworm image with python and pip (`pdm run images --base debootstrap`
# makes one without a registry).
ARG PYTHON=python:3.12-slim-bookworm

FROM ${PYTHON} AS dependencies
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PDM_CHECK_UPDATE=false
RUN pip install "pdm>=2.29" "hishel<2"
WORKDIR /build
COPY pyproject.toml pdm.lock README.md ./
# The locked production dependencies, hash-checked, in a virtual environment of their own.
RUN pdm export --prod -o requirements.txt \
    && python -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-deps --require-hashes -r requirements.txt

FROM ${PYTHON}
ARG DEV=0
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DRYDOCK_ENVIRONMENT=production \
    DRYDOCK_HTTP_HOST=0.0.0.0 \
    DRYDOCK_HTTP_PORT=8000
# git: the credential proxy inspects each push for protected paths with it.
RUN apt-get update \
    && apt-get install --yes --no-install-recommends git \
    && rm -rf /var/lib/apt/lists/*
RUN groupadd --system --gid 10001 drydock \
    && useradd --system --uid 10001 --gid drydock --home-dir /home/drydock --create-home --shell /usr/sbin/nologin drydock
COPY --from=dependencies /opt/venv /opt/venv
WORKDIR /app
COPY pyproject.toml README.md langgraph.json ./
COPY libs ./libs
COPY services ./services
# Editable, so that `drydock.services` entry points are registered and the code lives in /app
# (where the Tiltfile's live update syncs it). Only the project itself: dependencies are above.
RUN pip install --no-deps --no-cache-dir -e . \
    && if [ "$DEV" = "1" ]; then chown -R drydock:drydock /app; fi \
    && drydock version
USER 10001:10001
EXPOSE 8000
ENTRYPOINT ["drydock"]
CMD ["serve", "web"]
