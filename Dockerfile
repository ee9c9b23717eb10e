# notifyhub: the hub against external Redis and PostgreSQL (see compose.yaml).
FROM python:3.12-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 notifyhub
WORKDIR /app
COPY pyproject.toml README.md ./
COPY src ./src
COPY migrations ./migrations
# Editable install keeps migrations/ beside the package, where `notifyhub migrate` finds it.
RUN pip install -e .
USER notifyhub
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:8000/healthz').status != 200)"
CMD ["notifyhub", "serve", "--host", "0.0.0.0", "--port", "8000"]
