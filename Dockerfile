# chunlian serve in a container: slim Python, no torch, non-root, the model and fonts inside (package data).
#   docker build -t chunlian .   &&   docker run -p 8000:8000 -e CHUNLIAN_MAX_CONCURRENCY=8 chunlian
# Settings: any CHUNLIAN_<NAME> environment variable (README, Serving). Linted by hadolint in
# tests/test_deploy_image.py, which also runs the CMD below from a plain (non-editable) install.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# --- build: a virtual environment with chunlian and its runtime dependencies only ---------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/chunlian
WORKDIR /src
COPY pyproject.toml README.md ./
COPY chunlian ./chunlian
# the default install and the Redis client (CHUNLIAN_REDIS_URL): ONNX Runtime, no torch (no train/hf extras)
RUN /opt/chunlian/bin/pip install ".[redis]" \
    && /opt/chunlian/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('torch') is not None)"

# --- runtime ------------------------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="chunlian" \
      org.opencontainers.image.description="Offline AI spring-festival couplets (春联): page, HTTP API, /metrics" \
      org.opencontainers.image.licenses="MIT"
RUN groupadd --system --gid 10001 chunlian \
    && useradd --system --uid 10001 --gid chunlian --home-dir /home/chunlian --create-home --shell /usr/sbin/nologin chunlian
COPY --from=build /opt/chunlian /opt/chunlian
ENV PATH=/opt/chunlian/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    CHUNLIAN_WORKERS=2 \
    CHUNLIAN_THREADS=1 \
    CHUNLIAN_PRECISION=int8
USER 10001:10001
WORKDIR /home/chunlian
EXPOSE 8000
# /readyz turns 200 once the model is loaded and warmed (a few seconds); /healthz is the liveness probe
HEALTHCHECK --interval=15s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
# exec form: the server is PID 1 and gets SIGTERM itself; uvicorn stops accepting, finishes what is in flight
# and closes the engine before it exits
STOPSIGNAL SIGTERM
CMD ["chunlian", "serve", "--host", "0.0.0.0", "--port", "8000"]
