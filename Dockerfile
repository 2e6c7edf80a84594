# One image for every LiteHit service (api, worker, online, migrate, flower), built in two stages:
# `build` compiles the C engine (cffi, API mode) with gcc into a virtualenv; the final stage gets
# that virtualenv and no compiler. The base image is a build arg (scripts/compose-test passes a
# stand-in built from Debian packages where registry images cannot be pulled); so is the package
# index pip uses (empty: pip's default).
ARG LITEHIT_PYTHON_IMAGE=python:3.11-slim

FROM ${LITEHIT_PYTHON_IMAGE} AS build
ARG LITEHIT_PIP_INDEX_URL=
LABEL litehit.stage=build
# gcc, and Python's headers when the base image has none (a Debian python3 base).
RUN headers=$(python -c "import os, sys, sysconfig; \
print('' if os.path.exists(sysconfig.get_paths()['include'] + '/Python.h') else 'libpython%d.%d-dev' % sys.version_info[:2])") \
 && apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev $headers \
 && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/litehit
ENV PATH=/opt/litehit/bin:$PATH PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
# The dependencies first, from pyproject.toml alone: this layer is reused until they change.
COPY pyproject.toml ./
RUN if [ -n "$LITEHIT_PIP_INDEX_URL" ]; then export PIP_INDEX_URL="$LITEHIT_PIP_INDEX_URL"; fi \
 && python -c "import tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
print('\n'.join(p['dependencies'] + p['optional-dependencies']['flower'] + ['setuptools>=77']))" > requirements.txt \
 && pip install -r requirements.txt
COPY . .
# The wheel (pip compiles the engine); the import is the smoke test of the extension.
RUN pip install --no-deps --no-build-isolation . \
 && cd / && python -c "import core_c._core; import core_c; core_c.Lane().close()"

FROM ${LITEHIT_PYTHON_IMAGE}
COPY --from=build /opt/litehit /opt/litehit
ENV PATH=/opt/litehit/bin:$PATH
WORKDIR /app
# `alembic upgrade head` (the migrate service) reads alembic.ini here; the code is installed.
COPY alembic.ini ./
COPY migrations ./migrations
RUN python -c "import core_c._core; import core_c; core_c.Lane().close()" \
 && useradd --create-home --uid 10001 litehit \
 && mkdir -p /data/storage && chown -R litehit /data

USER litehit
ENV LITEHIT_HOME=/data LITEHIT_STORAGE_ROOT=/data/storage PYTHONUNBUFFERED=1
EXPOSE 8000
CMD ["uvicorn", "api.main:app", "--host", "0.0.0.0", "--port", "8000"]
