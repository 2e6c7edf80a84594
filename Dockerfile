# One image for every LiteHit service (api, worker, migrate, flower).
FROM python:3.11-slim

RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY . /app
# pip compiles the C engine (cffi, API mode); the import is the smoke test of the extension.
RUN pip install --no-cache-dir -e '.[flower]' \
 && python -c "import core_c._core; import core_c; core_c.Lane().close()" \
 && useradd --create-home --uid 10001 litehit \
 && mkdir -p /data/storage && chown -R litehit /data

USER litehit
ENV LITEHIT_HOME=/data LITEHIT_STORAGE_ROOT=/data/storage PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["uvicorn", "api.main:app", "--host", "0.0.0.0", "--port", "8000"]
