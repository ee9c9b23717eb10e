# notifyhub: the hub against external Redis and PostgreSQL (see compose.yaml).
# Build stage: a wheel of notifyhub (Alembic's scripts inside it) installed, with its
# runtime dependencies only, into a virtualenv, at the versions requirements/runtime.txt
# pins (`make lock`). No `embedded` extra: the production image carries no Valkey or
# PostgreSQL binaries.
FROM python:3.12-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml README.md ./
COPY requirements/runtime.txt ./requirements/runtime.txt
COPY src ./src
COPY migrations ./migrations
RUN python -m venv /opt/notifyhub \
 && /opt/notifyhub/bin/pip install -c requirements/runtime.txt . \
 && /opt/notifyhub/bin/pip uninstall --yes pip

# Run stage: the virtualenv alone, owned by root, run by an unprivileged user.
FROM python:3.12-slim
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PATH=/opt/notifyhub/bin:$PATH
RUN useradd --create-home --uid 10001 notifyhub
COPY --from=build /opt/notifyhub /opt/notifyhub
WORKDIR /home/notifyhub
USER notifyhub
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz').status != 200)"
# `serve` applies pending migrations before it listens; `notifyhub migrate` does only that.
CMD ["notifyhub", "serve", "--host", "0.0.0.0", "--port", "8000"]
